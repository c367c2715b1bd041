"""``explain`` against the broker's own metrics: real kafka-python clients on a
JMX-enabled sandbox broker (PLAINTEXT, so the user is ``ANONYMOUS``), the
quota MBeans read with Kafka's JmxTool.

1. Three keys from three levels for one client (the note's section 1.2):
   ``producer_byte_rate`` from level 1, ``consumer_byte_rate`` from level 6,
   ``request_percentage`` from level 8. The MBeans carry exactly the tags
   ``explain`` predicts, and under saturation the measured ``byte-rate`` sits
   at the quota explain names.
2. A new quota shape moves the client to a new quota group, as ``explain
   --plan`` predicted from the saved plan; the new group's rate is the new quota.

Traffic goes to 127.0.0.1 only and is bounded in time and bytes
(:mod:`quotaform.sandbox.load`).
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.sandbox import SandboxBroker
from quotaform.sandbox.jmx import read_mbeans
from quotaform.sandbox.load import LoadResult, consume, produce

from .helpers import DEFAULT, quota, write_manifest

# One worker of pytest-xdist holds the session's JMX broker and every module using it.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("jmx")]

KiB = 1024
runner = CliRunner()
#: The broker enforces a rate over a ~10-12 s window: produce settles a little
#: above the quota (throttled bytes stay recorded), fetch a little below.
TOLERANCE = (0.85, 1.20)
PATTERNS = [
    "kafka.server:type=Produce,*",
    "kafka.server:type=Fetch,*",
    "kafka.server:type=Request,*",
]
ATTRIBUTES = ["byte-rate", "throttle-time", "request-time", "queue-size"]


def cli(*args: str) -> str:
    result = runner.invoke(app, list(args), env={"NO_COLOR": "1"})
    assert result.exit_code in (0, 2), result.output
    return result.stdout


def write(folder: Path, quotas: list[dict[str, Any]], probe: dict[str, str]) -> Path:
    """The manifests folder: ``quotas`` on the byte-rate shapes, ``probe`` explained."""
    scope = [{"shape": "user"}, {"shape": "client-id"}, {"shape": "user+client-id"}]
    write_manifest(
        folder / "m.yaml", "jmx", quotas, scope=scope, allow_deletes=True, probes=[probe]
    )
    return folder


def create_topics(broker: SandboxBroker, *names: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        admin.create_topics([NewTopic(n, 1, 1) for n in names])
    finally:
        admin.close()


def in_background(run: Callable[[], LoadResult]) -> tuple[threading.Thread, list[LoadResult]]:
    out: list[LoadResult] = []
    thread = threading.Thread(target=lambda: out.append(run()), daemon=True)
    thread.start()
    return thread, out


def stopped(stop: threading.Event, *threads: threading.Thread) -> None:
    """End the clients (``stop``, which they were given) once measured, and join them."""
    stop.set()
    for thread in threads:
        thread.join(60)


def rates(broker: SandboxBroker, *, reads: int, every_s: float = 1.0) -> dict[str, list[float]]:
    """ObjectName -> byte-rate of each of ``reads`` JMX reads (also request-time)."""
    seen: dict[str, list[float]] = {}
    for _ in range(reads):
        start = time.monotonic()
        for name, reading in read_mbeans(broker.jmx_port or 0, PATTERNS, ATTRIBUTES).items():
            value = reading.get("byte-rate")
            if reading.properties.get("type") == "Request":
                value = reading.get("request-time")
            seen.setdefault(name, []).append(value)
        time.sleep(max(0.0, every_s - (time.monotonic() - start)))
    return seen


def steady(broker: SandboxBroker, name: str, *, seconds: float) -> None:
    """Wait until ``name``'s byte-rate changes by under 5 % in a second (or
    ``seconds`` pass): the window no longer holds the client's start."""
    last = None
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = rates(broker, reads=1).get(name, [None])[0]
        if value and last and abs(value - last) < 0.05 * last:
            return
        last = value


def within(measured: float, quota: float) -> bool:
    low, high = TOLERANCE
    return low * quota <= measured <= high * quota


LEVELS = [
    quota({"user": "ANONYMOUS", "client-id": "qf-app"}, producer_byte_rate="256KiB"),  # level 1
    quota({"user": DEFAULT}, consumer_byte_rate="384KiB"),  # level 6
    quota({"client-id": DEFAULT}, request_percentage=400),  # level 8
]
LEVELS_PROBE = {"user": "ANONYMOUS", "client-id": "qf-app"}


def test_the_broker_uses_the_groups_and_quotas_explain_predicts(
    jmx_broker: SandboxBroker, tmp_path: Path
) -> None:
    bootstrap = jmx_broker.bootstrap
    manifests = write(tmp_path / "levels", LEVELS, LEVELS_PROBE)
    cli("apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve")
    predicted = json.loads(
        cli(
            "explain",
            "--user",
            "ANONYMOUS",
            "--client-id",
            "qf-app",
            "-o",
            "json",
            "--bootstrap-server",
            bootstrap,
        )
    )["quotas"]
    assert {k: (v["level"], v["value"]) for k, v in predicted.items()} == {
        "producer_byte_rate": (1, 256 * KiB),
        "consumer_byte_rate": (6, 384 * KiB),
        "request_percentage": (8, 400.0),
        "controller_mutation_rate": (None, None),
    }
    assert predicted["producer_byte_rate"]["metric_tags"] == {
        "user": "ANONYMOUS",
        "client-id": "qf-app",
    }
    assert predicted["consumer_byte_rate"]["metric_tags"] == {"user": "ANONYMOUS", "client-id": ""}
    assert predicted["request_percentage"]["metric_tags"] == {"user": "", "client-id": "qf-app"}

    create_topics(jmx_broker, "fill", "load")
    # The consumer's topic, filled by another client id: producer_byte_rate is
    # set only on {user, client-id} entities, so qf-fill's group is unlimited.
    # 20 MiB: at 384 KiB/s the consumer drains it in 53 s, long after the
    # measurement (at most 13 + 8 s + 5 reads, slower on a busy machine; with
    # 12 MiB it ran dry during the reads and its rate decayed under them).
    filled = produce(bootstrap, "fill", client_id="qf-fill", seconds=60, max_bytes=20 * 1024 * KiB)
    assert filled.bytes > 20 * 1024 * KiB - 1000  # in 3 s: unlimited, as explained
    # The clients run until measured (27 s at most: 13 + 8 + the reads).
    stop = threading.Event()
    producer, _ = in_background(
        lambda: produce(bootstrap, "load", client_id="qf-app", seconds=45, stop=stop)
    )
    consumer, got = in_background(
        lambda: consume(
            bootstrap, "fill", client_id="qf-app", seconds=45, max_bytes=19 * 1024 * KiB, stop=stop
        )
    )
    time.sleep(13)  # past the first ~10-12 s window, burst included
    # A consumer that joined late is still ramping up: its byte-rate (an
    # average over the broker's ~11 s window) still counts idle seconds.
    # Measure once two reads a second apart agree (at most 8 s more).
    steady(jmx_broker, "kafka.server:type=Fetch,user=ANONYMOUS", seconds=8)
    measured = rates(jmx_broker, reads=5)
    stopped(stop, producer, consumer)

    names = {key: predicted[key]["mbean"] for key in predicted if predicted[key]["recorded"]}
    assert names == {
        "producer_byte_rate": "kafka.server:type=Produce,user=ANONYMOUS,client-id=qf-app",
        "consumer_byte_rate": "kafka.server:type=Fetch,user=ANONYMOUS",
        "request_percentage": "kafka.server:type=Request,client-id=qf-app",
    }
    for key, name in names.items():
        assert name in measured, (key, sorted(measured))
    # qf-app's traffic is in no other group of these types.
    assert not [n for n in measured if "qf-app" in n and n not in names.values()]
    produced = statistics.median(measured[names["producer_byte_rate"]])
    fetched = statistics.median(measured[names["consumer_byte_rate"]])
    print(f"\nlevels: produce {produced / (256 * KiB):.1%} fetch {fetched / (384 * KiB):.1%}")
    assert within(produced, 256 * KiB), (produced, measured[names["producer_byte_rate"]])
    assert within(fetched, 384 * KiB), (fetched, measured[names["consumer_byte_rate"]])
    assert got and got[0].bytes > 0


MOVE = [quota({"client-id": DEFAULT}, producer_byte_rate="256KiB")]  # level 8
ADDED = quota({"user": DEFAULT}, producer_byte_rate="512KiB")  # level 6: a new shape for the key
MOVE_PROBE = {"user": "ANONYMOUS", "client-id": "qf-move"}


def test_a_new_shape_moves_the_client_to_the_group_explain_plan_predicted(
    jmx_broker: SandboxBroker, tmp_path: Path
) -> None:
    bootstrap = jmx_broker.bootstrap
    manifests = write(tmp_path / "move", MOVE, MOVE_PROBE)
    cli(
        "apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve",
        "--allow-deletes", "--allow-relax", "--allow-default-removal",
    )  # fmt: skip
    create_topics(jmx_broker, "move")
    # Traffic in the level-8 group, so its MBean exists (what it recorded
    # decays ~11 s after the last request, however long it ran).
    produce(bootstrap, "move", client_id="qf-move", seconds=1)
    before = rates(jmx_broker, reads=1)
    assert "kafka.server:type=Produce,client-id=qf-move" in before, sorted(before)

    write(manifests, [*MOVE, ADDED], MOVE_PROBE)
    plan_file = tmp_path / "plan.json"
    plan_text = cli(
        "plan", str(manifests), "--bootstrap-server", bootstrap, "--out", str(plan_file)
    )
    assert "Probes: 1 of 1 declared probe(s) affected." in plan_text
    assert "quota group moves: client-id=qf-move -> user=ANONYMOUS" in plan_text
    explained = json.loads(
        cli(
            "explain",
            "--plan",
            str(plan_file),
            "--user",
            "ANONYMOUS",
            "--client-id",
            "qf-move",
            "-o",
            "json",
        )
    )
    move = explained["changes"]["producer_byte_rate"]
    assert (move["group_changed"], move["value_changed"]) == (True, True)
    was = explained["before"]["producer_byte_rate"]
    now = explained["quotas"]["producer_byte_rate"]
    assert (was["level"], was["mbean"]) == (8, "kafka.server:type=Produce,client-id=qf-move")
    assert (now["level"], now["value"], now["mbean"]) == (
        6,
        512 * KiB,
        "kafka.server:type=Produce,user=ANONYMOUS",
    )

    cli("apply", str(plan_file), "--bootstrap-server", bootstrap)
    stop = threading.Event()
    producer, _ = in_background(
        lambda: produce(bootstrap, "move", client_id="qf-move", seconds=17, stop=stop)
    )
    time.sleep(13)  # the new group past its first window; the old one decayed
    measured = rates(jmx_broker, reads=3)
    stopped(stop, producer)
    new_group = statistics.median(measured[now["mbean"]])
    old_group = statistics.median(measured[was["mbean"]])
    print(f"\nmove: new group {new_group / (512 * KiB):.1%}, old group {old_group:.0f} B/s")
    assert within(new_group, 512 * KiB), measured[now["mbean"]]
    assert old_group < 0.1 * 256 * KiB, measured[was["mbean"]]  # decayed: nothing records there
