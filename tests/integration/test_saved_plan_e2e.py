"""plan --out / apply PLANFILE against the real broker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.errors import EXIT_STALE_PLAN
from quotaform.formats.planfile import read_plan_file, write_plan_file
from quotaform.kafka.entity import Entity
from quotaform.plan.model import Plan

from .helpers import config_command_view, eventually, quota, write_manifest

pytestmark = pytest.mark.broker
runner = CliRunner()


def write_quotas(path: Path, *more: dict[str, Any], svc_a: str = "1MiB") -> None:
    """svc-a (producer_byte_rate ``svc_a``) and svc-b, then ``more``, in the
    scope of the svc- users."""
    write_manifest(
        path,
        "sandbox",
        [
            quota({"user": "svc-a"}, producer_byte_rate=svc_a),
            quota({"user": "svc-b"}, consumer_byte_rate="2MiB"),
            *more,
        ],
        scope=[{"shape": "user", "prefixes": {"user": ["svc-"]}}],
    )


@pytest.fixture
def setup(clean, kafka_broker, tmp_path: Path):  # type: ignore[no-untyped-def]
    manifest = tmp_path / "quotas.yaml"
    write_quotas(manifest)
    return str(kafka_broker.bootstrap), manifest, tmp_path / "plan.json"


def cli(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def test_apply_of_a_saved_plan_applies_exactly_that_plan(setup, config_command) -> None:  # type: ignore[no-untyped-def]
    bootstrap, manifest, planfile = setup
    result = cli("plan", str(manifest), "--bootstrap-server", bootstrap, "--out", str(planfile))
    assert result.exit_code == 0, result.output
    # The manifests change after the plan: the saved plan must not see it.
    write_quotas(manifest, quota({"user": "svc-c"}, producer_byte_rate="5MiB"))
    applied = cli("apply", str(planfile), "--bootstrap-server", bootstrap)
    assert applied.exit_code == 0, applied.output
    assert "Apply complete" in applied.output
    assert config_command_view(config_command) == {
        Entity.of(user="svc-a"): {"producer_byte_rate": 1048576.0},
        Entity.of(user="svc-b"): {"consumer_byte_rate": 2097152.0},
    }


def test_a_stale_plan_is_refused_and_names_the_entity(setup, config_command, admin) -> None:  # type: ignore[no-untyped-def]
    bootstrap, manifest, planfile = setup
    assert (
        cli("apply", str(manifest), "--bootstrap-server", bootstrap, "--auto-approve").exit_code
        == 0
    )
    write_quotas(manifest, svc_a="3MiB")
    assert (
        cli(
            "plan", str(manifest), "--bootstrap-server", bootstrap, "--out", str(planfile)
        ).exit_code
        == 0
    )
    # Behind the tool's back, between plan and apply:
    config_command(
        [
            "--alter",
            "--add-config",
            "producer_byte_rate=4096",
            "--entity-type",
            "users",
            "--entity-name",
            "svc-a",
        ]
    )
    from quotaform.cluster.wire import FilterComponent

    eventually(
        lambda: admin.describe_client_quotas([FilterComponent.exact("user", "svc-a")], strict=True),
        lambda d: d.get(Entity.of(user="svc-a")) == {"producer_byte_rate": 4096.0},
    )
    refused = cli("apply", str(planfile), "--bootstrap-server", bootstrap)
    assert refused.exit_code == EXIT_STALE_PLAN, refused.output
    assert "stale" in refused.output
    assert 'user="svc-a"' in refused.output
    # Nothing was applied: the value set behind the tool's back stays.
    assert config_command_view(config_command)[Entity.of(user="svc-a")] == {
        "producer_byte_rate": 4096.0
    }


def test_a_plan_for_another_cluster_is_refused(setup, config_command) -> None:  # type: ignore[no-untyped-def]
    bootstrap, manifest, planfile = setup
    assert (
        cli(
            "plan", str(manifest), "--bootstrap-server", bootstrap, "--out", str(planfile)
        ).exit_code
        == 0
    )
    plan, review = read_plan_file(planfile)
    other = Plan(cluster="prod-eu", cluster_id="AAAAAAAAAAAAAAAAAAAAAA", changes=plan.changes)
    write_plan_file(other, review, planfile)
    refused = cli("apply", str(planfile), "--bootstrap-server", bootstrap)
    assert refused.exit_code == 1
    assert "made for cluster id 'AAAAAAAAAAAAAAAAAAAAAA'" in refused.output
    assert config_command_view(config_command) == {}


def test_a_damaged_plan_file_is_refused(setup, config_command) -> None:  # type: ignore[no-untyped-def]
    bootstrap, manifest, planfile = setup
    assert (
        cli(
            "plan", str(manifest), "--bootstrap-server", bootstrap, "--out", str(planfile)
        ).exit_code
        == 0
    )
    doc = json.loads(planfile.read_text(encoding="utf-8"))
    doc["plan"]["changes"][0]["after"]["producer_byte_rate"] = 999999999.0
    planfile.write_text(json.dumps(doc), encoding="utf-8")
    refused = cli("apply", str(planfile), "--bootstrap-server", bootstrap)
    assert refused.exit_code == 1
    assert "damaged or was edited" in refused.output
    assert config_command_view(config_command) == {}


def test_the_flags_given_to_apply_judge_a_saved_plan(setup, config_command, admin) -> None:  # type: ignore[no-untyped-def]
    bootstrap, manifest, planfile = setup
    from quotaform.cluster.wire import QuotaAlteration

    stray = Entity.of(user="svc-stray")
    admin.alter_client_quotas(
        [QuotaAlteration(stray, {"producer_byte_rate": 4096.0})], validate_only=False
    )
    eventually(lambda: admin.describe_client_quotas([], strict=False), lambda d: stray in d)
    made = cli(
        "plan",
        str(manifest),
        "--bootstrap-server",
        bootstrap,
        "--out",
        str(planfile),
        "--allow-deletes",
        "--allow-relax",
    )
    assert made.exit_code == 0, made.output
    # The file records deletes_allowed: true; apply does not trust it.
    refused = cli("apply", str(planfile), "--bootstrap-server", bootstrap)
    assert refused.exit_code == 1, refused.output
    assert "deletes are not allowed" in refused.output
    assert stray in config_command_view(config_command)
    allowed = cli(
        "apply", str(planfile), "--bootstrap-server", bootstrap, "--allow-deletes", "--allow-relax"
    )
    assert allowed.exit_code == 0, allowed.output
    assert stray not in config_command_view(config_command)
