"""export / import end to end against the real broker: what export writes
plans with no changes, and import fills in what the manifests miss while
keeping their comments. Kafka's own kafka-configs (ConfigCommand) creates the
entities "behind the tool's back" and gives the independent view."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import typer
from ruamel.yaml import YAML
from typer.testing import CliRunner

from quotaform.app.plan import make_plan
from quotaform.cli.app import _QuotaformGroup
from quotaform.cli.export import register as register_export
from quotaform.cli.plan import register as register_plan
from quotaform.cli.validate import register as register_validate
from quotaform.cluster.apply import apply_plan
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.plan.outcome import ApplyStatus

from .helpers import barrier, config_command_view

pytestmark = pytest.mark.broker

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "manifests"
runner = CliRunner()


def _app() -> typer.Typer:
    app = typer.Typer(cls=_QuotaformGroup)
    register_validate(app)
    register_plan(app)
    register_export(app)
    return app


APP = _app()


def cli(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(APP, list(args))


def declared(*paths: Path) -> dict[Entity, dict[str, float]]:
    return {e: dict(d.quotas) for e, d in load_manifests(list(paths)).entities.items()}


def comments(text: str) -> list[str]:
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


@pytest.fixture
def applied(clean, admin) -> None:  # type: ignore[no-untyped-def]
    """The broker holds exactly what examples/ declares."""
    _, plan, _ = make_plan([EXAMPLES], admin)
    result = apply_plan(plan, admin)
    assert result.status is ApplyStatus.APPLIED


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A private copy of examples/ the test may edit."""
    target = tmp_path / "manifests"
    shutil.copytree(EXAMPLES, target)
    return target


def alter(config_command, entity_type: str, name: str, config: str) -> None:  # type: ignore[no-untyped-def]
    config_command(
        [
            "--alter",
            "--add-config",
            config,
            "--entity-type",
            entity_type,
            "--entity-name",
            name,
        ]
    )


def test_export_then_plan_shows_no_changes(
    applied, admin, bootstrap, tmp_path, config_command
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "exported.yaml"
    result = cli(
        "export",
        "--cluster-name",
        "sandbox",
        "--pin-cluster-id",
        "--out",
        str(out),
        "--bootstrap-server",
        bootstrap,
    )
    assert result.exit_code == 0, result.output
    live = config_command_view(config_command)
    assert f"Exported {len(live)} entities" in result.output

    text = out.read_text(encoding="utf-8")
    assert text.startswith("# Exported by quotaform")
    assert f"from the live cluster at {bootstrap}" in text
    assert "- entity: {user: {default: true}, client-id: {default: true}}" in text
    assert 'values: {request_percentage: "25%"}' in text
    assert '{ip: "2001:db8::10"}' in text
    desired = load_manifests([out])
    assert desired.cluster_id == admin.cluster_id()
    assert declared(out) == live == declared(EXAMPLES)

    plan = cli("plan", str(out), "--bootstrap-server", bootstrap, "--detailed-exitcode")
    assert plan.exit_code == 0, plan.output
    assert "No changes." in plan.output

    again = cli(
        "export", "--cluster-name", "sandbox", "--out", str(out), "--bootstrap-server", bootstrap
    )
    assert again.exit_code == 1
    assert "already exists: pass --force" in again.output
    assert out.read_text(encoding="utf-8") == text


def test_export_of_one_shape_with_a_prefix_to_stdout(
    applied, bootstrap, tmp_path, config_command
) -> None:  # type: ignore[no-untyped-def]
    # An odd name and a literal "<default>" user, both outside examples/.
    alter(config_command, "users", "svc-payments-<default>", "producer_byte_rate=1536")
    alter(config_command, "users", "<default>", "consumer_byte_rate=2048")
    result = cli(
        "export",
        "--cluster-name",
        "sandbox",
        "--shape",
        "user",
        "--prefix",
        "user=svc-payments-",
        "--exclude-defaults",
        "--bootstrap-server",
        bootstrap,
    )
    assert result.exit_code == 0, result.output
    doc = YAML(typ="safe").load(result.stdout)
    assert doc["spec"]["scope"] == [
        {"shape": "user", "prefixes": {"user": ["svc-payments-"]}, "includeDefaults": False}
    ]
    assert [q["entity"] for q in doc["spec"]["quotas"]] == [
        {"user": "svc-payments-<default>"},
        {"user": "svc-payments-api"},
        {"user": "svc-payments-ledger"},
    ]
    out = tmp_path / "users.yaml"
    out.write_text(result.stdout, encoding="utf-8")
    assert declared(out)[Entity.of(user="svc-payments-<default>")] == {"producer_byte_rate": 1536.0}

    plan = cli("plan", str(out), "--bootstrap-server", bootstrap, "--detailed-exitcode")
    assert plan.exit_code == 0, plan.output

    everything = cli(
        "export", "--cluster-name", "sandbox", "--shape", "user", "--bootstrap-server", bootstrap
    )
    assert everything.exit_code == 0, everything.output
    assert '- entity: {user: "<default>"}  # "<default>" is an ordinary user name here' in (
        everything.stdout
    )


def test_import_adds_live_entities_and_keeps_comments(
    applied, admin, bootstrap, manifests, config_command
) -> None:  # type: ignore[no-untyped-def]
    alter(config_command, "users", "svc-payments-fraud", "producer_byte_rate=3145728")
    alter(config_command, "ips", "192.0.2.77", "connection_creation_rate=7")
    barrier(admin)
    into = manifests / "payments.yaml"
    original = into.read_text(encoding="utf-8")

    # Until imported, the live entities are unexpected: the plan would delete
    # them, which it refuses (exit 1) naming the one flag that would allow it.
    before = cli("plan", str(manifests), "--bootstrap-server", bootstrap, "--detailed-exitcode")
    assert before.exit_code == 1, before.output
    assert "After review, allow it with: --allow-deletes (on plan and apply)." in before.output

    result = cli("import", str(manifests), "--into", str(into), "--bootstrap-server", bootstrap)
    assert result.exit_code == 0, result.output
    assert '  + user="svc-payments-fraud"' in result.output
    assert '  + ip="192.0.2.77"' in result.output
    assert f"Imported 2 entities into {into}" in result.output

    edited = into.read_text(encoding="utf-8")
    assert edited.startswith(original)
    assert comments(edited)[: len(comments(original))] == comments(original)
    assert edited.count("# imported from the live cluster ") == 2
    assert (
        "    - entity: {user: svc-payments-fraud}\n"
        "      values:\n"
        "        producer_byte_rate: 3MiB\n"
    ) in edited
    for other in ("00-cluster.yaml", "edge-ips.yaml", "search.yaml"):
        assert (manifests / other).read_bytes() == (EXAMPLES / other).read_bytes()
    assert declared(manifests) == config_command_view(config_command)

    after = cli("plan", str(manifests), "--bootstrap-server", bootstrap, "--detailed-exitcode")
    assert after.exit_code == 0, after.output
    assert "No changes." in after.output

    nothing = cli("import", str(manifests), "--into", str(into), "--bootstrap-server", bootstrap)
    assert nothing.exit_code == 0, nothing.output
    assert "Nothing to import" in nothing.output
    assert into.read_text(encoding="utf-8") == edited


def test_import_update_adopts_drift(applied, admin, bootstrap, manifests, config_command) -> None:  # type: ignore[no-untyped-def]
    alter(config_command, "users", "svc-search-query", "consumer_byte_rate=16777216")
    barrier(admin)
    into = manifests / "payments.yaml"

    plain = cli("import", str(manifests), "--into", str(into), "--bootstrap-server", bootstrap)
    assert plain.exit_code == 0, plain.output
    assert "Nothing to import" in plain.output

    result = cli(
        "import", str(manifests), "--into", str(into), "--update", "--bootstrap-server", bootstrap
    )
    assert result.exit_code == 0, result.output
    assert f'  ~ user="svc-search-query" ({manifests / "search.yaml"})' in result.output
    search = (manifests / "search.yaml").read_text(encoding="utf-8")
    assert comments(search) == comments((EXAMPLES / "search.yaml").read_text(encoding="utf-8"))
    assert "        consumer_byte_rate: 16MiB\n" in search

    plan = cli("plan", str(manifests), "--bootstrap-server", bootstrap, "--detailed-exitcode")
    assert plan.exit_code == 0, plan.output


def test_import_refuses_a_file_outside_the_set(clean, bootstrap, manifests, tmp_path) -> None:  # type: ignore[no-untyped-def]
    outside = tmp_path / "payments.yaml"
    shutil.copy(EXAMPLES / "payments.yaml", outside)
    result = cli("import", str(manifests), "--into", str(outside), "--bootstrap-server", bootstrap)
    assert result.exit_code == 1
    assert "is not one of the manifest files given" in result.output
    assert outside.read_bytes() == (EXAMPLES / "payments.yaml").read_bytes()
