"""plan / apply end to end: the CLI against the real broker, checked with
Kafka's own kafka-configs (ConfigCommand) as an independent view."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.apply import apply_plan
from quotaform.cluster.read import read_live_state
from quotaform.formats.plan import PlanDocument
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.plan.diff import compute_plan
from quotaform.plan.outcome import ApplyStatus
from quotaform.plan.state import DesiredEntity, DesiredState, Scope, ScopeRule, SourceLocation

from .helpers import barrier, config_command_view, quota, write_manifest

pytestmark = pytest.mark.broker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"
runner = CliRunner()


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A private copy of examples/ the test may edit."""
    target = tmp_path / "manifests"
    shutil.copytree(EXAMPLES, target)
    return target


def cli(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), input=input)


def declared(path: Path) -> dict[Entity, dict[str, float]]:
    return {e: dict(d.quotas) for e, d in load_manifests([path]).entities.items()}


def edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    """Round-trip edit one YAML file (comments kept)."""
    yaml = YAML()
    doc = yaml.load(path)
    change(doc)
    yaml.dump(doc, path)


def test_apply_examples_matches_config_command_and_second_plan_is_empty(
    clean, bootstrap, config_command
) -> None:  # type: ignore[no-untyped-def]
    result = cli("apply", str(EXAMPLES), "--bootstrap-server", bootstrap, "--auto-approve")
    assert result.exit_code == 0, result.output
    assert "Apply complete" in result.output
    assert config_command_view(config_command) == declared(EXAMPLES)

    again = cli("plan", str(EXAMPLES), "--bootstrap-server", bootstrap, "--detailed-exitcode")
    assert again.exit_code == 0, again.output
    assert "No changes." in again.output


def test_plan_detailed_exitcode_and_json_before_apply(clean, bootstrap) -> None:  # type: ignore[no-untyped-def]
    result = cli(
        "plan", str(EXAMPLES), "--bootstrap-server", bootstrap, "-o", "json", "--detailed-exitcode"
    )
    assert result.exit_code == 2, result.output
    doc = PlanDocument.model_validate_json(result.stdout)
    assert doc.summary.create == len(declared(EXAMPLES))
    assert {c.action for c in doc.changes} == {"create"}
    assert doc.live_state_rpcs == {"DescribeClientQuotas": 4}


def test_changing_one_value_updates_in_place(clean, bootstrap, manifests, config_command) -> None:  # type: ignore[no-untyped-def]
    assert (
        cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve").exit_code
        == 0
    )
    target = Entity.of(user="svc-payments-api")
    before = declared(manifests)

    def bump(doc):  # type: ignore[no-untyped-def]
        for item in doc["spec"]["quotas"]:
            if item["entity"] == {"user": "svc-payments-api"}:
                item["values"]["request_percentage"] = "75%"

    edit(manifests / "payments.yaml", bump)
    plan = cli("plan", str(manifests), "--bootstrap-server", bootstrap, "-o", "json")
    doc = json.loads(plan.stdout)
    pending = [c for c in doc["changes"] if c["action"] != "no-op"]
    assert len(pending) == 1
    assert pending[0]["entity"] == {"user": "svc-payments-api"}
    assert pending[0]["action"] == "update"
    assert pending[0]["key_changes"] == [
        {
            "key": "request_percentage",
            "action": "change",
            "before": 50.0,
            "after": 75.0,
            "fallback": None,
            "fallback_to": None,
        }
    ]

    result = cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve")
    assert result.exit_code == 0, result.output
    view = config_command_view(config_command)
    assert view[target]["request_percentage"] == 75.0
    expected = dict(before)
    expected[target] = {**before[target], "request_percentage": 75.0}
    assert view == expected


def test_removing_an_entity_deletes_only_when_allowed(
    clean, bootstrap, manifests, config_command
) -> None:  # type: ignore[no-untyped-def]
    assert (
        cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve").exit_code
        == 0
    )
    gone = Entity.of(ip="198.51.100.7")

    def drop(doc):  # type: ignore[no-untyped-def]
        quotas = doc["spec"]["quotas"]
        for i, item in enumerate(quotas):
            if item["entity"] == {"ip": "198.51.100.7"}:
                del quotas[i]
                return
        raise AssertionError("example entity not found")

    edit(manifests / "edge-ips.yaml", drop)

    refused = cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve")
    assert refused.exit_code == 1
    assert "deletes are not allowed" in refused.output
    # One flag per kind of risk, all named at once: the delete's fallback to
    # the default 200/s is shown, and needs no second flag.
    assert "(then falls back to ip=<default> (200))" in refused.output
    assert "After review, allow it with: --allow-deletes (on plan and apply)." in refused.output
    assert "--allow-relax" not in refused.output
    assert gone in config_command_view(config_command)

    allowed = cli(
        "apply",
        str(manifests),
        "--bootstrap-server",
        bootstrap,
        "--auto-approve",
        "--allow-deletes",
    )
    assert allowed.exit_code == 0, allowed.output
    assert '- ip="198.51.100.7"' in allowed.output
    view = config_command_view(config_command)
    assert gone not in view
    assert view == declared(manifests)


def scoped(path: Path, value: Any = "1MiB", **fields: Any) -> Path:
    """svc-a's producer_byte_rate (``value``, at line 13) in the scope of the
    svc- users, deletes allowed."""
    return write_manifest(
        path,
        "sandbox",
        [quota({"user": "svc-a"}, producer_byte_rate=value)],
        scope=[{"shape": "user", "prefixes": {"user": ["svc-"]}, "includeDefaults": False}],
        allow_deletes=True,
        **fields,
    )


def test_entity_outside_the_scope_survives_apply(
    clean, bootstrap, tmp_path, config_command
) -> None:  # type: ignore[no-untyped-def]
    manifest = scoped(tmp_path / "scoped.yaml")
    # Created behind the tool's back, outside the scope (no svc- prefix) and
    # as an in-scope entity no manifest declares.
    config_command(
        [
            "--alter",
            "--add-config",
            "producer_byte_rate=4096",
            "--entity-type",
            "users",
            "--entity-name",
            "legacy-app",
        ]
    )
    config_command(
        [
            "--alter",
            "--add-config",
            "producer_byte_rate=4096",
            "--entity-type",
            "users",
            "--entity-name",
            "svc-stray",
        ]
    )

    # Deleting svc-stray leaves its clients to defaults outside the scope (not
    # known here), which the change budget counts as relaxing: allow it.
    result = cli(
        "apply", str(manifest), "--bootstrap-server", bootstrap, "--auto-approve", "--allow-relax"
    )
    assert result.exit_code == 0, result.output
    assert "1 live entity outside the scope left alone" in result.output
    view = config_command_view(config_command)
    assert view == {
        Entity.of(user="legacy-app"): {"producer_byte_rate": 4096.0},
        Entity.of(user="svc-a"): {"producer_byte_rate": 1048576.0},
    }


def test_interactive_apply_needs_a_typed_yes(clean, bootstrap, admin) -> None:  # type: ignore[no-untyped-def]
    declined = cli("apply", str(EXAMPLES), "--bootstrap-server", bootstrap, input="y\n")
    assert declined.exit_code == 1
    assert "Only 'yes' will be accepted" in declined.output
    assert "Error: apply cancelled: only 'yes' approves; nothing was applied" in declined.output
    barrier(admin)
    assert admin.describe_client_quotas([], strict=False) == {}

    accepted = cli("apply", str(EXAMPLES), "--bootstrap-server", bootstrap, input="yes\n")
    assert accepted.exit_code == 0, accepted.output
    assert "Apply complete" in accepted.output


def test_a_rejected_entity_stops_the_batch_at_validate_only(clean, admin, config_command) -> None:  # type: ignore[no-untyped-def]
    # Manifest validation would catch this value, so build the desired state
    # directly: the point is what apply does when the broker says no.
    good = {Entity.of(user=f"ok-{i}"): {"producer_byte_rate": 1024.0} for i in range(5)}
    bad = {Entity.of(user="bad"): {"producer_byte_rate": 1024.5}}
    desired = DesiredState.build(
        cluster="sandbox",
        cluster_id=None,
        scope=Scope((ScopeRule.build(("user",)),)),
        entities=[
            DesiredEntity(e, q, False, SourceLocation("inline", 1))
            for e, q in {**good, **bad}.items()
        ],
    )
    plan = compute_plan(desired, read_live_state(admin, desired.scope))
    result = apply_plan(plan, admin)
    assert result.status is ApplyStatus.REJECTED
    rejected = [r for r in result.entities if r.message]
    assert [r.change.entity for r in rejected] == [Entity.of(user="bad")]
    assert "fractional" in (rejected[0].message or "")
    assert result.rpc_counts == {"AlterClientQuotas": 1}
    barrier(admin)
    assert config_command_view(config_command) == {}


def test_wrong_cluster_id_is_refused(clean, bootstrap, tmp_path) -> None:  # type: ignore[no-untyped-def]
    manifest = scoped(tmp_path / "m.yaml", cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    result = cli("plan", str(manifest), "--bootstrap-server", bootstrap)
    assert result.exit_code == 1
    assert "refusing to plan against the wrong cluster" in result.output


def test_bad_manifest_fails_before_any_rpc(tmp_path) -> None:  # type: ignore[no-untyped-def]
    manifest = scoped(tmp_path / "m.yaml", value=1.5)
    # Port 9 (discard) has no Kafka: reaching the network would fail differently.
    result = cli("validate", str(manifest))
    assert result.exit_code == 1
    assert "m.yaml:13" in result.output
    assert "producer_byte_rate" in result.output
