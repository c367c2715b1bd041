"""Record real Prometheus ``query_range`` answers of Kafka's quota metrics
under several JMX exporter rule sets.

One SCRAM sandbox broker (Kafka 4.3.1, JMX on loopback) runs the JMX
exporter's java agent with the first rule set; every other rule set runs in
its own ``jmx_prometheus_httpserver`` over the broker's remote JMX, so all
rule sets see the same MBeans at the same time. One Prometheus (built from
the Go module proxy, cached) scrapes every exporter each second (job
``kafka``). The scenario of :mod:`quotaform.sandbox.livemetrics` runs
(quotas at several levels for SCRAM users, throttled and unthrottled
kafka-python clients, ip connection bursts) while Kafka's JmxTool reads the
broker's own MBeans every 10 s. Then, per rule set, the raw answer of one
``query_range`` (its instance only) is saved as
``<out>/<ruleset>.json`` beside ``<out>/<ruleset>.sidecar.json`` (quotas,
JmxTool readings, load, query, exporter mode, config overrides).

Every exporter config gets ``includeObjectNames`` of the quota MBeans (so a
1 s scrape of remote JMX stays fast; no metric name changes) and
``startDelaySeconds: 0`` (Confluent's file waits 120 s). Traffic stays on
127.0.0.1 and is bounded (``--seconds`` at most 150).

Usage::

    PYTHONPATH=. .venv/bin/python scripts/prometheus_live.py [--seconds 75] [--step 2]
        [--rulesets ours-strimzi,ours-kraft,...] [--out tests/fixtures/prometheus/recorded]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quotaform.sandbox.broker import BrokerOptions, start_broker, stop_broker  # noqa: E402
from quotaform.sandbox.exporter import (  # noqa: E402
    QUOTA_OBJECT_NAMES,
    ExporterServer,
    exporter_config,
    start_exporter_server,
    stop_exporter_server,
)
from quotaform.sandbox.jmx import read_mbeans  # noqa: E402
from quotaform.sandbox.livemetrics import (  # noqa: E402
    SCENARIO_QUOTAS,
    SCENARIO_USERS,
    command_config,
    prepare,
    run_scenario_load,
    set_quotas,
)
from quotaform.sandbox.prometheus import (  # noqa: E402
    ensure_prometheus,
    query_range,
    start_prometheus,
    stop_prometheus,
)

RULES = ROOT / "tests" / "fixtures" / "prometheus" / "rules"
SNIPPETS = ROOT / "examples" / "prometheus"
#: name -> (upstream rule set, quotaform snippet put first or None)
RULESETS: dict[str, tuple[Path, Path | None]] = {
    "ours-strimzi": (
        RULES / "strimzi-kafka-metrics.yaml",
        SNIPPETS / "strimzi-kafka-metrics-quota-rules.yaml",
    ),
    "ours-kraft": (
        RULES / "jmx-exporter-kafka-kraft-3_0_0.yml",
        SNIPPETS / "jmx-exporter-quota-rules.yml",
    ),
    "confluent": (RULES / "confluent-kafka_broker.yml", None),
    "jmx-exporter-2_0_0": (RULES / "jmx-exporter-kafka-2_0_0.yml", None),
    "jmx-exporter-2_0_0-2022": (RULES / "jmx-exporter-example_configs-kafka-2_0_0-2022.yml", None),
    "kraft": (RULES / "jmx-exporter-kafka-kraft-3_0_0.yml", None),
    "strimzi": (RULES / "strimzi-kafka-metrics.yaml", None),
}
OVERRIDES = {"includeObjectNames": list(QUOTA_OBJECT_NAMES), "startDelaySeconds": 0}
#: Every quota-metric naming seen in the published rule sets: ours and
#: Confluent's (kafka_server_<type>_<attr>), the KRaft example's folded names
#: (same prefixes), the kafka_server_quota_* form, and connection-accept series.
QUERY = (
    '{__name__=~"kafka_server_(produce|fetch|request|controllermutation|quota)_.*'
    '|kafka_server_socket_server_metrics_.*connection_accept_(rate|throttle_time)",'
    ' instance="%s"}'
)
JMX_PATTERNS = [
    "kafka.server:type=Produce,*",
    "kafka.server:type=Fetch,*",
    "kafka.server:type=Request,*",
    "kafka.server:type=ControllerMutation,*",
    "kafka.server:type=socket-server-metrics,*",
]
JMX_ATTRIBUTES = [
    "byte-rate",
    "throttle-time",
    "request-time",
    "tokens",
    "mutation-rate",
    "connection-accept-rate",
]


def number(value: float) -> float | str:
    """JSON-safe: NaN and infinities as Prometheus writes them."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=75.0, help="load duration (<= 150)")
    parser.add_argument("--step", type=float, default=2.0, help="query_range step, seconds")
    parser.add_argument("--rulesets", default=",".join(RULESETS), help="comma-separated")
    parser.add_argument("--out", type=Path, default=ROOT / "tests/fixtures/prometheus/recorded")
    args = parser.parse_args(argv)
    names = [n.strip() for n in args.rulesets.split(",") if n.strip()]
    unknown = [n for n in names if n not in RULESETS]
    if unknown or not names or not 10 <= args.seconds <= 150 or not 1 <= args.step <= 15:
        parser.error(f"unknown rule sets {unknown} or --seconds/--step out of range")

    def say(message: str) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)

    ensure_prometheus(say)
    work = Path(tempfile.mkdtemp(prefix="quotaform-prometheus-live-"))
    configs = {}
    for name in names:
        base, snippet = RULESETS[name]
        path = work / f"{name}.yaml"
        path.write_text(exporter_config(base, snippet=snippet, overrides=OVERRIDES))
        configs[name] = path
    sandbox = f"prometheus-live-{os.getpid()}"
    states = work / "states"
    exporters: dict[str, ExporterServer] = {}
    prometheus = None
    try:
        options = BrokerOptions(
            scram_users=SCENARIO_USERS, jmx_port=0, prometheus_rules=configs[names[0]]
        )
        broker = start_broker(name=sandbox, state_dir=states, options=options, on_progress=say)
        assert broker.prometheus_port is not None and broker.jmx_port is not None
        targets = {names[0]: f"127.0.0.1:{broker.prometheus_port}"}
        modes = {names[0]: "javaagent"}
        for name in names[1:]:
            exporters[name] = start_exporter_server(
                broker.jmx_port, configs[name].read_text(), state_dir=work, name=name
            )
            targets[name] = exporters[name].target
            modes[name] = "httpserver (remote JMX)"
        say(f"exporters: {targets}")
        prometheus = start_prometheus(
            list(targets.values()), state_dir=work / "prometheus", on_progress=say
        )
        say("creating topics, ACLs, filling the consumer's topic")
        prepare(broker)
        config = command_config(work)
        set_quotas(broker, config)
        say("quotas set; load starts")
        readings: list[dict[str, Any]] = []

        def read_broker() -> None:
            at = time.time()
            found = read_mbeans(broker.jmx_port or 0, JMX_PATTERNS, JMX_ATTRIBUTES)
            readings.append(
                {
                    "time": round(at, 3),
                    "mbeans": {
                        name: {k: number(v) for k, v in sorted(r.values.items())}
                        for name, r in sorted(found.items())
                    },
                }
            )

        run = run_scenario_load(broker, seconds=args.seconds, every=read_broker)
        read_broker()
        time.sleep(3)  # the last scrapes land
        say(f"load done: {run.results} errors={run.errors}")
        start, end = math.floor(run.started) - 4, math.ceil(time.time())
        args.out.mkdir(parents=True, exist_ok=True)
        for name in names:
            query = QUERY % targets[name]
            raw = query_range(prometheus.url, query, start=start, end=end, step_s=args.step)
            (args.out / f"{name}.json").write_bytes(raw)
            document = json.loads(raw)
            series = document["data"]["result"]
            sidecar = {
                "ruleset": name,
                "rules": {
                    "upstream": str(RULESETS[name][0].relative_to(ROOT)),
                    "snippet": str(RULESETS[name][1].relative_to(ROOT))
                    if RULESETS[name][1]
                    else None,
                    "overrides": OVERRIDES,
                },
                "exporter": {"mode": modes[name], "version": "1.0.1"},
                "prometheus": {
                    "version": "v0.316.0 (go install -tags remove_all_sd)",
                    "job": "kafka",
                    "instance": targets[name],
                    "scrape_interval_s": 1,
                },
                "kafka_version": broker.version,
                "query": {"query": query, "start": start, "end": end, "step_s": args.step},
                "series": len(series),
                "names": sorted(
                    {
                        json.dumps(
                            {k: v for k, v in s["metric"].items() if k not in ("instance", "job")},
                            sort_keys=True,
                        )
                        for s in series
                    }
                ),
                "quotas": [
                    {"entity": " ".join(entity), "values": values}
                    for entity, values in SCENARIO_QUOTAS
                ],
                "load": {
                    "started": round(run.started, 3),
                    "ended": round(run.ended, 3),
                    "clients": {
                        k: {"records": r.records, "bytes": r.bytes, "seconds": round(r.seconds, 2)}
                        for k, r in sorted(run.results.items())
                    },
                    "errors": run.errors,
                    "connection_bursts": {f"{k:.3f}": v for k, v in run.bursts.items()},
                    "topic_created": run.topic_created,
                },
                "broker_jmxtool": readings,
            }
            (args.out / f"{name}.sidecar.json").write_text(
                json.dumps(sidecar, indent=1, sort_keys=True) + "\n", encoding="utf-8"
            )
            say(f"{name}: {len(series)} series, {len(raw)} bytes")
        return 0
    finally:
        for server in exporters.values():
            stop_exporter_server(server)
        if prometheus is not None:
            stop_prometheus(prometheus)
        stop_broker(name=sandbox, state_dir=states)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
