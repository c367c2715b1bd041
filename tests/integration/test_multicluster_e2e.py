"""Several clusters: profiles, --cluster, --all-clusters, against TWO real brokers.

``eu`` is the session's broker, ``us`` another: the session's JMX broker (a
second plain broker; its JMX port plays no part here, and starting it once
serves the metrics tests too). Each broker is checked with Kafka's own
kafka-configs (ConfigCommand).
"""

from __future__ import annotations

import functools
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.wire import QuotaAdminClient, load_connection_settings, open_admin
from quotaform.formats.multicluster import MultiClusterDocument
from quotaform.formats.plan import PlanDocument
from quotaform.kafka.entity import Entity
from quotaform.sandbox import SandboxBroker
from tests.configcommand import run_config_command

from .helpers import config_command_view, wipe

# One worker of pytest-xdist holds the session's JMX broker and every module using it.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("jmx")]
runner = CliRunner()

FIXTURE = Path(__file__).resolve().parent / "fixtures" / "multi-cluster"
MiB = 1048576.0


@pytest.fixture(scope="module")
def second_broker(jmx_session_broker: SandboxBroker) -> SandboxBroker:
    """A second broker, alongside the session's: the session's JMX broker
    (each test wipes both first, as the metrics tests wipe it)."""
    return jmx_session_broker


@pytest.fixture(scope="module")
def admin_us(second_broker: SandboxBroker) -> Iterator[QuotaAdminClient]:
    client = open_admin(
        load_connection_settings(bootstrap_server=second_broker.bootstrap, env={}),
        read_only=False,
    )
    yield client
    client.close()


@pytest.fixture
def clean(admin, admin_us: QuotaAdminClient) -> Iterator[None]:  # type: ignore[no-untyped-def]
    """Both brokers without client quotas, before and after each test."""
    wipe(admin)
    wipe(admin_us)
    yield
    wipe(admin)
    wipe(admin_us)


@pytest.fixture
def setup(
    clean: None,
    kafka_broker: SandboxBroker,
    second_broker: SandboxBroker,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> tuple[Path, Path]:
    """``(manifests, profiles file)``: a private copy of the fixture set, and
    profiles pointing eu at the session broker and us at the second one."""
    for var in ("QUOTAFORM_BOOTSTRAP_SERVER", "QUOTAFORM_COMMAND_CONFIG", "QUOTAFORM_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    manifests = tmp_path / "manifests"
    shutil.copytree(FIXTURE, manifests)
    profiles = tmp_path / "quotaform.clusters.yaml"
    profiles.write_text(
        "clusters:\n"
        f"  eu:\n    bootstrapServers: {kafka_broker.bootstrap}\n"
        f"  us:\n    bootstrapServers: {second_broker.bootstrap}\n",
        encoding="utf-8",
    )
    return manifests, profiles


def cli(*args: str):  # type: ignore[no-untyped-def]
    return runner.invoke(app, list(args))


def view(broker: SandboxBroker) -> dict[Entity, dict[str, float]]:
    return config_command_view(
        functools.partial(run_config_command, bootstrap=broker.bootstrap, version=broker.version)
    )


def after_values(doc: PlanDocument) -> dict[str, dict[str, float]]:
    return {json.dumps(c.entity, sort_keys=True): c.after for c in doc.changes}


EU = {
    Entity.of(user="mc-orders"): {"producer_byte_rate": 4 * MiB, "consumer_byte_rate": 2 * MiB},
    Entity.of(user="mc-shared"): {"producer_byte_rate": 1 * MiB},
    Entity.of(ip="192.0.2.10"): {"connection_creation_rate": 50.0},
}
US = {
    Entity.of(user="mc-orders"): {"producer_byte_rate": 8 * MiB, "consumer_byte_rate": 2 * MiB},
    Entity.of(user="mc-shared"): {"producer_byte_rate": 1 * MiB},
    Entity.of(user="mc-us-only"): {"consumer_byte_rate": 3 * MiB},
    Entity.of(ip="192.0.2.10"): {"connection_creation_rate": 50.0},
    Entity.of(ip="198.51.100.7"): {"connection_creation_rate": 20.0},
}


def test_plan_for_one_cluster_shows_that_clusters_values(setup) -> None:  # type: ignore[no-untyped-def]
    manifests, profiles = setup
    for cluster, expected in (("eu", EU), ("us", US)):
        result = cli(
            "plan", str(manifests), "--cluster", cluster, "--config", str(profiles), "-o", "json"
        )
        assert result.exit_code == 0, result.output
        doc = PlanDocument.model_validate_json(result.stdout)
        assert doc.cluster == cluster
        assert {c.action for c in doc.changes} == {"create"}
        assert after_values(doc) == {
            json.dumps(e.as_dict(), sort_keys=True): q for e, q in expected.items()
        }
    text = cli("plan", str(manifests), "--cluster", "eu", "--config", str(profiles))
    assert text.exit_code == 0, text.output
    assert 'cluster "eu"' in text.output
    assert "producer_byte_rate = 4MiB" in text.output
    assert "mc-us-only" not in text.output


def test_apply_per_cluster_then_plan_all_clusters(setup, kafka_broker, second_broker) -> None:  # type: ignore[no-untyped-def]
    manifests, profiles = setup
    config = ("--config", str(profiles))
    for cluster in ("eu", "us"):
        applied = cli("apply", str(manifests), "--cluster", cluster, *config, "--auto-approve")
        assert applied.exit_code == 0, applied.output
        assert "Apply complete" in applied.output
    assert view(kafka_broker) == EU
    assert view(second_broker) == US

    synced = cli(
        "plan", str(manifests), "--all-clusters", *config, "-o", "json", "--detailed-exitcode"
    )
    assert synced.exit_code == 0, synced.output
    doc = MultiClusterDocument.model_validate_json(synced.stdout)
    assert list(doc.clusters) == ["eu", "us"]
    for name, part in doc.clusters.items():
        assert isinstance(part, PlanDocument), part
        assert part.cluster == name
        assert (part.summary.create, part.summary.update, part.summary.delete) == (0, 0, 0)

    us_file = manifests / "us.yaml"
    us_file.write_text(
        us_file.read_text(encoding="utf-8").replace(
            "producer_byte_rate: 8MiB", "producer_byte_rate: 6MiB"
        ),
        encoding="utf-8",
    )
    changed = cli(
        "plan", str(manifests), "--all-clusters", *config, "-o", "json", "--detailed-exitcode"
    )
    assert changed.exit_code == 2, changed.output
    doc = MultiClusterDocument.model_validate_json(changed.stdout)
    eu, us = doc.clusters["eu"], doc.clusters["us"]
    assert isinstance(eu, PlanDocument) and isinstance(us, PlanDocument)
    assert [c for c in eu.changes if c.action != "no-op"] == []
    pending = [c for c in us.changes if c.action != "no-op"]
    assert [(c.entity, c.action) for c in pending] == [({"user": "mc-orders"}, "update")]
    assert [(k.key, k.before, k.after) for k in pending[0].key_changes] == [
        ("producer_byte_rate", 8 * MiB, 6 * MiB)
    ]

    text = cli("plan", str(manifests), "--all-clusters", *config)
    assert text.exit_code == 0, text.output
    assert "=== cluster eu ===" in text.output and "=== cluster us ===" in text.output
    assert text.output.rstrip().endswith("Clusters: 1 with changes, 1 in sync, 0 failed.")
    markdown = cli("plan", str(manifests), "--all-clusters", *config, "-o", "markdown")
    assert markdown.exit_code == 0, markdown.output
    assert "**Clusters: 1 with changes, 1 in sync, 0 failed.**" in markdown.stdout
    # plan never wrote: the brokers still hold what apply put there.
    assert view(second_broker) == US


def test_a_failing_cluster_is_reported_and_the_others_still_run(setup) -> None:  # type: ignore[no-untyped-def]
    manifests, profiles = setup
    profiles.write_text(
        profiles.read_text(encoding="utf-8") + "    clusterId: AAAAAAAAAAAAAAAAAAAAAA\n",
        encoding="utf-8",
    )  # us's profile now expects another cluster id
    result = cli(
        "plan",
        str(manifests),
        "--all-clusters",
        "--config",
        str(profiles),
        "-o",
        "json",
        "--detailed-exitcode",
    )
    assert result.exit_code == 1, result.output
    doc = json.loads(result.stdout)
    assert "expects cluster id 'AAAAAAAAAAAAAAAAAAAAAA'" in doc["clusters"]["us"]["error"]
    assert PlanDocument.model_validate(doc["clusters"]["eu"]).summary.create == len(EU)

    refused = cli("plan", str(manifests), "--cluster", "us", "--config", str(profiles))
    assert refused.exit_code == 1
    assert "refusing to use the wrong cluster" in refused.output


def test_a_saved_plan_is_applied_only_to_its_own_cluster(setup, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    manifests, profiles = setup
    saved = tmp_path / "eu-plan.json"
    made = cli(
        "plan", str(manifests), "--cluster", "eu", "--config", str(profiles), "--out", str(saved)
    )
    assert made.exit_code == 0, made.output
    refused = cli("apply", str(saved), "--cluster", "us", "--config", str(profiles))
    assert refused.exit_code == 1
    assert "is a plan for cluster 'eu', not 'us'" in refused.output
    applied = cli("apply", str(saved), "--cluster", "eu", "--config", str(profiles))
    assert applied.exit_code == 0, applied.output
