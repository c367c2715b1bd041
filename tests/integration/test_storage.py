"""Storage-aware quotas on the real broker: DescribeLogDirs, OPEN / THROTTLE /
PAUSE driven by limits set relative to the broker's real free bytes, checked
with Kafka's own kafka-configs; a producer under PAUSE; the compacted
snapshot topic; stale and silent brokers; a saved plan whose factor moved."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.kafka.entity import Entity
from quotaform.sandbox.load import produce

from .helpers import config_command_view, quota, write_manifest

pytestmark = pytest.mark.broker

GiB = 1 << 30
KiB = 1024
runner = CliRunner()


def cli(*args: str, codes: tuple[int, ...] = (0,)) -> Any:
    result = runner.invoke(app, list(args), env={"NO_COLOR": "1"})
    assert result.exit_code in codes, result.output
    return result


def free_bytes(bootstrap: str, manifests: Path) -> int:
    """The broker's free bytes now, from `storage snapshot` (DescribeLogDirs)."""
    record = json.loads(cli("storage", "snapshot", str(manifests), "--bootstrap-server",
                            bootstrap).stdout)  # fmt: skip
    (volume,) = record["volumes"]
    return int(volume["capacity"] - volume["consumed"])


def status_json(manifests: Path, bootstrap: str, *source: str) -> dict[str, Any]:
    """``storage status -o json`` of ``manifests`` on the broker, volume usage from ``source``."""
    args = ("storage", "status", str(manifests), "--bootstrap-server", bootstrap, *source)
    return json.loads(cli(*args, "-o", "json").stdout)  # type: ignore[no-any-return]


def write(manifests: Path, soft: int, hard: int) -> None:
    """Three entities under a storage policy with ``soft`` and ``hard``
    MinFreeBytes limits; platform exempt."""
    write_manifest(
        manifests / "m.yaml",
        "storage",
        [
            quota({"user": "ANONYMOUS", "client-id": "st-prod"}, producer_byte_rate="8MiB"),
            quota({"user": "svc-a"}, producer_byte_rate="10MiB", consumer_byte_rate="4MiB"),
            quota({"user": "platform"}, producer_byte_rate="100MiB"),
        ],
        scope=[{"shape": "user"}, {"shape": "user+client-id"}],
        allow_deletes=True,
        storage_policy={
            "soft": {"type": "MinFreeBytes", "level": soft},
            "hard": {"type": "MinFreeBytes", "level": hard},
            "staleAfter": "10m",
            "exempt": [{"user": "platform"}],
            "pauseRate": "32KiB",
            "hysteresis": "5%",
        },
    )


def users_view(config_command) -> dict[Entity, dict[str, float]]:  # type: ignore[no-untyped-def]
    return config_command_view(config_command, (["users"], ["users", "clients"]))


PROD = Entity.of(user="ANONYMOUS", client_id="st-prod")
SVC = Entity.of(user="svc-a")
PLATFORM = Entity.of(user="platform")
MiB = 1 << 20


def test_open_throttle_pause_are_written_as_declared_times_the_factor(
    kafka_broker,
    clean,
    config_command,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    bootstrap = kafka_broker.bootstrap
    manifests = tmp_path / "m"
    manifests.mkdir()
    write(manifests, 2 * GiB, 1 * GiB)  # placeholder limits for the snapshot's policy
    free = free_bytes(bootstrap, manifests)
    assert free > 20 * GiB, "the test needs 20 GiB free to place its limits"

    # THROTTLE: free lies 52.5 % of the way from the hard level (free - 10.5 GiB) to the
    # soft one (free + 9.5 GiB): factor 0.525, written as 0.5 (the 5 % step), robust to
    # the disk moving by a few hundred MiB while the test runs.
    write(manifests, free + 9 * GiB + GiB // 2, free - 10 * GiB - GiB // 2)
    status = status_json(manifests, bootstrap)
    assert status["state"] == "THROTTLE" and status["factor"] == pytest.approx(0.525, abs=0.015)
    (broker,) = status["brokers"]
    (volume,) = broker["volumes"]
    assert volume["capacity"] > 0 and volume["free"] == pytest.approx(free, abs=GiB)
    assert volume["binding"] == "soft"
    cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve")
    factor = 0.5  # rounded down to the 5 % step
    view = users_view(config_command)
    assert view[SVC] == {"producer_byte_rate": float(int(10 * MiB * factor)),
                         "consumer_byte_rate": 4.0 * MiB}  # fmt: skip
    assert view[PROD] == {"producer_byte_rate": float(int(8 * MiB * factor))}
    assert view[PLATFORM] == {"producer_byte_rate": 100.0 * MiB}  # exempt: untouched
    drift = cli("drift", str(manifests), "--bootstrap-server", bootstrap)
    assert "No drift" in drift.stdout  # a scaled quota is not drift

    # PAUSE: the hard limit asks for 1 GiB more free space than there is.
    write(manifests, free + 2 * GiB, free + 1 * GiB)
    plan = cli("plan", str(manifests), "--bootstrap-server", bootstrap, "-o", "json").stdout
    storage = json.loads(plan)["storage"]
    assert storage["state"] == "PAUSE" and storage["factor"] == 0.0
    assert {json.dumps(s["entity"]): s["written"] for s in storage["scaled"]} == {
        json.dumps(PROD.as_dict()): 32.0 * KiB,
        json.dumps(SVC.as_dict()): 32.0 * KiB,
    }
    cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve")
    view = users_view(config_command)
    assert view[SVC]["producer_byte_rate"] == 32 * KiB
    assert view[PROD]["producer_byte_rate"] == 32 * KiB
    assert view[PLATFORM] == {"producer_byte_rate": 100.0 * MiB}

    # A producer under PAUSE is held near pauseRate ...
    admin_topic(bootstrap, "st-load")
    paused = produce(bootstrap, "st-load", client_id="st-prod", seconds=8, max_bytes=8 * MiB)
    # ... and back to normal once OPEN (the restore is the policy easing, not --allow-relax).
    write(manifests, free - 10 * GiB, free - 20 * GiB)
    cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve")
    view = users_view(config_command)
    assert view[PROD] == {"producer_byte_rate": 8.0 * MiB}
    opened = produce(bootstrap, "st-load", client_id="st-prod", seconds=4, max_bytes=8 * MiB)
    print(
        f"\nPAUSE: {paused.rate / KiB:.1f} KiB/s (pauseRate 32 KiB/s); "
        f"OPEN: {opened.rate / KiB:.0f} KiB/s"
    )
    assert paused.rate < 3 * 32 * KiB, paused
    assert opened.rate > 10 * paused.rate, (paused, opened)


def admin_topic(bootstrap: str, name: str) -> None:
    from kafka.admin import KafkaAdminClient, NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        if name not in admin.list_topics():
            admin.create_topics([NewTopic(name, 1, 1)])
    finally:
        admin.close()


def test_snapshots_round_trip_through_the_compacted_topic_and_stale_ones_are_unknown(
    kafka_broker,
    clean,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    bootstrap = kafka_broker.bootstrap
    manifests = tmp_path / "m"
    manifests.mkdir()
    write(manifests, 2 * GiB, 1 * GiB)
    topic = f"st-volumes-{tmp_path.name[-8:]}"
    refused = cli("storage", "snapshot", str(manifests), "--bootstrap-server", bootstrap,
                  "--publish", topic, codes=(1,))  # fmt: skip
    assert "does not exist" in refused.output and "--create-topic" in refused.output
    # watch --publish follows the same rule: no topic is created without --create-topic.
    watched = cli("storage", "watch", str(manifests), "--bootstrap-server", bootstrap,
                  "--publish", topic, "--iterations", "1", codes=(1,))  # fmt: skip
    assert "does not exist" in watched.output and "--create-topic" in watched.output
    cli("storage", "snapshot", str(manifests), "--bootstrap-server", bootstrap,
        "--publish", topic, "--create-topic")  # fmt: skip
    from kafka.admin import ConfigResource, ConfigResourceType, KafkaAdminClient

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        configs = admin.describe_configs([ConfigResource(ConfigResourceType.TOPIC, topic)])
        assert configs["topic"][topic]["cleanup.policy"]["value"] == "compact"
    finally:
        admin.close()
    # A second, stale record for the same broker id is published later: the latest wins.
    from kafka import KafkaProducer

    old = (datetime.now(UTC) - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    stale = {
        "brokerId": "1",
        "snapshotAt": old,
        "hardLimit": {"type": "MinFreeBytes", "level": 1},
        "softLimit": {"type": "MinFreeBytes", "level": 2},
        "volumes": [{"volumeName": "/x", "capacity": 100, "consumed": 1}],
    }
    live = status_json(manifests, bootstrap, "--from-topic", topic)
    assert live["state"] == "OPEN" and live["brokers"][0]["status"] == "fresh"
    producer = KafkaProducer(bootstrap_servers=bootstrap)
    producer.send(topic, key=b"1", value=json.dumps(stale).encode()).get(timeout=10)
    producer.close()
    late = status_json(manifests, bootstrap, "--from-topic", topic)
    assert late["state"] == "PAUSE" and late["brokers"][0]["status"] == "stale"
    assert late["metrics"]["throttling_for_lack_of_data"] == 1
    # A broker the cluster lists that never reported (a snapshot file of another broker).
    other = tmp_path / "other.jsonl"
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    other.write_text(
        json.dumps({**stale, "brokerId": "7", "snapshotAt": now}) + "\n", encoding="utf-8"
    )
    silent = status_json(manifests, bootstrap, "--snapshots", str(other))
    assert silent["state"] == "PAUSE"
    assert {b["broker_id"]: b["status"] for b in silent["brokers"]} == {
        "1": "missing",
        "7": "fresh",
    }


def test_apply_refuses_a_saved_plan_whose_factor_no_longer_holds(
    kafka_broker,
    clean,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    bootstrap = kafka_broker.bootstrap
    manifests = tmp_path / "m"
    manifests.mkdir()
    write(manifests, 2 * GiB, 1 * GiB)
    free = free_bytes(bootstrap, manifests)
    snaps = tmp_path / "snap.jsonl"
    record = {
        "brokerId": "1",
        "hardLimit": {"type": "MinFreeBytes", "level": 1},
        "softLimit": {"type": "MinFreeBytes", "level": 2},
        "volumes": [{"volumeName": "/data", "capacity": 100 * GiB, "consumed": 80 * GiB}],
    }
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    snaps.write_text(json.dumps({**record, "snapshotAt": now}) + "\n", encoding="utf-8")
    write(manifests, 30 * GiB, 10 * GiB)  # 20 GiB free on /data: THROTTLE 0.5
    assert free > 0
    plan_file = tmp_path / "plan.json"
    cli("plan", str(manifests), "--bootstrap-server", bootstrap, "--snapshots", str(snaps),
        "--out", str(plan_file))  # fmt: skip
    saved = json.loads(plan_file.read_text(encoding="utf-8"))["plan"]["storage"]
    assert saved["state"] == "THROTTLE" and saved["factor"] == 0.5
    assert saved["snapshot_ages"]["1"] is not None
    moved = {
        **record,
        "volumes": [{"volumeName": "/data", "capacity": 100 * GiB, "consumed": 88 * GiB}],
    }
    snaps.write_text(json.dumps({**moved, "snapshotAt": now}) + "\n", encoding="utf-8")
    stale = cli("apply", str(plan_file), str(manifests), "--bootstrap-server", bootstrap,
                "--snapshots", str(snaps), codes=(5,))  # fmt: skip
    assert "storage factor no longer holds" in stale.output
    assert "THROTTLE 0.50" in stale.output and "THROTTLE 0.10" in stale.output
    snaps.write_text(json.dumps({**record, "snapshotAt": now}) + "\n", encoding="utf-8")
    cli("apply", str(plan_file), str(manifests), "--bootstrap-server", bootstrap,
        "--snapshots", str(snaps))  # fmt: skip


def test_watch_applies_only_when_the_factor_moves_and_survives_a_lost_connection(
    kafka_broker,
    clean,
    config_command,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    bootstrap = kafka_broker.bootstrap
    manifests = _applied_open(bootstrap, tmp_path)
    assert users_view(config_command)[SVC]["producer_byte_rate"] == 10 * MiB  # OPEN
    snaps = _snapshot_file(tmp_path, consumed_gib=80)  # 20 GiB free: THROTTLE 0.5
    watched = cli("storage", "watch", str(manifests), "--bootstrap-server", bootstrap,
                  "--snapshots", str(snaps), "--interval", "0.2", "--iterations", "2")  # fmt: skip
    changes = [line for line in watched.output.splitlines() if "producer_byte_rate" in line]
    assert len(changes) == 2, watched.output  # svc-a and st-prod, once each
    assert "THROTTLE, factor 0.50 (volumes give 0.500): writing" in changes[0]
    assert "producer_byte_rate 10MiB -> 5MiB" in watched.output  # the manifests' units
    assert "no change" in watched.output
    view = users_view(config_command)
    assert view[SVC]["producer_byte_rate"] == 5 * MiB
    assert view[PLATFORM]["producer_byte_rate"] == 100 * MiB
    # A lost cluster: every evaluation fails; the last one says so in the exit code.
    lost = cli("storage", "watch", str(manifests), "--bootstrap-server", "127.0.0.1:1",
               "--timeout", "1", "--snapshots", str(snaps), "--interval", "0.1",
               "--iterations", "2", codes=(1,))  # fmt: skip
    assert lost.output.count("evaluation failed, retrying in 0.1s") == 1, lost.output
    assert lost.output.count("evaluation failed: ") == 1, lost.output
    assert "Error: the last evaluation failed (2 of 2 failed)" in lost.output
    once = cli("storage", "watch", str(manifests), "--bootstrap-server", "127.0.0.1:1",
               "--timeout", "1", "--snapshots", str(snaps), "--iterations", "1",
               codes=(1,))  # fmt: skip
    assert "retrying" not in once.output and "(1 of 1 failed)" in once.output


def test_watch_never_creates_an_entity_and_logs_every_write(
    kafka_broker,
    clean,
    config_command,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    bootstrap = kafka_broker.bootstrap
    manifests = _applied_open(bootstrap, tmp_path)
    # st-prod is declared and scaled, but gone from the cluster (never created, or deleted).
    config_command(["--alter", "--entity-type", "users", "--entity-name", "ANONYMOUS",
                    "--entity-type", "clients", "--entity-name", "st-prod",
                    "--delete-config", "producer_byte_rate"])  # fmt: skip
    assert PROD not in users_view(config_command)
    snaps = _snapshot_file(tmp_path, consumed_gib=80)  # THROTTLE 0.5
    watched = cli("storage", "watch", str(manifests), "--bootstrap-server", bootstrap,
                  "--snapshots", str(snaps), "--iterations", "1")  # fmt: skip
    view = users_view(config_command)
    assert PROD not in view, watched.output  # not created without review
    assert view[SVC]["producer_byte_rate"] == 5 * MiB
    writes = [line for line in watched.output.splitlines() if ": writing " in line]
    assert len(writes) == 1 and "svc-a" in writes[0], watched.output
    assert "1 other change(s) pending, not applied by watch" in watched.output
    assert 'client-id="st-prod"' in watched.output
    assert "Traceback" not in watched.output


def test_watch_stops_at_once_on_the_wrong_cluster(
    kafka_broker,
    clean,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    manifests = tmp_path / "m"
    write_manifest(
        manifests / "m.yaml",
        "storage",
        [quota({"user": "svc-a"}, producer_byte_rate="10MiB")],
        scope=[{"shape": "user"}],
        cluster_id="AAAAAAAAAAAAAAAAAAAAAA",
        storage_policy={
            "soft": {"type": "MinFreeBytes", "level": 30 * GiB},
            "hard": {"type": "MinFreeBytes", "level": 10 * GiB},
        },
    )
    snaps = _snapshot_file(tmp_path, consumed_gib=80)
    wrong = cli("storage", "watch", str(manifests), "--bootstrap-server", kafka_broker.bootstrap,
                "--snapshots", str(snaps), "--interval", "30s", "--iterations", "3",
                codes=(1,))  # fmt: skip
    assert "wrong cluster" in wrong.output and "retrying" not in wrong.output, wrong.output
    assert wrong.output.count("Error:") == 1


def _applied_open(bootstrap: str, tmp_path: Path) -> Path:
    """The three-entity manifests (soft 30 GiB, hard 10 GiB free) applied
    while the volume is OPEN (90 GiB free): every declared value is live."""
    manifests = tmp_path / "m"
    manifests.mkdir()
    write(manifests, 30 * GiB, 10 * GiB)
    cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve",
        "--snapshots", str(_snapshot_file(tmp_path, consumed_gib=10)))  # fmt: skip
    return manifests


def _snapshot_file(tmp_path: Path, *, consumed_gib: int) -> Path:
    path = tmp_path / f"snap-{consumed_gib}.jsonl"
    record = {
        "brokerId": "1",
        "snapshotAt": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "hardLimit": {"type": "MinFreeBytes", "level": 1},
        "softLimit": {"type": "MinFreeBytes", "level": 2},
        "volumes": [{"volumeName": "/data", "capacity": 100 * GiB, "consumed": consumed_gib * GiB}],
    }
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    return path
