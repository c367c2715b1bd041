"""The fleet analytics end to end on real input: kafka-python clients under
quotas at several levels on a JMX sandbox broker (some groups saturated,
one not), the collector reading the broker's quota MBeans (Kafka's JmxTool)
into the usage table, and ``quotaform analyze`` on Spark over it.

Asserted: the groups and tags found are the ones explain predicts; the
saturated groups run near their quota and are flagged censored, the other
not; lowering the unsaturated group's quota is predicted to throttle exactly
that group, and when the plan is applied and the load run again the broker
throttles exactly it. The predicted and measured throttle times are printed
(``pytest -s``) for the record: ``predicted_throttle_ms`` is the steady-state
mean the broker's ``throttle-time`` reports (S / T, S the producer's batch of
64 KiB given with ``--request-bytes``; tests/integration/test_impact_prediction.py
holds the targets), ``first_throttle_ms`` the first throttle.

Traffic goes to 127.0.0.1 only, bounded in time and bytes.
"""

from __future__ import annotations

import json
import statistics
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from kafka.admin import KafkaAdminClient, NewTopic
from typer.testing import CliRunner

from quotaform.app.collect import collect_jmx
from quotaform.cli.app import app
from quotaform.sandbox import SandboxBroker
from quotaform.sandbox.load import consume, produce

from .helpers import DEFAULT, quota, write_manifest

# One worker of pytest-xdist holds the session's JMX broker and every module using it.
pytestmark = [pytest.mark.broker, pytest.mark.spark, pytest.mark.xdist_group("jmx")]

KiB = 1024
runner = CliRunner()
LOAD_S = 22.0
SETTLED_S = 12.0  # past the ~10-12 s rate window and the first burst


def manifest(folder: Path, light: str) -> None:
    """Quotas at three levels, ``light`` being everyone else's produce quota."""
    write_manifest(
        folder / "m.yaml",
        "jmx",
        [
            # level 1: saturated producer
            quota({"user": "ANONYMOUS", "client-id": "an-sat"}, producer_byte_rate="256KiB"),
            # level 6: everyone else's produce
            quota({"user": DEFAULT}, producer_byte_rate=light),
            # level 7: saturated consumer
            quota({"client-id": "an-cons"}, consumer_byte_rate="384KiB"),
        ],
        scope=[{"shape": "user"}, {"shape": "client-id"}, {"shape": "user+client-id"}],
        allow_deletes=True,
    )


def cli(*args: str) -> Any:
    result = runner.invoke(app, list(args), env={"NO_COLOR": "1"})
    assert result.exit_code in (0, 2), result.output
    return result


def table(path: Path) -> list[dict[str, Any]]:
    parts = [path] if path.is_file() else sorted(path.glob("*.parquet"))
    return [r for part in parts for r in pq.read_table(part).to_pylist()]


def run_load(broker: SandboxBroker, usage: Path) -> datetime:
    """One load phase with the collector running; returns when it started."""
    started = datetime.now(UTC)
    b = broker.bootstrap
    jobs = [
        lambda: produce(b, "an-load", client_id="an-sat", seconds=LOAD_S),
        lambda: produce(b, "an-load", client_id="an-light", seconds=LOAD_S, rate=100 * KiB),
        lambda: consume(b, "an-fill", client_id="an-cons", seconds=LOAD_S, max_bytes=14 << 20),
    ]
    threads = [threading.Thread(target=job, daemon=True) for job in jobs]
    for thread in threads:
        thread.start()
    with usage.open("a", encoding="utf-8") as fh:
        collect_jmx(
            broker.jmx_port or 0, fh, cluster="jmx", broker="1", seconds=LOAD_S, interval_s=2.0
        )
    for thread in threads:
        thread.join(60)
    return started


def test_utilisation_and_impact_on_real_broker_metrics(
    jmx_broker: SandboxBroker, tmp_path: Path
) -> None:
    bootstrap = jmx_broker.bootstrap
    manifests = tmp_path / "m"
    manifest(manifests, light="4MiB")
    cli(
        "apply", str(manifests), "--bootstrap-server", bootstrap, "--auto-approve",
        "--allow-deletes", "--allow-relax", "--allow-default-removal",
    )  # fmt: skip
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    admin.create_topics([NewTopic("an-fill", 1, 1), NewTopic("an-load", 1, 1)])
    admin.close()
    produce(bootstrap, "an-fill", client_id="an-fill", seconds=60, max_bytes=14 * 1024 * KiB)

    usage = tmp_path / "usage.jsonl"
    started = run_load(jmx_broker, usage)
    since = (started + timedelta(seconds=SETTLED_S)).strftime("%Y-%m-%dT%H:%M:%S")

    # What explain predicts for each client: the groups the pipeline must find.
    predicted = set()
    for client, key in (
        ("an-sat", "producer_byte_rate"),
        ("an-light", "producer_byte_rate"),
        ("an-cons", "consumer_byte_rate"),
    ):
        explained = json.loads(
            cli(
                "explain",
                str(manifests),
                "--user",
                "ANONYMOUS",
                "--client-id",
                client,
                "-o",
                "json",
            ).stdout
        )["quotas"][key]
        tags = explained["metric_tags"]
        predicted.add((tags["user"], tags["client-id"], key, explained["level"]))

    out = tmp_path / "utilisation"
    cli("analyze", "utilisation", str(manifests), "--usage", str(usage), "--since", since,
        "--out", str(out), "--engine", "spark")  # fmt: skip
    rows = table(out / "utilisation.parquet")
    by_group = {(r["user"], r["client_id"], r["quota_key"]): r for r in rows}
    found = {(r["user"], r["client_id"], r["quota_key"], r["level"]) for r in rows if r["p99"]}
    assert predicted <= found, (predicted, found)
    assert predicted == {
        ("ANONYMOUS", "an-sat", "producer_byte_rate", 1),
        ("ANONYMOUS", "", "producer_byte_rate", 6),
        ("", "an-cons", "consumer_byte_rate", 7),
    }
    saturated = [
        by_group[("ANONYMOUS", "an-sat", "producer_byte_rate")],
        by_group[("", "an-cons", "consumer_byte_rate")],
    ]
    light = by_group[("ANONYMOUS", "", "producer_byte_rate")]
    print(
        "\nutilisation_p99:",
        {
            f"{r['user']}/{r['client_id']}/{r['quota_key']}": round(r["utilisation_p99"], 3)
            for r in rows
            if r["utilisation_p99"]
        },
    )
    for row in saturated:
        assert 0.85 <= row["utilisation_p99"] <= 1.3, row
        assert row["censored"], row
    assert light["utilisation_p99"] < 0.2 and not light["censored"], light

    # The live cluster read with --bootstrap-server (no profile name) is named
    # after the one cluster the usage names, so the collected usage joins it.
    live = tmp_path / "live"
    cli("analyze", "utilisation", "--bootstrap-server", bootstrap, "--usage", str(usage),
        "--since", since, "--out", str(live), "--engine", "python")  # fmt: skip
    summary = json.loads((live / "summary.json").read_text(encoding="utf-8"))
    assert summary["configurations"][0].startswith("jmx: live cluster "), summary
    live_found = {
        (r["user"], r["client_id"], r["quota_key"], r["level"])
        for r in table(live / "utilisation.parquet")
        if r["p99"]
    }
    assert predicted <= live_found, (predicted, live_found)

    # The change: everyone else's produce quota below what an-light uses.
    manifest(manifests, light="48KiB")
    plan_file = tmp_path / "plan.json"
    cli(
        "plan",
        str(manifests),
        "--bootstrap-server",
        bootstrap,
        "--out",
        str(plan_file),
        "--allow-relax",
    )
    impact = tmp_path / "impact"
    cli("analyze", "impact", "--plan", str(plan_file), "--usage", str(usage), "--since", since,
        "--out", str(impact), "--engine", "spark",
        "--request-bytes", f"producer_byte_rate={64 * KiB}")  # fmt: skip
    changes = table(impact / "impact.parquet")
    predicted_throttled = {
        (r["user"], r["client_id"], r["quota_key"])
        for r in changes
        if r["predicted_throttle_ms"] > 0
    }
    assert predicted_throttled == {("ANONYMOUS", "", "producer_byte_rate")}
    (change,) = [r for r in changes if r["predicted_throttle_ms"] > 0]
    assert change["newly_throttled"] and change["quota_after"] == 48 * KiB
    report = (impact / "report.md").read_text(encoding="utf-8")
    assert "would be throttled that are not today" in report

    cli("apply", str(plan_file), "--bootstrap-server", bootstrap)
    after_usage = tmp_path / "after.jsonl"
    started = run_load(jmx_broker, after_usage)
    window = started + timedelta(seconds=SETTLED_S)
    throttle: dict[tuple[str, str], list[float]] = {}
    for line in after_usage.read_text(encoding="utf-8").splitlines():
        sample = json.loads(line)
        if sample["metric"] != "produce-throttle-time" or sample["value"] in ("NaN", None):
            continue
        if datetime.fromisoformat(sample["timestamp"].replace("Z", "+00:00")) < window:
            continue
        throttle.setdefault((sample["user"], sample["client_id"]), []).append(
            float(sample["value"])
        )
    measured = {
        group: statistics.median(values)
        for group, values in throttle.items()
        if values and max(values) > 0
    }
    was_throttled = {("ANONYMOUS", "an-sat")}  # level 1, saturated before and after
    newly = {group for group in measured if group not in was_throttled}
    assert newly == {("ANONYMOUS", "")}, measured
    error = change["predicted_throttle_ms"] / measured[("ANONYMOUS", "")] - 1
    print(
        f"impact: predicted steady throttle {change['predicted_throttle_ms']:.0f} ms (S "
        f"{change['request_bytes']:.0f} B; first throttle {change['first_throttle_ms']:.0f} ms; "
        f"p99 {change['p99']:.0f} B/s against {change['quota_after']:.0f} B/s, throughput after "
        f"{change['throughput_after']:.0f} B/s), measured median throttle-time "
        f"{measured[('ANONYMOUS', '')]:.0f} ms: error {error:+.0%}"
    )
