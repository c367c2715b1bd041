"""The fleet analytics at scale: usage rows per second, end to end.

    .venv/bin/python benchmarks/analytics.py --rows 1000000 10000000 --engine spark \
        --out benchmarks/results/analytics_spark.json
    .venv/bin/python benchmarks/analytics.py --rows 300000 1000000 10000000 \
        --engine python spark pyspark --repeat 2 --out benchmarks/results/analytics_local.json

For each size N: a synthetic usage table of N rows (Parquet; 100,000 quota
groups over 3 clusters x 3 brokers, produce/fetch byte rates and throttle
times every 60 s) and a configuration of about 10,000 entities over every
level. Each run is ``quotaform analyze utilisation ... --engine E`` in a
fresh process (``local[2]`` for Spark), timed end to end from process start
to the written table and reports, SparkSession start included; peak memory
is the largest sum of RSS over the process and its children (the JVM),
sampled every 0.2 s. ``pyspark`` is the bare PySpark job of
``benchmarks/bare_pyspark.py`` (same Parquet, per-group count / max /
``percentile_approx``, written as Parquet) on ``local[2]``: the floor of a
Spark job; ``pyspark-exact`` the same job with exact quantiles (every value
shuffled, as quotaform's must be to equal the local engine), the floor of an
exact answer. ``--repeat`` runs each configuration that many times; every run
records the load average before it (other work on the machine).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import psutil
import pyarrow as pa
import pyarrow.parquet as pq

GROUPS = 100_000
CLUSTERS = ("eu", "us", "ap")
BROKERS = ("1", "2", "3")


def usage_table(rows: int, out: Path, seed: int = 7) -> None:
    """N usage rows as Parquet, vectorised (numpy)."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, GROUPS, rows)
    metric_kind = rng.integers(0, 4, rows)
    metrics = np.array(
        ["produce-byte-rate", "fetch-byte-rate", "produce-throttle-time", "fetch-throttle-time"]
    )[metric_kind]
    user = np.char.add("user-", (group % 20_000).astype(str))
    client = np.char.add("client-", (group // 20_000 * 7 + group % 7).astype(str))
    client = np.where(group % 5 == 0, "", client)  # a fifth of the groups are per-user
    cluster = np.array(CLUSTERS)[group % 3]
    broker = np.array(BROKERS)[rng.integers(0, 3, rows)]
    base = np.datetime64("2026-11-23T00:00:00")
    ts = base + (rng.integers(0, 24 * 60, rows) * 60).astype("timedelta64[s]")
    value = np.where(
        metric_kind < 2,
        rng.gamma(2.0, 300_000.0, rows),
        np.where(rng.random(rows) < 0.7, np.nan, rng.random(rows) * 500),
    )
    table = pa.table(
        {
            "cluster": cluster,
            "broker": broker,
            "timestamp": pa.array(ts.astype("datetime64[us]"), pa.timestamp("us", tz="UTC")),
            "metric": metrics,
            "user": user,
            "client_id": client,
            "ip": pa.nulls(rows, pa.string()),
            "value": value,
        }
    )
    pq.write_table(table, out, row_group_size=1_000_000)


def snapshot(out: Path) -> None:
    """About 10,000 entities over every level, per cluster."""
    lines = []
    for cluster in CLUSTERS:
        entries: list[tuple[dict, dict]] = [
            ({"user": None}, {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0}),
            ({"user": None, "client-id": None}, {"request_percentage": 50.0}),
            ({"client-id": None}, {"controller_mutation_rate": 5.0}),
        ]
        for i in range(0, 20_000, 12):
            entries.append(({"user": f"user-{i}"}, {"producer_byte_rate": 524288.0}))
        for i in range(0, 20_000, 40):
            entries.append(
                ({"user": f"user-{i}", "client-id": None}, {"consumer_byte_rate": 1048576.0})
            )
            entries.append(
                (
                    {"user": f"user-{i}", "client-id": f"client-{i % 100}"},
                    {"producer_byte_rate": 262144.0},
                )
            )
        for c in range(0, 100, 3):
            entries.append(
                ({"user": None, "client-id": f"client-{c}"}, {"consumer_byte_rate": 3145728.0})
            )
            entries.append(({"client-id": f"client-{c}"}, {"request_percentage": 25.0}))
        for entity, quotas in entries:
            line = {
                "format_version": 1,
                "cluster": cluster,
                "cluster_id": None,
                "taken_at": "2026-11-23T00:00:00Z",
                "entity": entity,
                "quotas": quotas,
            }
            lines.append(json.dumps(line))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


def run(engine: str, usage: Path, snap: Path, out: Path) -> dict[str, float]:
    """One end-to-end ``analyze utilisation`` (or the bare PySpark job) in a
    fresh process."""
    if engine in ("pyspark", "pyspark-exact"):
        script = Path(__file__).resolve().with_name("bare_pyspark.py")
        cmd = [sys.executable, str(script), str(usage), str(out), "--master", "local[2]"]
        if engine == "pyspark-exact":
            cmd.append("--exact")
    else:
        cmd = [
            sys.executable, "-m", "quotaform", "analyze", "utilisation", "--snapshot", str(snap),
            "--usage", str(usage), "--out", str(out), "--engine", engine, "--master", "local[2]",
        ]  # fmt: skip
    if engine == "python":
        cmd = cmd[:-2]
    load = os.getloadavg()[0]
    start = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while proc.poll() is None:
        try:
            procs = [proc, *proc.children(recursive=True)]
            peak = max(peak, sum(p.memory_info().rss for p in procs if p.is_running()))
        except psutil.Error:
            pass
        time.sleep(0.2)
    wall = time.perf_counter() - start
    _stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"{engine} failed:\n{stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {
        "seconds": round(wall, 2),
        "peak_rss_mib": round(peak / 2**20),
        "rows_per_s": round(summary["usage_rows"] / wall),
        "groups": summary["rows"],
        "stages": summary["seconds"],
        "load_before": round(load, 2),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000])
    parser.add_argument(
        "--engine",
        nargs="+",
        default=["spark"],
        choices=["spark", "python", "pyspark", "pyspark-exact"],
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of each configuration")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    results = []
    with tempfile.TemporaryDirectory(prefix="quotaform-bench-") as scratch:
        work = Path(scratch)
        snap = work / "snapshot.jsonl"
        snapshot(snap)
        for rows in args.rows:
            usage = work / f"usage-{rows}.parquet"
            start = time.perf_counter()
            usage_table(rows, usage)
            made = time.perf_counter() - start
            for attempt in range(1, args.repeat + 1):
                for engine in args.engine:
                    measured = run(engine, usage, snap, work / f"out-{engine}-{rows}")
                    entry = {
                        "rows": rows,
                        "engine": engine,
                        "run": attempt,
                        "input_mib": round(usage.stat().st_size / 2**20, 1),
                        "generate_s": round(made, 1),
                        **measured,
                    }
                    print(json.dumps(entry), flush=True)
                    results.append(entry)
            usage.unlink()
    document = {
        "machine": f"{platform.machine()}, {psutil.cpu_count()} cores, "
        f"CPython {platform.python_version()}",
        "results": results,
    }
    if args.out:
        args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
