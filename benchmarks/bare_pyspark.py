"""The floor for ``analyze --engine spark``: a bare PySpark job over the same
usage Parquet, with no checks, no configuration and no resolution.

    .venv/bin/python benchmarks/bare_pyspark.py USAGE.parquet OUT_DIR [--master local[2]]

Reads the usage table, and per (cluster, broker, metric, user, client_id, ip)
computes the count of non-NaN values, their max and ``percentile_approx``
p50/p95/p99; writes the result as Parquet to ``OUT_DIR/groups.parquet`` and a
``summary.json`` (``usage_rows``, ``rows``: the groups) the benchmark reads.

``--exact``: the same figures with exact quantiles (each group's values
brought together and sorted, the nearest rank taken), the floor of a job
whose quantiles must equal the local engine's to the bit: where
``percentile_approx`` reduces each partition's values to a small sketch
before the shuffle, exact quantiles shuffle every value.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("usage", type=Path)
    parser.add_argument("out", type=Path)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument(
        "--exact", action="store_true", help="exact quantiles (every value shuffled)"
    )
    args = parser.parse_args(argv)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    start = time.perf_counter()
    import pyarrow.parquet as pq
    from pyspark.sql import SparkSession
    from pyspark.sql import functions as F

    spark = (
        SparkSession.builder.master(args.master)
        .appName("bare-pyspark-usage")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "8")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    started = time.perf_counter() - start
    usage = spark.read.parquet(str(args.usage)).where(~F.isnan("value"))
    keys = ("cluster", "broker", "metric", "user", "client_id", "ip")
    if args.exact:
        values = usage.groupBy(*keys).agg(F.sort_array(F.collect_list("value")).alias("v"))
        n = F.size("v")
        groups = values.select(
            *keys,
            n.alias("samples"),
            F.element_at("v", -1).alias("max"),
            F.array(
                *[
                    F.element_at("v", F.greatest(F.ceil(n * p).cast("int"), F.lit(1)))
                    for p in (0.5, 0.95, 0.99)
                ]
            ).alias("quantiles"),
        )
    else:
        groups = usage.groupBy(*keys).agg(
            F.count("value").alias("samples"),
            F.max("value").alias("max"),
            F.percentile_approx("value", [0.5, 0.95, 0.99]).alias("quantiles"),
        )
    args.out.mkdir(parents=True, exist_ok=True)
    table = args.out / "groups.parquet"
    groups.write.mode("overwrite").parquet(str(table))
    computed = time.perf_counter() - start - started
    spark.stop()
    rows = sum(pq.ParquetFile(p).metadata.num_rows for p in table.glob("*.parquet"))
    summary = {
        "usage_rows": pq.ParquetFile(args.usage).metadata.num_rows,
        "rows": rows,
        "seconds": {"spark_start": round(started, 3), "compute_and_write": round(computed, 3)},
    }
    (args.out / "summary.json").write_text(json.dumps(summary), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
