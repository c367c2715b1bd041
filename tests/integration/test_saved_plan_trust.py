"""A saved plan file is checked again at apply, never trusted: the tampering
a review found (values multiplied by 1,000, an injected delete, a removed
cluster id, each with the checksum recomputed) is refused, against the
manifests' settings when they are given; and a signing key lets the apply job
know the plan job wrote the file."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.wire import QuotaAlteration
from quotaform.kafka.entity import Entity

from .helpers import config_command_view, eventually, quota, write_manifest

pytestmark = pytest.mark.broker
runner = CliRunner()
MiB = 1048576.0
SVC_A = Entity.of(user="svc-a")


def write_svc_a(path: Path) -> Path:
    """svc-a at 2MiB, in the scope of the svc- users."""
    return write_manifest(
        path,
        "sandbox",
        [quota({"user": "svc-a"}, producer_byte_rate="2MiB")],
        scope=[{"shape": "user", "prefixes": {"user": ["svc-"]}}],
    )


@pytest.fixture
def saved(clean, kafka_broker, admin, tmp_path: Path):  # type: ignore[no-untyped-def]
    """svc-a live at 1MiB, a saved plan raising it to 2MiB."""
    admin.alter_client_quotas(
        [QuotaAlteration(SVC_A, {"producer_byte_rate": MiB})], validate_only=False
    )
    eventually(lambda: admin.describe_client_quotas([], strict=False), lambda d: SVC_A in d)
    manifest = write_svc_a(tmp_path / "quotas.yaml")
    planfile = tmp_path / "plan.json"
    made = runner.invoke(
        app,
        [
            "plan",
            str(manifest),
            "--bootstrap-server",
            kafka_broker.bootstrap,
            "--out",
            str(planfile),
        ],
    )
    assert made.exit_code == 0, made.output
    return kafka_broker.bootstrap, manifest, planfile


def tamper(planfile: Path, edit: Any) -> None:
    """Edit the plan inside the file and recompute its (unkeyed) checksum."""
    doc = json.loads(planfile.read_text(encoding="utf-8"))
    edit(doc["plan"])
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    doc["checksum"] = hashlib.sha256(canonical.encode()).hexdigest()
    planfile.write_text(json.dumps(doc), encoding="utf-8")


def apply(bootstrap: str, *args: str, env: dict[str, str] | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, ["apply", *args, "--bootstrap-server", bootstrap], env=env)


def times_1000(plan: dict[str, Any]) -> None:
    for change in plan["changes"]:
        change["after"] = {k: v * 1000 for k, v in change["after"].items()}
        for kc in change["key_changes"]:
            kc["after"] = kc["after"] * 1000 if kc["after"] is not None else None


def test_values_multiplied_by_1000_are_refused_by_the_relax_guard_again(
    saved, config_command
) -> None:  # type: ignore[no-untyped-def]
    bootstrap, manifest, planfile = saved
    tamper(planfile, times_1000)
    refused = apply(bootstrap, str(planfile))
    assert refused.exit_code == 1, refused.output
    assert "rises from 1MiB to 2000MiB: 2,000x" in refused.output
    assert "--allow-relax" in refused.output
    # With the manifests, the edit itself is caught.
    mismatch = apply(bootstrap, str(planfile), str(manifest), "--allow-relax")
    assert mismatch.exit_code == 1
    assert 'does not match the manifests for 1 entity (user="svc-a")' in mismatch.output
    # deepdiff names what differs, numbers compared as Kafka does.
    assert "plan.changes[0].after.producer_byte_rate: 2097152000 != 2097152" in mismatch.output
    assert config_command_view(config_command) == {SVC_A: {"producer_byte_rate": MiB}}


def test_an_injected_delete_is_not_allowed_by_the_file(saved, admin, config_command) -> None:  # type: ignore[no-untyped-def]
    bootstrap, _, planfile = saved
    victim = Entity.of(user="svc-victim")
    admin.alter_client_quotas(
        [QuotaAlteration(victim, {"producer_byte_rate": MiB})], validate_only=False
    )
    eventually(lambda: admin.describe_client_quotas([], strict=False), lambda d: victim in d)

    def inject(plan: dict[str, Any]) -> None:
        plan["deletes_allowed"] = True
        plan["changes"].append(
            {
                "entity": {"user": "svc-victim"},
                "action": "delete",
                "before": {"producer_byte_rate": MiB},
                "after": {},
                "key_changes": [
                    {"key": "producer_byte_rate", "action": "remove", "before": MiB, "after": None}
                ],
                "source": None,
            }
        )
        plan["summary"]["delete"] = 1

    tamper(planfile, inject)
    refused = apply(bootstrap, str(planfile))
    assert refused.exit_code == 1, refused.output
    assert "deletes are not allowed" in refused.output
    assert "svc-victim" in refused.output
    assert victim in config_command_view(config_command)


def test_a_plan_without_a_cluster_id_is_refused(saved, config_command) -> None:  # type: ignore[no-untyped-def]
    bootstrap, _, planfile = saved
    tamper(planfile, lambda plan: plan.update(cluster_id=None))
    refused = apply(bootstrap, str(planfile))
    assert refused.exit_code == 1
    assert "records no cluster id" in refused.output
    assert config_command_view(config_command) == {SVC_A: {"producer_byte_rate": MiB}}


def test_a_signing_key_proves_the_plan_job_wrote_the_file(
    clean, kafka_broker, admin, config_command, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    admin.alter_client_quotas(
        [QuotaAlteration(SVC_A, {"producer_byte_rate": MiB})], validate_only=False
    )
    eventually(lambda: admin.describe_client_quotas([], strict=False), lambda d: SVC_A in d)
    bootstrap = kafka_broker.bootstrap
    manifest = write_svc_a(tmp_path / "quotas.yaml")
    signed, unsigned = tmp_path / "signed.json", tmp_path / "unsigned.json"
    key = {"QUOTAFORM_PLAN_KEY": "a-long-random-ci-secret"}
    args = ["plan", str(manifest), "--bootstrap-server", bootstrap, "--out"]
    assert runner.invoke(app, [*args, str(signed)], env=key).exit_code == 0
    assert runner.invoke(app, [*args, str(unsigned)]).exit_code == 0
    text = signed.read_text(encoding="utf-8")
    assert '"alg": "HMAC-SHA256"' in text and key["QUOTAFORM_PLAN_KEY"] not in text

    not_signed = apply(bootstrap, str(unsigned), env=key)
    assert not_signed.exit_code == 1 and "is not signed" in not_signed.output
    other_key = apply(bootstrap, str(signed), env={"QUOTAFORM_PLAN_KEY": "another-key"})
    assert other_key.exit_code == 1 and "does not match QUOTAFORM_PLAN_KEY" in other_key.output
    edited = tmp_path / "edited.json"
    edited.write_text(signed.read_text(encoding="utf-8"), encoding="utf-8")
    tamper(edited, lambda plan: plan.update(cluster="other"))
    forged = apply(bootstrap, str(edited), env=key)
    assert forged.exit_code == 1 and "does not match QUOTAFORM_PLAN_KEY" in forged.output
    assert config_command_view(config_command) == {SVC_A: {"producer_byte_rate": MiB}}

    ok = apply(bootstrap, str(signed), str(manifest), env=key)
    assert ok.exit_code == 0, ok.output
    assert config_command_view(config_command) == {SVC_A: {"producer_byte_rate": 2 * MiB}}


def send_1000x(plan: dict[str, Any]) -> None:
    """What apply sends multiplied by 1,000; before/after (what the reviewer,
    the guard rails and the manifests cross-check see) left as planned."""
    for change in plan["changes"]:
        for kc in change["key_changes"]:
            if kc["after"] is not None:
                kc["after"] = kc["after"] * 1000


def test_key_changes_that_differ_from_the_reviewed_values_are_never_sent(
    saved, config_command
) -> None:  # type: ignore[no-untyped-def]
    bootstrap, manifest, planfile = saved
    tamper(planfile, send_1000x)
    for args in ([str(planfile), str(manifest)], [str(planfile)]):
        refused = apply(bootstrap, *args)
        assert refused.exit_code == 1, refused.output
        assert "does not follow from the plan's before and after values" in refused.output
        assert "plan.changes[0].key_changes[0].after: 2097152000 != 2097152" in refused.output
        assert "read-back" not in refused.output
    assert config_command_view(config_command) == {SVC_A: {"producer_byte_rate": MiB}}


def test_a_nan_quota_value_never_reaches_the_broker(saved, config_command) -> None:  # type: ignore[no-untyped-def]
    bootstrap, _, planfile = saved
    text = planfile.read_text(encoding="utf-8").replace("2097152.0", "NaN")
    planfile.write_text(text, encoding="utf-8")
    tamper(planfile, lambda plan: None)  # the checksum recomputed over the NaN
    refused = apply(bootstrap, str(planfile))
    assert refused.exit_code == 1, refused.output
    errors = [line for line in refused.output.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "NaN is not a number JSON allows" in errors[0], refused.output
    assert config_command_view(config_command) == {SVC_A: {"producer_byte_rate": MiB}}


def test_an_empty_signing_key_never_means_unsigned(saved, config_command, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # What a CI system passes for a secret it does not have.
    bootstrap, manifest, planfile = saved
    empty = {"QUOTAFORM_PLAN_KEY": ""}
    out = tmp_path / "empty-key.json"
    made = runner.invoke(
        app,
        ["plan", str(manifest), "--bootstrap-server", bootstrap, "--out", str(out)],
        env=empty,
    )
    assert made.exit_code == 1, made.output
    assert made.output.count("Error:") == 1 and "QUOTAFORM_PLAN_KEY is set but empty" in (
        made.output
    )
    assert not out.exists()
    # An unsigned (forged) plan is not accepted either: the key is not "off".
    tamper(planfile, times_1000)
    forged = apply(bootstrap, str(planfile), "--allow-relax", env=empty)
    assert forged.exit_code == 1, forged.output
    assert "QUOTAFORM_PLAN_KEY is set but empty" in forged.output
    assert config_command_view(config_command) == {SVC_A: {"producer_byte_rate": MiB}}
