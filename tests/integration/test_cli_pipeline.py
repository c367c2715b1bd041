"""The CLI in a pipeline, against the real sandbox broker: refused plans are
never saved and say every flag at once in text, markdown and JSON; apply
prints exactly one JSON document whatever happens; apply without input says
how to skip the question; profiles work the same in every command; describe
agrees line for line with kafka-configs.

Each test owns user entities under its own prefix (``uniq``), so they share
the session broker with the other tests.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.wire import FilterComponent, QuotaAdminClient, QuotaAlteration
from quotaform.kafka.entity import Entity

from .helpers import eventually, quota, write_manifest

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
runner = CliRunner()
MiB = 1024 * 1024


def cli(*args: str, input: str | None = None):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args), input=input, env={"NO_COLOR": "1"})


def schema(name: str) -> dict[str, object]:
    return json.loads((SCHEMAS / name).read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def manifest(folder: Path, uniq: str, *quotas: dict[str, Any]) -> Path:
    """A manifest owning the users named ``uniq*``, declaring ``quotas``."""
    scope = [{"shape": "user", "prefixes": {"user": [uniq]}}]
    write_manifest(folder / "m.yaml", "sandbox", quotas, scope=scope)
    return folder


def live(admin: QuotaAdminClient, entity: Entity, quotas: dict[str, float]) -> None:
    admin.alter_client_quotas([QuotaAlteration(entity, quotas)], validate_only=False)
    components = [
        FilterComponent.default(t) if n is None else FilterComponent.exact(t, n)
        for t, n in entity.parts
    ]
    eventually(
        lambda: admin.describe_client_quotas(components, strict=True),
        lambda d: dict(d.get(entity, {})) == quotas,
    )


@pytest.fixture
def risky(tmp_path: Path, admin: QuotaAdminClient, uniq: str) -> Path:
    """Manifests whose plan deletes one entity and removes one key of another:
    two kinds of risk, two flags."""
    live(admin, Entity.of(user=f"{uniq}gone"), {"producer_byte_rate": 1 * MiB})
    live(
        admin,
        Entity.of(user=f"{uniq}kept"),
        {"producer_byte_rate": 1 * MiB, "consumer_byte_rate": 2 * MiB},
    )
    yield manifest(
        tmp_path / "m",
        uniq,
        quota({"user": f"{uniq}kept"}, producer_byte_rate="1MiB"),
    )
    admin.alter_client_quotas(
        [
            QuotaAlteration(Entity.of(user=f"{uniq}gone"), {"producer_byte_rate": None}),
            QuotaAlteration(
                Entity.of(user=f"{uniq}kept"),
                {"producer_byte_rate": None, "consumer_byte_rate": None},
            ),
        ],
        validate_only=False,
    )


# ----------------------------------------------------------------- refused plans


def test_a_refused_plan_exits_1_saves_nothing_and_names_every_flag(
    risky: Path, bootstrap: str, tmp_path: Path
) -> None:
    out = tmp_path / "plan.json"
    flags = "After review, allow it with: --allow-deletes --allow-relax (on plan and apply)."
    text = cli("plan", str(risky), "--bootstrap-server", bootstrap, "--out", str(out))
    assert text.exit_code == 1, text.output
    assert not out.exists()
    assert flags in text.stdout
    assert "Error: the plan breaks 2 guard rail(s) (listed above); no plan file was written" in (
        text.stderr
    )
    markdown = cli("plan", str(risky), "--bootstrap-server", bootstrap, "-o", "markdown")
    assert markdown.exit_code == 1
    assert flags in markdown.stdout
    as_json = cli("plan", str(risky), "--bootstrap-server", bootstrap, "-o", "json")
    assert as_json.exit_code == 1
    document = json.loads(as_json.stdout)
    jsonschema.validate(document, schema("plan.schema.json"))
    assert (document["refused"], document["allow_flags"]) == (
        True,
        ["--allow-deletes", "--allow-relax"],
    )
    assert sorted(v["kind"] for v in document["violations"]) == ["delete", "relax"]

    # With both flags the same plan is fine and saved: one flag per kind of risk.
    allowed = cli(
        "plan", str(risky), "--bootstrap-server", bootstrap, "--allow-deletes", "--allow-relax",
        "--detailed-exitcode", "-out", str(out),
    )  # fmt: skip
    assert allowed.exit_code == 2, allowed.output
    assert out.exists()


def test_a_removed_key_alone_says_how_to_review_it(
    tmp_path: Path, admin: QuotaAdminClient, bootstrap: str, uniq: str
) -> None:
    entity = Entity.of(user=f"{uniq}a")
    live(admin, entity, {"producer_byte_rate": 1 * MiB, "consumer_byte_rate": 2 * MiB})
    folder = manifest(
        tmp_path / "m",
        uniq,
        quota({"user": f"{uniq}a"}, producer_byte_rate="1MiB"),
    )
    result = cli("plan", str(folder), "--bootstrap-server", bootstrap)
    assert result.exit_code == 1
    assert "- consumer_byte_rate = 2MiB  (then " in result.stdout  # what clients get instead
    assert "After review, allow it with: --allow-relax (on plan and apply)." in result.stdout
    assert "--allow-deletes" not in result.stdout
    admin.alter_client_quotas(
        [QuotaAlteration(entity, {"producer_byte_rate": None, "consumer_byte_rate": None})],
        validate_only=False,
    )


# ----------------------------------------------------------------- apply: one document


def test_apply_prints_one_json_document_whatever_happens(
    risky: Path, bootstrap: str, tmp_path: Path, uniq: str
) -> None:
    apply_schema = schema("apply.schema.json")

    refused = cli("apply", str(risky), "--bootstrap-server", bootstrap, "-o", "json")
    assert refused.exit_code == 1
    document = json.loads(refused.stdout)  # exactly one document: loads() refuses two
    jsonschema.validate(document, apply_schema)
    assert document["status"] == "refused"
    assert "--allow-deletes" in document["error"] and "--allow-relax" in document["error"]
    assert document["plan"]["refused"] is True
    assert "Plan: 0 to create, 1 to update, 1 to delete." in refused.stderr  # the plan, as text

    cancelled = cli(
        "apply", str(risky), "--bootstrap-server", bootstrap, "--allow-deletes", "--allow-relax",
        "-o", "json", input="no\n",
    )  # fmt: skip
    assert cancelled.exit_code == 1
    document = json.loads(cancelled.stdout)
    jsonschema.validate(document, apply_schema)
    assert document["status"] == "cancelled"

    applied = cli(
        "apply", str(risky), "--bootstrap-server", bootstrap, "--allow-deletes", "--allow-relax",
        "-o", "json", "-auto-approve",
    )  # fmt: skip
    assert applied.exit_code == 0, applied.output
    document = json.loads(applied.stdout)
    jsonschema.validate(document, apply_schema)
    assert (document["format_version"], document["status"]) == (1, "applied")
    assert document["counts"] == {"applied": 2, "failed": 0, "unknown": 0, "not-applied": 0}
    assert document["plan"]["summary"] == {"create": 0, "update": 1, "delete": 1, "no-op": 0}

    nothing = cli("apply", str(risky), "--bootstrap-server", bootstrap, "-o", "json")
    assert nothing.exit_code == 0, nothing.output
    document = json.loads(nothing.stdout)
    jsonschema.validate(document, apply_schema)
    assert (document["status"], document["entities"]) == ("nothing-to-do", [])


def test_a_stale_saved_plan_is_one_json_document_with_exit_5(
    tmp_path: Path, admin: QuotaAdminClient, bootstrap: str, uniq: str
) -> None:
    entity = Entity.of(user=f"{uniq}s")
    folder = manifest(
        tmp_path / "m",
        uniq,
        quota({"user": f"{uniq}s"}, producer_byte_rate="1MiB"),
    )
    out = tmp_path / "plan.json"
    assert (
        cli("plan", str(folder), "--bootstrap-server", bootstrap, "--out", str(out)).exit_code == 0
    )
    live(admin, entity, {"producer_byte_rate": 5.0})  # behind the plan's back
    result = cli("apply", str(out), "--bootstrap-server", bootstrap, "-o", "json")
    assert result.exit_code == 5, result.output
    document = json.loads(result.stdout)
    jsonschema.validate(document, schema("apply.schema.json"))
    assert document["status"] == "stale"
    moved = f'user="{uniq}s": planned from (no quotas), now producer_byte_rate=5'
    assert moved in document["error"]
    admin.alter_client_quotas(
        [QuotaAlteration(entity, {"producer_byte_rate": None})], validate_only=False
    )


def test_apply_without_input_says_how_to_skip_the_question(
    tmp_path: Path, bootstrap: str, uniq: str
) -> None:
    folder = manifest(
        tmp_path / "m",
        uniq,
        quota({"user": f"{uniq}q"}, producer_byte_rate="1MiB"),
    )
    result = cli("apply", str(folder), "--bootstrap-server", bootstrap)  # stdin: empty, closed
    assert result.exit_code == 1
    assert "Aborted" not in result.output
    assert result.stderr.splitlines()[-1].startswith(
        "Error: apply needs a typed 'yes' to go ahead, but there is no input to read"
    )
    assert "pass --auto-approve (-auto-approve)" in result.stderr


# ----------------------------------------------------------------- profiles everywhere


def test_profiles_work_the_same_in_every_command(
    tmp_path: Path,
    admin: QuotaAdminClient,
    bootstrap: str,
    uniq: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for var in ("QUOTAFORM_BOOTSTRAP_SERVER", "QUOTAFORM_COMMAND_CONFIG", "QUOTAFORM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    folder = manifest(
        tmp_path / "repo",
        uniq,
        quota({"user": f"{uniq}p"}, producer_byte_rate="1MiB"),
    )
    # The profiles file beside the manifests: never read as one, used by every command.
    (folder / "quotaform.clusters.yaml").write_text(
        f"clusters:\n  sandbox:\n    bootstrapServers: {bootstrap}\n", encoding="utf-8"
    )
    assert cli("validate", str(folder)).exit_code == 0
    plan = cli("plan", str(folder), "--detailed-exitcode")  # no flag: the manifests' cluster
    assert plan.exit_code == 2, plan.output
    assert cli("apply", str(folder), "--auto-approve").exit_code == 0
    assert cli("drift", str(folder)).exit_code == 0
    config = ["--config", str(folder / "quotaform.clusters.yaml")]
    described = cli("describe", "--cluster", "sandbox", *config, "--user", f"{uniq}p")
    assert described.stdout == (
        f"Quota configs for user-principal '{uniq}p' are producer_byte_rate=1048576.0\n"
    )
    exported = cli(
        "export", "--cluster", "sandbox", *config, "--shape", "user", "--prefix", f"user={uniq}"
    )
    assert exported.exit_code == 0, exported.output
    assert "cluster: sandbox" in exported.stdout and f"user: {uniq}p" in exported.stdout
    imported = cli(
        "import", str(folder), "--into", str(folder / "m.yaml"), "--cluster", "sandbox", *config
    )
    assert imported.exit_code == 0, imported.output
    assert "Nothing to import" in imported.stdout
    admin.alter_client_quotas(
        [QuotaAlteration(Entity.of(user=f"{uniq}p"), {"producer_byte_rate": None})],
        validate_only=False,
    )


def test_describe_agrees_with_kafka_configs(
    admin: QuotaAdminClient, bootstrap: str, uniq: str, config_command
) -> None:  # type: ignore[no-untyped-def]
    live(
        admin,
        Entity.of(user=f"{uniq}d"),
        {"consumer_byte_rate": 20 * MiB, "request_percentage": 12.5},
    )
    live(admin, Entity.of(user=f"{uniq}d", client_id=None), {"producer_byte_rate": 3 * MiB})
    for args in (
        ["--entity-type", "users", "--entity-name", f"{uniq}d"],
        ["--entity-type", "users", "--entity-type", "clients"],
        ["--user", f"{uniq}d", "--client-defaults"],
    ):
        ours = cli("describe", "--bootstrap-server", bootstrap, *args)
        assert ours.exit_code == 0, ours.output
        kafkas = config_command(["--describe", *args]).stdout
        assert sorted(ours.stdout.splitlines()) == sorted(kafkas.splitlines()), args
        assert ours.stdout.strip()  # something was compared
    admin.alter_client_quotas(
        [
            QuotaAlteration(
                Entity.of(user=f"{uniq}d"), {"consumer_byte_rate": None, "request_percentage": None}
            ),
            QuotaAlteration(
                Entity.of(user=f"{uniq}d", client_id=None), {"producer_byte_rate": None}
            ),
        ],
        validate_only=False,
    )
