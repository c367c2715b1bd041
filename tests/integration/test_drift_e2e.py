"""drift end to end: the command against the real broker, with drift made
behind quotaform's back by Kafka's own kafka-configs (ConfigCommand)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

import quotaform.app.drift as drift_step
import quotaform.cli.drift as drift_cli
from quotaform.app.plan import make_plan
from quotaform.cli.app import _QuotaformGroup
from quotaform.cluster.apply import apply_plan
from quotaform.formats.drift import DriftDocument
from quotaform.kafka.entity import Entity
from quotaform.plan.outcome import ApplyStatus
from quotaform.plan.state import ChangeBudget

from .helpers import barrier, config_command_view, eventually, quota, write_manifest

pytestmark = pytest.mark.broker

SCOPE = [
    {"shape": "user", "prefixes": {"user": ["svc-"]}, "includeDefaults": False},
    {"shape": "ip"},
]
QUOTAS = [
    quota({"user": "svc-a"}, producer_byte_rate="1MiB", consumer_byte_rate="2MiB"),  # line 13
    quota({"user": "svc-b"}, producer_byte_rate="512KiB"),  # line 15
    quota({"ip": "192.0.2.10"}, connection_creation_rate=20),
]


def write(path: Path, **fields: Any) -> Path:
    return write_manifest(path, "sandbox", QUOTAS, scope=SCOPE, allow_deletes=True, **fields)


SVC_A = Entity.of(user="svc-a")
SVC_B = Entity.of(user="svc-b")
SVC_STRAY = Entity.of(user="svc-stray")
LEGACY = Entity.of(user="legacy-app")
REPORTING = Entity.of(client_id="reporting")
IP_10 = Entity.of(ip="192.0.2.10")

DECLARED = {
    SVC_A: {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
    SVC_B: {"producer_byte_rate": 524288.0},
    IP_10: {"connection_creation_rate": 20.0},
}


@pytest.fixture
def manifest(tmp_path: Path) -> Path:
    return write(tmp_path / "svc.yaml")


def drift_app() -> typer.Typer:
    """The real app's error handling with only ``drift`` registered."""
    app = typer.Typer(cls=_QuotaformGroup, rich_markup_mode=None)

    @app.callback()
    def _root() -> None:
        """Test root."""

    drift_cli.register(app)
    return app


def run_drift(*args: str) -> Any:
    return CliRunner().invoke(drift_app(), ["drift", *args])


def settle(admin, expected: dict[Entity, dict[str, float]]) -> None:  # type: ignore[no-untyped-def]
    """Wait until describe shows exactly ``expected`` on the whole broker
    (so the next read sees every earlier alter, and no barrier marker)."""
    eventually(lambda: admin.describe_client_quotas([], strict=False), lambda d: d == expected)


def apply_manifest(admin, manifest: Path) -> None:  # type: ignore[no-untyped-def]
    # Re-applying raises values set lower behind the tool's back: allow it.
    flags = ChangeBudget(allow_relax=True, allow_deletes=True)
    _, plan, _ = make_plan([manifest], admin, flags=flags)
    result = apply_plan(plan, admin)
    assert result.status is ApplyStatus.APPLIED, result


def alter(config_command, entity_type: str, name: str, *args: str) -> None:  # type: ignore[no-untyped-def]
    config_command(["--alter", *args, "--entity-type", entity_type, "--entity-name", name])


def test_drift_classes_exit_codes_and_no_writes(
    clean, admin, bootstrap, manifest, config_command, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    apply_manifest(admin, manifest)
    settle(admin, DECLARED)

    in_sync = run_drift(str(manifest), "--bootstrap-server", bootstrap, "--output", "json")
    assert in_sync.exit_code == 0, in_sync.output
    doc = DriftDocument.model_validate_json(in_sync.stdout)
    assert doc.in_sync is True
    assert (doc.changed, doc.missing, doc.unexpected) == ([], [], [])
    assert doc.summary.matching == 3
    assert doc.unmanaged.total == 0

    # Drift behind quotaform's back, with Kafka's own tool.
    alter(config_command, "users", "svc-a", "--add-config", "producer_byte_rate=4096")
    alter(config_command, "users", "svc-b", "--delete-config", "producer_byte_rate")
    alter(config_command, "users", "svc-stray", "--add-config", "consumer_byte_rate=8192")
    alter(config_command, "users", "legacy-app", "--add-config", "producer_byte_rate=4096")
    alter(config_command, "clients", "reporting", "--add-config", "request_percentage=10")
    drifted = {
        SVC_A: {"producer_byte_rate": 4096.0, "consumer_byte_rate": 2097152.0},
        IP_10: {"connection_creation_rate": 20.0},
        SVC_STRAY: {"consumer_byte_rate": 8192.0},
        LEGACY: {"producer_byte_rate": 4096.0},
        REPORTING: {"request_percentage": 10.0},
    }
    settle(admin, drifted)
    view_before = config_command_view(config_command)
    assert view_before == drifted

    # Spy on the connection: drift must open the client read-only.
    opened: list[bool] = []
    real_connect = drift_step.connect

    def spy(settings, *, read_only, **kwargs):  # type: ignore[no-untyped-def]
        client = real_connect(settings, read_only=read_only, **kwargs)
        opened.append(client.read_only)
        return client

    monkeypatch.setattr(drift_step, "connect", spy)
    result = run_drift(str(manifest), "--bootstrap-server", bootstrap, "-o", "json")
    assert result.exit_code == 2, result.output
    assert opened == [True]
    doc = DriftDocument.model_validate_json(result.stdout)
    assert doc.in_sync is False
    assert doc.cluster == "sandbox"
    assert doc.cluster_id is not None and doc.cluster_id == admin.cluster_id()

    assert [c.model_dump() for c in doc.changed] == [
        {
            "entity": {"user": "svc-a"},
            "declared": {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 1048576.0},
            "live": {"consumer_byte_rate": 2097152.0, "producer_byte_rate": 4096.0},
            "key_changes": [
                {
                    "key": "producer_byte_rate",
                    "drift": "changed",
                    "declared": 1048576.0,
                    "live": 4096.0,
                }
            ],
            "source": f"{manifest}:13",
        }
    ]
    assert [c.model_dump() for c in doc.missing] == [
        {
            "entity": {"user": "svc-b"},
            "declared": {"producer_byte_rate": 524288.0},
            "live": {},
            "key_changes": [
                {
                    "key": "producer_byte_rate",
                    "drift": "missing",
                    "declared": 524288.0,
                    "live": None,
                }
            ],
            "source": f"{manifest}:15",
        }
    ]
    assert [c.model_dump() for c in doc.unexpected] == [
        {
            "entity": {"user": "svc-stray"},
            "declared": {},
            "live": {"consumer_byte_rate": 8192.0},
            "key_changes": [
                {
                    "key": "consumer_byte_rate",
                    "drift": "unexpected",
                    "declared": None,
                    "live": 8192.0,
                }
            ],
            "source": None,
        }
    ]
    # Outside the scope: counted per shape, never listed.
    assert doc.unmanaged.total == 2
    assert doc.unmanaged.by_shape == {"user": 1, "client-id": 1, "user+client-id": 0, "ip": 0}
    assert "legacy-app" not in result.stdout and "reporting" not in result.stdout
    assert (doc.summary.changed, doc.summary.missing, doc.summary.unexpected) == (1, 1, 1)
    assert doc.summary.matching == 1
    assert doc.summary.text == (
        "Drift: 1 changed, 1 missing, 1 unexpected "
        "(2 unmanaged entities outside the scope left alone)."
    )
    assert doc.live_state_rpcs == {"DescribeClientQuotas": 4}

    text = run_drift(str(manifest), "--bootstrap-server", bootstrap)
    assert text.exit_code == 2, text.output
    assert "producer_byte_rate: declared 1MiB, live 4KiB" in text.stdout
    assert doc.summary.text in text.stdout

    # Drift wrote nothing: once every earlier alter is visible (barrier), Kafka's
    # own view is what it was before.
    barrier(admin)
    settle(admin, drifted)
    assert config_command_view(config_command) == view_before

    # Re-applying repairs the scope and leaves the unmanaged entities alone.
    apply_manifest(admin, manifest)
    repaired = {**DECLARED, LEGACY: drifted[LEGACY], REPORTING: drifted[REPORTING]}
    settle(admin, repaired)
    again = run_drift(str(manifest), "--bootstrap-server", bootstrap, "-o", "json")
    assert again.exit_code == 0, again.output
    doc = DriftDocument.model_validate_json(again.stdout)
    assert doc.in_sync is True
    assert doc.summary.matching == 3
    assert doc.unmanaged.by_shape == {"user": 1, "client-id": 1, "user+client-id": 0, "ip": 0}
    assert doc.summary.text == "No drift: the cluster matches the manifests (3 entities in scope)."
    assert config_command_view(config_command) == repaired


def test_wrong_cluster_id_exits_1(clean, bootstrap, manifest) -> None:  # type: ignore[no-untyped-def]
    write(manifest, cluster_id="AAAAAAAAAAAAAAAAAAAAAA")
    result = run_drift(str(manifest), "--bootstrap-server", bootstrap, "-o", "json")
    assert result.exit_code == 1
    assert "AAAAAAAAAAAAAAAAAAAAAA" in result.output
    assert "in_sync" not in result.output
