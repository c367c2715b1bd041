"""The fleet analytics on a Spark standalone cluster: time against rows, and
the driver's memory, as the usage grows.

    .venv/bin/python benchmarks/analytics_cluster.py --rows 10000000 30000000 100000000 \
        --workers 2 --out benchmarks/results/analytics_cluster.json

A master and ``--workers`` workers (1 core each) are started from the pip
``pyspark`` package on 127.0.0.1 (:func:`quotaform.sandbox.spark.start_cluster`).
The usage is a directory of Parquet files of 10M generated rows each
(``benchmarks/analytics.py``'s table: 100,000 quota groups, 3 clusters x 3
brokers), read as a ``file://`` URI; each run is ``quotaform analyze
utilisation --master spark://... --usage file://... --out file://...`` in a
fresh process, timed from process start to the written table and reports.
``driver_peak_rss_mib`` is the largest RSS of the quotaform process and its
children (the driver's JVM) sampled every 0.5 s; the executors run under the
workers and are reported apart (``executors_peak_rss_mib``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))
from analytics import snapshot, usage_table  # the benchmark's own table

from quotaform.sandbox.spark import start_cluster, stop_spark

CHUNK = 10_000_000


def usage_dir(rows: int, root: Path) -> Path:
    """``rows`` usage rows as Parquet files of at most :data:`CHUNK` rows
    (reused between runs and sizes: file ``i`` is always generated with seed
    ``i``, once, under ``root/chunks``, and hard-linked into each size's
    directory)."""
    chunks = root / "chunks"
    chunks.mkdir(parents=True, exist_ok=True)
    where = root / f"usage-{rows}"
    where.mkdir(exist_ok=True)
    done = 0
    for number in range((rows + CHUNK - 1) // CHUNK):
        size = min(CHUNK, rows - done)
        name = f"part-{number:03d}-{size}.parquet"
        if not (chunks / name).exists():
            usage_table(size, chunks / f"{name}.tmp", seed=number)
            (chunks / f"{name}.tmp").rename(chunks / name)
        if not (where / name).exists():
            os.link(chunks / name, where / name)
        done += size
    return where


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in (proc, *proc.children(recursive=True)):
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


def run(master: str, usage: Path, snap: Path, out: Path, workers: list[int]) -> dict[str, float]:
    """One ``analyze utilisation`` on the cluster, in a fresh process."""
    cmd = [
        sys.executable, "-m", "quotaform", "analyze", "utilisation", "--snapshot", str(snap),
        "--usage", f"file://{usage}", "--out", f"file://{out}", "--engine", "spark",
        "--master", master,
    ]  # fmt: skip
    env = {**os.environ, "SPARK_LOCAL_IP": "127.0.0.1", "PYSPARK_PYTHON": sys.executable}
    start = time.perf_counter()
    proc = psutil.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    driver = executors = 0
    while proc.poll() is None:
        driver = max(driver, _tree_rss(proc))
        executor_rss = 0
        for pgid in workers:
            with contextlib.suppress(psutil.Error):
                executor_rss += sum(_tree_rss(c) for c in psutil.Process(pgid).children())
        executors = max(executors, executor_rss)
        time.sleep(0.5)
    wall = time.perf_counter() - start
    _stdout, stderr = proc.communicate()
    if proc.returncode != 0:
        raise SystemExit(f"cluster run failed:\n{stderr[-3000:]}")
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    return {
        "load_average_1m_at_end": round(os.getloadavg()[0], 2),
        "seconds": round(wall, 1),
        "driver_peak_rss_mib": round(driver / 2**20),
        "executors_peak_rss_mib": round(executors / 2**20),
        "usage_rows": summary["usage_rows"],
        "groups": summary["rows"],
        "rows_per_s": round(summary["usage_rows"] / wall),
    }


def main() -> None:
    """Parse the sizes, start the cluster, run each size, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[10_000_000, 30_000_000])
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--worker-memory", default="2g")
    parser.add_argument("--data", type=Path, default=Path("benchmarks/.data"))
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    args.data = args.data.resolve()  # file:// URIs need absolute paths
    snap = args.data / "snapshot.jsonl"
    args.data.mkdir(parents=True, exist_ok=True)
    snapshot(snap)
    cluster = start_cluster(
        "bench-analytics", workers=args.workers, cores=1, memory=args.worker_memory
    )
    results = []
    try:
        for rows in args.rows:
            usage = usage_dir(rows, args.data)
            out = args.data / f"out-{rows}"
            figures = run(cluster.master_url, usage, snap, out, list(cluster.pgids[1:]))
            results.append({"rows": rows, **figures})
            print(json.dumps(results[-1]), flush=True)
    finally:
        stop_spark(cluster.name)
    report = {
        "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
        "workers": args.workers,
        "worker_cores": 1,
        "worker_memory": args.worker_memory,
        "results": results,
    }
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
