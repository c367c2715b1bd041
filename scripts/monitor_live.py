"""The numbers of ``quotaform monitor`` (issue 36): one live run's table of
groups, and the rules' evaluation cost at 10,000 quota groups.

``--live`` (default): the scenario of ``tests/integration/test_monitor_live.py``
(a SCRAM sandbox broker with the JMX exporter agent and quotaform's rules, the
commands of docs/monitoring.md "Proven on the broker" run as shown, a real
Prometheus loading the rule file, the clients of
:mod:`quotaform.sandbox.monitorload`), then per client: the level and limit
of its group from the rules (``quotaform:client_quota_limit``), from
``quotaform explain`` on the live cluster, and its utilisation (p50, p99)
from the rules' ratio and from ``analyze utilisation --prometheus`` over the
same window. Written to ``benchmarks/results/monitor_live.json``.

``--groups N``: the rules of a configuration of N quota entries (every level,
ip levels) loaded by a real Prometheus that scrapes N quota groups (usage and
throttle time of each, served by a synthetic exporter on 127.0.0.1: no
broker) every 5 s and evaluates the rules every 5 s; after ``--seconds``, the
rule groups' evaluation time from Prometheus' own metrics
(``prometheus_rule_group_last_duration_seconds``, sampled every evaluation,
and the ``prometheus_rule_group_duration_seconds`` quantiles), the head
series, its resident memory, and a check that the limit series are what
:func:`~quotaform.kafka.resolution.quota_for_tags` gives for a sample of
groups. Written to ``benchmarks/results/monitor_rules_<N>.json``.

Usage::

    PYTHONPATH=. .venv/bin/python scripts/monitor_live.py [--live] [--seconds 25]
    PYTHONPATH=. .venv/bin/python scripts/monitor_live.py --groups 10000 [--seconds 120]
"""

from __future__ import annotations

import argparse
import http.server
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quotaform.kafka.entity import Entity  # noqa: E402
from quotaform.kafka.metrics import metric_tag  # noqa: E402
from quotaform.kafka.resolution import MetricTags, QuotaIndex, quota_for_tags  # noqa: E402
from quotaform.monitor.rules import LIMIT, RATIO, RuleOptions, build_rules, render_rules  # noqa: E402
from quotaform.sandbox.prometheus import (  # noqa: E402
    PROMETHEUS_VERSION,
    ensure_prometheus_tools,
    prometheus_get,
    query_range,
    start_prometheus,
    stop_prometheus,
)

RESULTS = ROOT / "benchmarks" / "results"
QUOTAS = ROOT / "examples" / "monitor" / "quotas.yaml"


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _instant(url: str, expr: str) -> list[dict[str, Any]]:
    answer = json.loads(prometheus_get(url, "/api/v1/query", {"query": expr}))
    return list(answer["data"]["result"])


def _percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    position = p * (len(ordered) - 1)
    low, high = math.floor(position), math.ceil(position)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def _group(labels: dict[str, str]) -> tuple[str, str, str, str]:
    """(quota key, user, client id, ip) of a series' labels."""
    return (
        labels["quota_key"], labels.get("user", ""), labels.get("client_id", ""),
        labels.get("ip", ""),
    )  # fmt: skip


def _load_average() -> list[float]:
    return [round(v, 2) for v in os.getloadavg()]


# ------------------------------------------------------------------ the live table


def live(seconds: float) -> dict[str, Any]:
    from quotaform.sandbox import BrokerOptions
    from quotaform.sandbox.broker import start_broker, stop_broker
    from quotaform.sandbox.exporter import QUOTA_OBJECT_NAMES, exporter_config
    from quotaform.sandbox.livemetrics import command_config, prepare
    from quotaform.sandbox.monitorload import (
        MONITOR_CLIENTS,
        MONITOR_USERS,
        SECOND_IP,
        run_monitor_load,
    )
    from tests.docblocks import fenced_block

    tools = ensure_prometheus_tools(on_progress=_say)
    work = Path(tempfile.mkdtemp(prefix="quotaform-monitor-live-"))
    strimzi = work / "strimzi.yaml"
    strimzi.write_text(
        exporter_config(
            ROOT / "tests" / "fixtures" / "prometheus" / "rules" / "strimzi-kafka-metrics.yaml",
            snippet=ROOT / "examples" / "prometheus" / "strimzi-kafka-metrics-quota-rules.yaml",
            overrides={"includeObjectNames": list(QUOTA_OBJECT_NAMES), "startDelaySeconds": 0},
        )
    )
    name = f"monitor-live-{os.getpid()}"
    options = BrokerOptions(scram_users=MONITOR_USERS, prometheus_rules=strimzi)
    broker = start_broker(name=name, options=options)
    prometheus = None
    try:
        prepare(broker, users=MONITOR_USERS, fill_bytes=12 * 1024 * 1024)
        admin = command_config(work, MONITOR_USERS)
        shutil.copytree(ROOT / "examples" / "monitor", work / "examples" / "monitor")
        path = [str(Path(sys.executable).parent), str(tools["promtool"].parent)]
        env = {
            **os.environ,
            "PATH": os.pathsep.join([*path, os.environ["PATH"]]),
            "PYTHONPATH": str(ROOT),
            "QUOTAFORM_BOOTSTRAP_SERVER": broker.bootstrap,
            "QUOTAFORM_COMMAND_CONFIG": str(admin),
            "NO_COLOR": "1",
        }  # fmt: skip
        commands = fenced_block("docs/monitoring.md", after="## Proven on the broker")
        done = subprocess.run(
            ["bash", "-e", "-c", commands], cwd=work, env=env, capture_output=True, text=True,
            timeout=300, check=True,
        )  # fmt: skip
        _say(done.stderr[-1500:])
        prometheus = start_prometheus(
            [f"127.0.0.1:{broker.prometheus_port}"],
            state_dir=work / "prometheus",
            binary=tools["prometheus"],
            rule_files=[work / "quotaform.rules.yaml"],
        )
        firing: set[tuple[str, ...]] = set()

        def poll() -> None:
            alerts = json.loads(prometheus_get(prometheus.url, "/api/v1/alerts"))["data"]["alerts"]
            for a in alerts:
                if a["state"] == "firing" and "quota_key" in a["labels"]:
                    labels = a["labels"]
                    firing.add((labels["alertname"], labels["quota_key"], labels.get("user", ""),
                                labels.get("client_id", ""), labels.get("ip", "")))  # fmt: skip

        load_before = _load_average()
        run = run_monitor_load(broker, seconds=seconds, every=poll)
        poll()
        since, until = run.started + 12, run.ended
        iso = [
            datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ") for t in (since, until)
        ]
        out = work / "analyze"
        subprocess.run(
            [sys.executable, "-m", "quotaform", "analyze", "utilisation", str(QUOTAS),
             "--prometheus", prometheus.url, "--step", "1s", "--since", iso[0], "--until", iso[1],
             "--out", str(out), "--engine", "python"],
            env=env, capture_output=True, text=True, timeout=300, check=True,
        )  # fmt: skip
        import pyarrow.parquet as pq

        analyzed = {
            (r["quota_key"], r["user"], r["client_id"], r["ip"] or ""): r
            for r in pq.read_table(out / "utilisation.parquet").to_pylist()
        }
        limits = {
            _group(s["metric"]): s["metric"] | {"value": float(s["value"][1])}
            for s in _instant(prometheus.url, LIMIT)
        }
        ratios: dict[tuple[str, ...], list[float]] = {}
        for s in json.loads(query_range(prometheus.url, RATIO, start=since, end=until, step_s=1))[
            "data"
        ]["result"]:
            m = s["metric"]
            key = (m["quota_key"], m.get("user", ""), m.get("client_id", ""), m.get("ip", ""))
            ratios[key] = [float(v) for _, v in s["values"] if not math.isnan(float(v))]
        who = [
            (c.name, ["--user", c.user, "--client-id", c.client_id], c.key) for c in MONITOR_CLIENTS
        ]
        who += [
            (f"ip {ip}", ["--ip", ip], "connection_creation_rate")
            for ip in ("127.0.0.1", SECOND_IP)
        ]
        rows = []
        for client, args, key in who:
            explained = json.loads(
                subprocess.run(
                    [sys.executable, "-m", "quotaform", "explain", *args, "-o", "json"],
                    env=env, capture_output=True, text=True, timeout=60, check=True,
                ).stdout
            )["quotas"][key]  # fmt: skip
            tags = explained["metric_tags"]
            group = (key, tags.get("user", ""), tags.get("client-id", ""), tags.get("ip", ""))
            rule = limits.get(group)
            ours = ratios.get(group)
            theirs = analyzed.get(group)
            entity = explained["entity"]
            rows.append(
                {
                    "client": client,
                    "quota_key": key,
                    "group": dict(zip(("user", "client_id", "ip"), group[1:], strict=True)),
                    "level_rules": int(rule["level"]) if rule else None,
                    "level_explain": explained["level"],
                    "entity_rules": rule["entity"] if rule else None,
                    "entity_explain": Entity.from_mapping(entity).label() if entity else None,
                    "limit_rules": rule["value"] if rule else None,
                    "limit_explain": explained["value"],
                    "utilisation_p50_rules": _percentile(ours, 0.5) if ours else None,
                    "utilisation_p50_analyze": (theirs["p50"] / theirs["quota_value"])
                    if theirs and theirs["quota_value"]
                    else None,
                    "utilisation_p99_rules": _percentile(ours, 0.99) if ours else None,
                    "utilisation_p99_analyze": theirs["utilisation_p99"] if theirs else None,
                    "alerts_fired": sorted(a[0] for a in firing if a[1:] == group),
                }
            )
        return {
            "what": "issue 36: monitor rules on a live sandbox broker and Prometheus",
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "kafka_version": broker.version,
            "prometheus": PROMETHEUS_VERSION,
            "load_seconds": seconds,
            "window": {"since": iso[0], "until": iso[1]},
            "load_average_before": load_before,
            "clients": {
                k: {"bytes": v.bytes, "seconds": round(v.seconds, 1)}
                for k, v in run.results.items()
            },
            "errors": run.errors,
            "groups": rows,
        }
    finally:
        if prometheus is not None:
            stop_prometheus(prometheus)
        stop_broker(name=name)


# ------------------------------------------------------------------ the cost at N groups


def synthetic(
    n: int, seed: int = 36
) -> tuple[dict[Entity, dict[str, float]], list[dict[str, str]]]:
    """N quota entries over every level and N quota groups (their tags as the
    broker writes them), shaped like a fleet: most entries per user and
    client id, fewer per user, per client id and per ip, one of each default."""
    rng = random.Random(seed)
    entries: dict[Entity, dict[str, float]] = {}
    groups: list[dict[str, str]] = []
    shares = {"l1": 0.40, "l2": 0.20, "l3": 0.20, "l4": 0.10, "l7": 0.05}
    count = {k: int(n * v) for k, v in shares.items()}
    defaults = {
        Entity.of(user=None, client_id=None): {"producer_byte_rate": 4 * 1024**2},
        Entity.of(user=None): {"producer_byte_rate": 1024**2},
        Entity.of(client_id=None): {"consumer_byte_rate": 8 * 1024**2},
        Entity.of(ip=None): {"connection_creation_rate": 20},
    }
    count["ip"] = n - sum(count.values()) - len(defaults)

    def rate() -> float:
        return float(rng.choice((256, 512, 1024, 2048, 4096)) * 1024)

    for i in range(count["l1"]):
        entries[Entity.of(user=f"svc-{i}", client_id=f"app-{i}")] = {"producer_byte_rate": rate()}
        groups.append({"key": "producer_byte_rate", "user": f"svc-{i}", "client_id": f"app-{i}"})
    for i in range(count["l2"]):
        entries[Entity.of(user=f"batch-{i}", client_id=None)] = {"producer_byte_rate": rate()}
        groups.append({"key": "producer_byte_rate", "user": f"batch-{i}", "client_id": f"job-{i}"})
    for i in range(count["l3"]):
        entries[Entity.of(user=f"team-{i}")] = {"producer_byte_rate": rate()}
        groups.append({"key": "producer_byte_rate", "user": f"team-{i}"})
    for i in range(count["l4"]):
        entries[Entity.of(user=None, client_id=f"shared-{i}")] = {"producer_byte_rate": rate()}
        groups.append(
            {"key": "producer_byte_rate", "user": f"guest-{i}", "client_id": f"shared-{i}"}
        )
    for i in range(count["l7"]):
        entries[Entity.of(client_id=f"reader-{i}")] = {"consumer_byte_rate": rate()}
        groups.append({"key": "consumer_byte_rate", "client_id": f"reader-{i}"})
    for i in range(count["ip"]):
        ip = f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"
        entries[Entity.of(ip=ip)] = {"connection_creation_rate": float(rng.choice((5, 10, 50)))}
        groups.append({"key": "connection_creation_rate", "ip": ip})
    entries.update(defaults)
    # the groups the defaults govern: level 5, 6, 8 and ip level 2
    extra = n - len(groups)
    for i in range(extra):
        kind = i % 4
        if kind == 0:
            groups.append(
                {"key": "producer_byte_rate", "user": f"anon-{i}", "client_id": f"tool-{i}"}
            )
        elif kind == 1:
            groups.append({"key": "producer_byte_rate", "user": f"anon-{i}"})
        elif kind == 2:
            groups.append({"key": "consumer_byte_rate", "client_id": f"cli-{i}"})
        else:
            groups.append(
                {"key": "connection_creation_rate", "ip": f"192.168.{i // 256 % 256}.{i % 256}"}
            )
    return entries, groups


_NAMES = {
    "producer_byte_rate": ("kafka_server_produce_byte_rate", "kafka_server_produce_throttle_time"),
    "consumer_byte_rate": ("kafka_server_fetch_byte_rate", "kafka_server_fetch_throttle_time"),
    "connection_creation_rate": ("kafka_server_socket_server_metrics_connection_accept_rate", None),
}


def exposition(
    groups: list[dict[str, str]], entries: dict[Entity, dict[str, float]], seed: int = 7
) -> bytes:
    """The text exposition of every group's usage (and throttle time) series,
    shaped like a fleet: 97 % of the groups at 0-60 % of their limit, 2 % at
    95 %, 1 % throttled (at 102 %, a throttle time); groups without a limit
    at 0-1 MB/s."""
    rng = random.Random(seed)
    index = QuotaIndex(entries)
    lines = []
    for group in groups:
        usage, throttle = _NAMES[group["key"]]
        tags = MetricTags(user=group.get("user", ""), client_id=group.get("client_id", ""),
                          ip=group.get("ip", ""))  # fmt: skip
        limit = quota_for_tags(index, tags, group["key"]).value
        draw = rng.random()
        share, throttled = (
            (1.02, True) if draw < 0.01 else (0.95, False) if draw < 0.03
            else (rng.uniform(0, 0.6), False)
        )  # fmt: skip
        value = limit * share if limit is not None else rng.uniform(0, 1e6)
        labels = ",".join(
            f'{k}="{metric_tag(t, group[k])}"'
            for k, t in (("user", "user"), ("client_id", "client-id"), ("ip", "ip"))
            if k in group
        )
        lines.append(f"{usage}{{{labels}}} {value:.1f}")
        if throttle:
            lines.append(f"{throttle}{{{labels}}} {'25.5' if throttled else 'NaN'}")
    return ("\n".join(lines) + "\n").encode()


class _Exporter(http.server.BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(self.body)))
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


def _metric_values(text: str, name: str) -> dict[str, float]:
    """``{labels text: value}`` of one metric in a text exposition."""
    found = {}
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            head, _, value = line.rpartition(" ")
            found[head[len(name) :]] = float(value)
    return found


def cost(n: int, seconds: float, interval_s: float = 5.0) -> dict[str, Any]:
    tools = ensure_prometheus_tools(on_progress=_say)
    entries, groups = synthetic(n)
    work = Path(tempfile.mkdtemp(prefix="quotaform-monitor-cost-"))
    built = build_rules(
        QuotaIndex(entries), RuleOptions(cluster="bench", source=f"{n} synthetic entries")
    )
    started = time.perf_counter()
    text = render_rules(built)
    rules = work / "quotaform.rules.yaml"
    rules.write_text(text)
    write_s = time.perf_counter() - started
    check = subprocess.run(
        [str(tools["promtool"]), "check", "rules", str(rules)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    _Exporter.body = exposition(groups, entries)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Exporter)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    target = f"127.0.0.1:{server.server_address[1]}"
    prometheus = start_prometheus(
        [target], state_dir=work / "prometheus", binary=tools["prometheus"],
        scrape_interval_s=interval_s, rule_files=[rules],
    )  # fmt: skip
    try:
        load_before = _load_average()
        samples: dict[str, list[float]] = {}
        deadline = time.monotonic() + seconds
        last: dict[str, float] = {}
        while time.monotonic() < deadline:
            time.sleep(interval_s)
            own = prometheus_get(prometheus.url, "/metrics").decode()
            for labels, value in _metric_values(
                own, "prometheus_rule_group_last_duration_seconds"
            ).items():
                group = re.search(r'rule_group="[^;]*;([^"]+)"', labels).group(1)  # type: ignore[union-attr]
                if value > 0 and last.get(group) != value:
                    samples.setdefault(group, []).append(value)
                    last[group] = value
        own = prometheus_get(prometheus.url, "/metrics").decode()
        quantiles = {}
        for labels, value in _metric_values(own, "prometheus_rule_group_duration_seconds").items():
            quantile = re.search(r'quantile="([^"]+)"', labels)
            if quantile:
                quantiles[quantile.group(1)] = value
        answer = json.loads(prometheus_get(prometheus.url, "/api/v1/rules"))["data"]["groups"]
        rules_per_group = {g["name"]: len(g["rules"]) for g in answer}
        # the last evaluation of each rule outside the entry table, slowest first
        per_rule = sorted(
            (
                (r["evaluationTime"], r.get("name", ""), r.get("labels", {}).get("quota_key", ""))
                for g in answer
                if not g["name"].startswith("quotaform-entries")
                for r in g["rules"]
            ),
            reverse=True,
        )
        head = _metric_values(own, "prometheus_tsdb_head_series")
        memory = _metric_values(own, "process_resident_memory_bytes")
        limits = _instant(prometheus.url, LIMIT)
        ratios = _instant(prometheus.url, f"count({RATIO})")
        # a sample of groups: the limit Prometheus computed is the one quota_for_tags gives
        index = QuotaIndex(entries)
        by_group = {_group(s["metric"]): s for s in limits}
        rng = random.Random(1)
        checked = mismatched = 0
        for group in rng.sample(groups, 500):
            key = group["key"]
            tags = MetricTags(user=group.get("user", ""), client_id=group.get("client_id", ""),
                              ip=group.get("ip", ""))  # fmt: skip
            expected = quota_for_tags(index, tags, key)
            found = by_group.get(_group({"quota_key": key, **group}))
            checked += 1
            ok = (
                (found is None and expected.value is None)
                or (found is not None and expected.value is not None
                    and float(found["value"][1]) == expected.value
                    and found["metric"]["level"] == str(expected.level.number)  # type: ignore[union-attr]
                    and found["metric"]["entity"] == expected.entity.label())  # type: ignore[union-attr]
            )  # fmt: skip
            mismatched += not ok
        return {
            "what": f"issue 36: evaluation cost of the monitor rules at {n} quota groups",
            "when": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "prometheus": PROMETHEUS_VERSION,
            "machine": {
                "cpus": os.cpu_count(),
                "load_average_before": load_before,
                "load_average_after": _load_average(),
            },
            "entries": built.entries,
            "groups": len(groups),
            "series_scraped": sum(1 for g in groups for name in _NAMES[g["key"]] if name),
            "usage_shape": "97 % of groups at 0-60 % of their limit, 2 % at 95 %, 1 % throttled",
            "rules": built.rules,
            "rules_per_group": rules_per_group,
            "slowest_rules_last_evaluation_s": [
                {"rule": name, "quota_key": key, "seconds": round(t, 4)}
                for t, name, key in per_rule[:8]
            ],
            "rule_file_bytes": len(text.encode()),
            "build_and_render_s": round(write_s, 3),
            "promtool_check_rules": check.stdout.strip().splitlines()[-1]
            if check.stdout
            else check.stderr,
            "interval_s": interval_s,
            "seconds": seconds,
            "last_duration_s": {
                g: {"evaluations": len(v), "median": _percentile(v, 0.5), "max": max(v)}
                for g, v in sorted(samples.items())
            },
            "group_duration_quantiles_s": quantiles,
            "head_series": next(iter(head.values()), None),
            "resident_memory_mib": round(next(iter(memory.values()), 0) / 1024**2, 1),
            "limit_series": len(limits),
            "ratio_series": int(float(ratios[0]["value"][1])) if ratios else 0,
            "sampled_groups_checked": checked,
            "sampled_groups_mismatched": mismatched,
        }
    finally:
        stop_prometheus(prometheus)
        server.shutdown()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--live", action="store_true", help="the live table (default)")
    parser.add_argument(
        "--groups", type=int, help="measure the evaluation cost at this many groups"
    )
    parser.add_argument(
        "--seconds", type=float, help="load (live: 25) or measuring (cost: 120) time"
    )
    parser.add_argument("--out", type=Path, help="the results JSON")
    args = parser.parse_args()
    if args.groups:
        result = cost(args.groups, args.seconds or 120.0)
        out = args.out or RESULTS / f"monitor_rules_{args.groups}.json"
    else:
        result = live(args.seconds or 25.0)
        out = args.out or RESULTS / "monitor_live.json"
    out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    _say(json.dumps(result, indent=2)[:6000])
    _say(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
