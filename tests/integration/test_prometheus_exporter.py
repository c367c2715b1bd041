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

Traffic goes to 127.0.0.1 only and is bounded (20 s of load: 12 s for the rate
window, then 8 s of steady samples, 1 s apart in Prometheus and 2 s apart in
JmxTool's readings; ``scripts/prometheus_live.py`` runs the scenario longer).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from quotaform.analytics.usage import write_jsonl
from quotaform.app.collect import read_usage_once
from quotaform.cli.app import app
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
    prometheus_get,
    query_range,
    start_prometheus,
    stop_prometheus,
)
from tests.configcommand import run_config_command
from tests.docblocks import fenced_block, one_line
from tests.httpfaults import FlakyProxy

# Under pytest-xdist one worker runs the whole module: its module fixture starts once.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("prometheus")]

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "tests" / "fixtures" / "prometheus" / "rules"
SNIPPETS = ROOT / "examples" / "prometheus"
OVERRIDES = {"includeObjectNames": list(QUOTA_OBJECT_NAMES), "startDelaySeconds": 0}
LOAD_S = 20.0
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
    jmxtool: Path  # the broker's own readings (JmxTool) during the load, usage JSON Lines
    admin: Path  # the super user's client properties


@pytest.fixture(scope="module")
def live(prometheus_binary: Path, sandbox_broker: Any) -> Iterator[Live]:
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
            set_quotas(broker, command_config(work), run=run_config_command)
            jmx = work / "jmxtool.jsonl"
            with jmx.open("w", encoding="utf-8") as out, _reading(broker, out):
                run = run_scenario_load(broker, seconds=LOAD_S)
            _scraped_after(prometheus, [agent, exporter.target], run.ended)
            print(f"\nload: {run.results} errors={run.errors}")
            yield Live(
                broker,
                prometheus,
                {"strimzi": agent, "kraft": exporter.target},
                run,
                jmx,
                command_config(work),
            )
        finally:
            stop_prometheus(prometheus)
            stop_exporter_server(exporter)


def _scraped_after(
    prometheus: PrometheusServer, instances: list[str], moment: float, timeout_s: float = 15.0
) -> None:
    """Wait until Prometheus holds a scrape of every instance taken after
    ``moment`` (unix seconds): the load's last samples have landed."""
    deadline = time.monotonic() + timeout_s
    while True:
        answer = json.loads(
            prometheus_get(prometheus.url, "/api/v1/query", {"query": "timestamp(up)"})
        )
        latest = {r["metric"]["instance"]: float(r["value"][1]) for r in answer["data"]["result"]}
        if all(latest.get(i, 0.0) > moment for i in instances) or time.monotonic() > deadline:
            return
        time.sleep(0.2)


@contextmanager
def _reading(broker: SandboxBroker, out: IO[str], every_s: float = 2.0) -> Iterator[None]:
    """The broker's own quota metrics read with JmxTool every ``every_s``
    into ``out`` (usage JSON Lines) while the block runs, on a thread."""
    done = threading.Event()

    def read() -> None:
        while not done.wait(every_s):
            records = read_usage_once(
                broker.jmx_port or 0, cluster="live-sandbox", broker="jmxtool"
            )
            write_jsonl(records, out)
            out.flush()

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=30)


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


# ----------------------------------------------------------------- quotaform analyze --prometheus

#: The scenario's principals with traffic, and the quota keys they exercise.
PRINCIPALS = (
    ("alice", "alice-app", ("producer_byte_rate", "request_percentage")),
    ("bob", "bob-app", ("producer_byte_rate",)),
    ("bob", "bob-reader", ("consumer_byte_rate",)),
    ("carol", "carol-app", ("producer_byte_rate", "request_percentage")),
    ("dave", "", ("producer_byte_rate",)),
)
QUOTAS = ROOT / "examples" / "prometheus" / "quotas.yaml"
runner = CliRunner()


def _env(**extra: str) -> dict[str, str]:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return {**env, **extra}


def _documented_command() -> str:
    return one_line(fenced_block("docs/analytics.md", after="## From a live Prometheus"))


def _rows(out: Path, command: str = "utilisation") -> list[dict[str, Any]]:
    return pq.read_table(out / f"{command}.parquet").to_pylist()


def _iso(unix_s: float) -> str:
    return datetime.fromtimestamp(unix_s, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_analyze_reads_the_live_prometheus_as_the_docs_show(live: Live, tmp_path: Path) -> None:
    """The ``--prometheus`` command of docs/analytics.md, run exactly as shown: both rule
    sets (agent + Strimzi snippet, httpserver + KRaft snippet) give the same
    groups and levels; the cluster is assumed and said; answers saved."""
    command = _documented_command()
    assert "--prometheus" in command
    shutil.copytree(ROOT / "examples" / "prometheus", tmp_path / "examples" / "prometheus")
    done = subprocess.run(
        ["bash", "-c", command], cwd=tmp_path, env=_env(PROMETHEUS_URL=live.prometheus.url),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, (command, done.stdout, done.stderr[-3000:])
    said = " ".join(done.stderr.split())
    assert "assumed the one configured cluster 'live-sandbox'" in said, said
    assert "series read: kafka_server_produce_byte_rate -> produce-byte-rate (labels)" in said
    out = tmp_path / "out" / "live"
    assert sorted(p.name for p in (out / "prometheus").iterdir()) == ["query-0001.json"]
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    assert summary["rejected"]["count"] == 0, summary["rejected"]
    groups: dict[str, set[tuple[Any, ...]]] = {}
    for row in _rows(out):
        groups.setdefault(row["broker"], set()).add(
            (row["user"], row["client_id"], row["ip"], row["quota_key"], row["level"])
        )
    assert set(groups) == set(live.instances.values()), sorted(groups)
    agent, kraft = (groups[live.instances[r]] for r in ("strimzi", "kraft"))
    assert agent == kraft, sorted(agent ^ kraft)
    assert ("alice", "alice-app", None, "producer_byte_rate", 1) in agent
    assert ("", "", "127.0.0.1", "connection_creation_rate", 1) in agent


def _explained(live: Live, user: str, client_id: str) -> dict[str, Any]:
    result = runner.invoke(
        app,
        [
            "explain", "--user", user, "--client-id", client_id, "-o", "json",
            "--bootstrap-server", live.broker.bootstrap, "--command-config", str(live.admin),
        ],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)["quotas"]


def _analyze(out: Path, *source: str, since: str, until: str) -> list[dict[str, Any]]:
    result = runner.invoke(
        app,
        [
            "analyze", "utilisation", str(QUOTAS), *source, "--since", since, "--until", until,
            "--out", str(out), "--engine", "python",
        ],
    )  # fmt: skip
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return _rows(out)


def test_groups_levels_and_utilisation_equal_explain_and_the_broker(
    live: Live, tmp_path: Path
) -> None:
    """Per principal and key: the group and level ``analyze --prometheus``
    finds are what ``quotaform explain`` (live) predicts, and its usage is
    what the broker's own metrics (JmxTool, read during the load) measured."""
    since, until = _iso(live.run.started + 12), _iso(live.run.ended)  # past the first window
    prometheus = _analyze(
        tmp_path / "prom",
        "--prometheus", live.prometheus.url, "--step", "1s",
        "--prometheus-match", f'instance="{live.instances["strimzi"]}"',
        since=since, until=until,
    )  # fmt: skip
    broker = _analyze(tmp_path / "jmx", "--usage", str(live.jmxtool), since=since, until=until)
    found = {(r["user"], r["client_id"], r["quota_key"]): r for r in prometheus}
    measured = {(r["user"], r["client_id"], r["quota_key"]): r for r in broker}
    lines = [f"{'group':40} {'key':20} {'level':>5} {'p50 prom':>10} {'p50 jmx':>10} censored"]
    off: list[str] = []
    for user, client_id, keys in PRINCIPALS:
        explained = _explained(live, user, client_id)
        for key in keys:
            tags = explained[key]["metric_tags"]
            group = (tags["user"], tags["client-id"], key)
            assert group in found, (user, client_id, key, sorted(found))
            row, jmx = found[group], measured.get(group)
            lines.append(
                f"{user + '/' + client_id + ' -> ' + '/'.join(group[:2]):40} {key:20} "
                f"{row['level'] or '-':>5} {row['p50']:10.0f} "
                f"{(jmx or {}).get('p50') or float('nan'):10.0f} {row['censored']}"
            )
            assert row["level"] == explained[key]["level"], (group, row, explained[key])
            assert row["quota_value"] == explained[key]["value"], (group, row)
            assert jmx is not None, (group, sorted(measured))
            assert (jmx["level"], jmx["quota_value"]) == (row["level"], row["quota_value"])
            assert jmx["censored"] == row["censored"], (group, row, jmx)
            if key != "request_percentage" and row["p50"] != pytest.approx(jmx["p50"], rel=0.3):
                off.append(f"{group}: p50 {row['p50']:.0f} (Prometheus) vs {jmx['p50']:.0f}")
    print("\n".join(["", *lines]))
    # the same sensor sampled at other moments (scrape every 1 s, JmxTool every 4 s)
    assert not off, "\n".join([*off, *lines])
    alice = found[("alice", "alice-app", "producer_byte_rate")]
    assert alice["censored"] and alice["utilisation_p99"] == pytest.approx(1.0, abs=0.3)
    carol = found[("", "carol-app", "producer_byte_rate")]
    assert not carol["censored"] and carol["utilisation_p99"] < 0.5
    assert found[("bob", "", "consumer_byte_rate")]["censored"]


def test_quotaform_authenticates_over_tls_and_never_shows_the_secret(
    live: Live, prometheus_binary: Path, tmp_path: Path
) -> None:
    """A real Prometheus behind basic auth (bcrypt web config) and TLS
    (trustme's CA): refused without credentials, refused without the CA,
    read with both (environment variables, or a Prometheus HTTP client
    config file); the password is never printed."""
    import trustme

    secret = "reader-secret-5d1f"
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1")
    cert, key, ca_file = tmp_path / "cert.pem", tmp_path / "key.pem", tmp_path / "ca.pem"
    issued.private_key_pem.write_to_path(str(key))
    issued.cert_chain_pems[0].write_to_path(str(cert))
    ca.cert_pem.write_to_path(str(ca_file))
    (tmp_path / "password").write_text(secret + "\n", encoding="utf-8")
    server = start_prometheus(
        [live.instances["strimzi"]],
        state_dir=tmp_path / "server",
        binary=prometheus_binary,
        web_config={
            **basic_auth_web_config({"reader": secret}),
            "tls_server_config": {"cert_file": str(cert), "key_file": str(key)},
        },
    )
    try:
        args = [
            "analyze", "utilisation", str(QUOTAS), "--prometheus", server.url,
            "--since", "30s", "--step", "1s", "--engine", "python",
        ]  # fmt: skip
        login = {
            "QUOTAFORM_PROMETHEUS_USERNAME": "reader",
            "QUOTAFORM_PROMETHEUS_PASSWORD_FILE": str(tmp_path / "password"),
        }

        def run(*extra: str, env: dict[str, str] | None = None) -> Any:
            out = tmp_path / f"out{len(list(tmp_path.glob('out*')))}"
            result = runner.invoke(app, [*args, "--out", str(out), *extra], env=env)
            assert secret not in result.stdout + result.stderr
            return result, out

        deadline = time.monotonic() + 30  # until the new server has scraped the agent
        while True:
            read, out = run("--prometheus-ca-file", str(ca_file), env=login)
            if read.exit_code == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert read.exit_code == 0, read.stderr
        assert secret not in (out / "summary.json").read_text(encoding="utf-8")
        refused, _ = run("--prometheus-ca-file", str(ca_file))
        assert refused.exit_code == 1
        assert "refused the request (401)" in " ".join(refused.stderr.split())
        untrusted, _ = run(env=login)
        assert untrusted.exit_code == 1
        assert "TLS failed" in untrusted.stderr and "--prometheus-ca-file" in untrusted.stderr
        config = tmp_path / "http.yml"
        config.write_text(
            "basic_auth:\n  username: reader\n  password_file: password\n"
            "tls_config:\n  ca_file: ca.pem\n",
            encoding="utf-8",
        )
        from_file, _ = run("--prometheus-config", str(config))
        assert from_file.exit_code == 0, from_file.stderr
    finally:
        stop_prometheus(server)


def test_transient_failures_are_retried_a_bounded_number_of_times(
    live: Live, tmp_path: Path
) -> None:
    """A 503 and a reset before the real server: retried, then read; four
    failures in a row: one Error: line naming the last one."""
    args = [
        "analyze", "utilisation", str(QUOTAS), "--since", "30s", "--step", "1s",
        "--engine", "python",
    ]  # fmt: skip
    flaky = FlakyProxy(live.prometheus.port, failures=2, faults=("503", "reset"))
    try:
        result = runner.invoke(
            app, [*args, "--prometheus", flaky.url, "--out", str(tmp_path / "a")]
        )
    finally:
        flaky.close()
    assert result.exit_code == 0, result.stderr
    assert result.stderr.count("retrying (") == 2, result.stderr
    assert flaky.connections == 3
    down = FlakyProxy(live.prometheus.port, failures=10, faults=("503",))
    try:
        result = runner.invoke(app, [*args, "--prometheus", down.url, "--out", str(tmp_path / "b")])
    finally:
        down.close()
    assert result.exit_code == 1
    assert down.connections == 4  # ATTEMPTS, no more
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1 and "did not answer after 4 attempts" in errors[0], result.stderr
