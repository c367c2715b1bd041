"""quotaform's exporter rules (``examples/prometheus/``) on the real thing: the
Prometheus JMX exporter 1.0.1 on a SCRAM sandbox broker, scraped every second
by a real Prometheus (v0.316.0 from the Go module proxy), with kafka-python
clients under quotas at several levels (:mod:`quotaform.sandbox.livemetrics`).

One broker and one Prometheus for the module: the broker runs the exporter's
java agent with Strimzi's ``kafka-metrics.yaml`` plus our snippet, and a
``jmx_prometheus_httpserver`` reads the same broker over remote JMX with
jmx_exporter's ``examples/kafka-kraft-3_0_0.yml`` plus our snippet. Both
configs get ``includeObjectNames`` of the quota MBeans only, which keeps a
1 s scrape fast and changes no metric name. The answers are read through
``/api/v1/query_range`` exactly as a user's Prometheus serves them.

Traffic goes to 127.0.0.1 only and is bounded (25 s of load).
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from quotaform.sandbox import BrokerOptions, SandboxBroker
from quotaform.sandbox.exporter import (
    QUOTA_OBJECT_NAMES,
    ExporterServer,
    exporter_config,
    start_exporter_server,
    stop_exporter_server,
)
from quotaform.sandbox.livemetrics import (
    SCENARIO_USERS,
    LoadRun,
    command_config,
    prepare,
    run_scenario_load,
    set_quotas,
)
from quotaform.sandbox.prometheus import (
    PrometheusServer,
    basic_auth_web_config,
    query_range,
    start_prometheus,
    stop_prometheus,
)
from tests.conftest import sandbox_broker

pytestmark = pytest.mark.broker

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "tests" / "fixtures" / "prometheus" / "rules"
SNIPPETS = ROOT / "examples" / "prometheus"
OVERRIDES = {"includeObjectNames": list(QUOTA_OBJECT_NAMES), "startDelaySeconds": 0}
LOAD_S = 25.0
#: Our convention's quota metric names (what quotaform reads).
OURS = (
    "kafka_server_(produce|fetch)_(byte_rate|throttle_time)"
    "|kafka_server_request_(request_time|throttle_time)"
    "|kafka_server_controllermutation_(tokens|mutation_rate|throttle_time)"
    "|kafka_server_socket_server_metrics_connection_accept_rate"
)

Series = dict[tuple[str, tuple[tuple[str, str], ...]], list[float]]


@dataclass
class Live:
    broker: SandboxBroker
    prometheus: PrometheusServer
    instances: dict[str, str]
    run: LoadRun


@pytest.fixture(scope="module")
def live(prometheus_binary: Path) -> Iterator[Live]:
    work = Path(tempfile.mkdtemp(prefix="quotaform-test-prometheus-"))
    strimzi = work / "strimzi.yaml"
    strimzi.write_text(
        exporter_config(
            RULES / "strimzi-kafka-metrics.yaml",
            snippet=SNIPPETS / "strimzi-kafka-metrics-quota-rules.yaml",
            overrides=OVERRIDES,
        )
    )
    kraft = exporter_config(
        RULES / "jmx-exporter-kafka-kraft-3_0_0.yml",
        snippet=SNIPPETS / "jmx-exporter-quota-rules.yml",
        overrides=OVERRIDES,
    )
    options = BrokerOptions(scram_users=SCENARIO_USERS, jmx_port=0, prometheus_rules=strimzi)
    exporter: ExporterServer | None = None
    prometheus: PrometheusServer | None = None
    with sandbox_broker(f"pytest-prom-{os.getpid()}", options=options) as broker:
        failure = None
        try:
            exporter = start_exporter_server(
                broker.jmx_port or 0, kraft, state_dir=work, name="kraft"
            )
            agent = f"127.0.0.1:{broker.prometheus_port}"
            prometheus = start_prometheus(
                [agent, exporter.target], state_dir=work / "prometheus", binary=prometheus_binary
            )
        except Exception as exc:
            failure = f"Could not start the exporter or Prometheus ({type(exc).__name__}): {exc}"
        if failure is not None or exporter is None or prometheus is None:
            if exporter is not None:
                stop_exporter_server(exporter)
            pytest.fail(failure or "not started", pytrace=False)
        try:
            prepare(broker, fill_bytes=8 * 1024 * 1024)
            set_quotas(broker, command_config(work))
            run = run_scenario_load(broker, seconds=LOAD_S)
            time.sleep(3)  # the last scrapes land
            print(f"\nload: {run.results} errors={run.errors}")
            yield Live(broker, prometheus, {"strimzi": agent, "kraft": exporter.target}, run)
        finally:
            stop_prometheus(prometheus)
            stop_exporter_server(exporter)


def series(live: Live, instance: str, names: str) -> Series:
    """(name, labels without instance/job) -> values, from a real query_range."""
    raw = query_range(
        live.prometheus.url,
        f'{{__name__=~"{names}", instance="{instance}"}}',
        start=live.run.started - 2,
        end=time.time(),
        step_s=1,
    )
    document = json.loads(raw)
    assert document["status"] == "success" and document["data"]["resultType"] == "matrix"
    found: Series = {}
    for item in document["data"]["result"]:
        labels = item["metric"]
        key = tuple(
            sorted((k, v) for k, v in labels.items() if k not in ("__name__", "instance", "job"))
        )
        found[(labels["__name__"], key)] = [float(v) for _, v in item["values"]]
    return found


def peak(values: list[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return max(finite) if finite else math.nan


ALICE = (("client_id", "alice-app"), ("user", "alice"))
BOB = (("user", "bob"),)
CAROL = (("client_id", "carol-app"),)
EMPTY: tuple[tuple[str, str], ...] = ()


@pytest.mark.parametrize("rules", ["strimzi", "kraft"])
def test_our_rules_export_every_group_shape_with_user_and_client_id(live: Live, rules: str) -> None:
    found = series(live, live.instances[rules], OURS)
    shown = sorted(found)
    assert not live.run.errors, live.run.errors
    produce = {
        labels: v for (name, labels), v in found.items() if name == "kafka_server_produce_byte_rate"
    }
    # user + client-id (level 1), user only (level 3), client-id only (level 8), the empty group
    assert set(produce) == {ALICE, BOB, CAROL, EMPTY}, shown
    for labels, values in produce.items():
        assert peak(values) > 10_000, (labels, values)  # bytes/s: every one of them loaded
    # alice (256 KiB/s, unlimited demand) is throttled; carol (128 of 512 KiB/s) is not
    throttle = {
        labels: v
        for (name, labels), v in found.items()
        if name == "kafka_server_produce_throttle_time"
    }
    assert peak(throttle[ALICE]) > 0, throttle[ALICE]
    assert all(math.isnan(v) or v == 0 for v in throttle[CAROL]), throttle[CAROL]
    # bob's fetch (user-only group, 256 KiB/s) is throttled
    assert peak(found[("kafka_server_fetch_byte_rate", BOB)]) > 10_000
    assert peak(found[("kafka_server_fetch_throttle_time", BOB)]) > 0
    # request_percentage on {client-id=<default>}: client-id groups, plus dave's empty one
    requests = {labels for name, labels in found if name == "kafka_server_request_request_time"}
    assert {CAROL, (("client_id", "alice-app"),), EMPTY} <= requests, shown
    # controller mutations of alice's 30-partition CreateTopics (token bucket of 22 at 2/s)
    tokens = found[("kafka_server_controllermutation_tokens", (("user", "alice"),))]
    assert min(v for v in tokens if not math.isnan(v)) < 22, tokens
    assert peak(found[("kafka_server_controllermutation_mutation_rate", (("user", "alice"),))]) > 0
    # connections per ip, counted from the bursts
    accept = found[
        ("kafka_server_socket_server_metrics_connection_accept_rate", (("ip", "127.0.0.1"),))
    ]
    assert peak(accept) > 0, accept
    # nothing folded into names, no kafka_server_quota_* form, no stray labels
    labels_seen = {k for _, labels in found for k, _ in labels}
    assert labels_seen <= {"user", "client_id", "ip", "listener"}, labels_seen


@pytest.mark.parametrize("rules", ["strimzi", "kraft"])
def test_queue_size_of_a_bare_type_is_not_a_group(live: Live, rules: str) -> None:
    """``type=Produce`` also carries ``queue-size``: never exported under a quota name."""
    found = series(live, live.instances[rules], "kafka_server_(produce|fetch|request)_.*")
    names = {name for name, _ in found}
    assert not any("user_" in n or "client_id_" in n for n in names), sorted(names)
    queue = {name for name in names if name.endswith("queue_size")}
    # Strimzi's rules have no catch-all: queue-size is not exported at all;
    # the KRaft example's catch-all exports it under its own name, never ours.
    assert queue == (set() if rules == "strimzi" else {
        "kafka_server_produce_queue_size", "kafka_server_fetch_queue_size",
        "kafka_server_request_queue_size",
    })  # fmt: skip


def test_prometheus_basic_auth_is_enforced(live: Live, prometheus_binary: Path) -> None:
    """A Prometheus with a ``--web.config.file`` of bcrypt basic-auth users
    refuses an anonymous query and answers the right credentials."""
    import base64

    state = Path(tempfile.mkdtemp(prefix="quotaform-test-prometheus-auth-"))
    server = start_prometheus(
        [live.instances["strimzi"]],
        state_dir=state,
        binary=prometheus_binary,
        web_config=basic_auth_web_config({"reader": "reader-secret-5d1f"}),
    )
    try:
        now = time.time()
        with pytest.raises(Exception, match="401"):
            query_range(server.url, "up", start=now - 10, end=now, step_s=1)
        token = base64.b64encode(b"reader:reader-secret-5d1f").decode()
        raw = query_range(
            server.url, "up", start=now - 10, end=now, step_s=1,
            headers={"Authorization": f"Basic {token}"},
        )  # fmt: skip
        assert json.loads(raw)["status"] == "success"
        wrong = base64.b64encode(b"reader:not-it").decode()
        request = urllib.request.Request(
            f"{server.url}/api/v1/query?query=up", headers={"Authorization": f"Basic {wrong}"}
        )
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 401
    finally:
        stop_prometheus(server)
