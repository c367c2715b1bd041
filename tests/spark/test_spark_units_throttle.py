"""The unit, throttle and user-tag conformance cases
(tests/conformance/units_throttle_cases.yaml) through the Spark engine: the
column expressions built from quotaform.kafka's tables
(quotaform.analytics.spark.columns) and the transforms that use them
(recommend, impact). tests/unit/test_units_throttle.py runs the same cases
through the Python engine."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import groupby
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from quotaform.analytics.configs import QuotaConfig
from quotaform.analytics.model import UTILISATION_COLUMNS
from quotaform.analytics.spark import columns, job, transforms
from quotaform.analytics.spark.schemas import UTILISATION_SCHEMA
from quotaform.kafka.entity import Entity
from quotaform.kafka.impact import STEADY_RULES, demand_cut, share_over
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import GROUP_CHANGES
from quotaform.kafka.throttle import java_round

from ..conformance.units_cases import ThrottleCase, load_units_throttle_cases

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

CASES = load_units_throttle_cases()


@pytest.fixture(autouse=True)
def interpreted(spark: SparkSession) -> Iterator[None]:
    """The formulas evaluated by Spark's interpreted expressions in this
    module (the same semantics as generated code, which Spark's own tests
    hold): each case is a row or two, and compiling the impact formulas'
    generated code took about 1 s a case here. Every analysis the CLI and
    the engine tests run still goes through generated code."""
    spark.conf.set("spark.sql.codegen.factoryMode", "NO_CODEGEN")
    spark.conf.set("spark.sql.codegen.wholeStage", "false")
    try:
        yield
    finally:
        spark.conf.unset("spark.sql.codegen.factoryMode")
        spark.conf.unset("spark.sql.codegen.wholeStage")


def _is_ip(key: str) -> bool:
    return "ip" in QUOTA_KEYS[key].entity_types


def test_readable_and_format_cases_as_columns(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(i, c.key, c.value) for i, c in enumerate(CASES.readable)],
        "i int, key string, value double",
    )
    readable = frame.withColumn("r", columns.readable_quota(F.col("key"), F.col("value")))
    rows = readable.select(
        "i", "r", columns.quota_text(F.col("key"), F.col("r")).alias("t")
    ).collect()
    got = {r["i"]: (r["r"], r["t"]) for r in rows}
    for i, case in enumerate(CASES.readable):
        assert got[i] == (case.readable, case.text), case.name

    frame = spark.createDataFrame(
        [(i, c.key, c.value) for i, c in enumerate(CASES.format)],
        "i int, key string, value double",
    )
    rows = frame.select("i", columns.quota_text(F.col("key"), F.col("value")).alias("t")).collect()
    got_text = {r["i"]: r["t"] for r in rows}
    for i, fcase in enumerate(CASES.format):
        assert got_text[i] == fcase.text, fcase.name


def test_throttle_cases_as_columns(spark: SparkSession) -> None:
    for window_s, cases in groupby(
        sorted(CASES.throttle, key=lambda c: c.window_s), key=lambda c: c.window_s
    ):
        batch = list(cases)
        frame = spark.createDataFrame(
            [(c.name, c.key, c.observed, c.quota) for c in batch],
            "name string, key string, observed double, quota double",
        )
        throttle = columns.throttle_time_ms(
            F.col("key"), F.col("observed"), F.col("quota"), window_s=window_s
        )
        got = {r["name"]: r["t"] for r in frame.select("name", throttle.alias("t")).collect()}
        for case in batch:
            assert got[case.name] == case.throttle_ms, case.name


def test_java_round_as_a_column(spark: SparkSession) -> None:
    values = [2.5, 3.5, -2.5, 0.49999999999999994, 2.4, 0.0, 1e15 + 0.5]
    frame = spark.createDataFrame([(v,) for v in values], "v double")
    got = [r["r"] for r in frame.select(columns.java_round(F.col("v")).alias("r")).collect()]
    assert got == [java_round(v) for v in values]


def test_user_tag_cases_as_columns(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(c.tag,) for c in CASES.user_tags], "tag string")
    decoded = frame.select("tag", columns.user_name(F.col("tag")).alias("user"))
    got = {r["tag"]: r["user"] for r in decoded.collect()}
    for case in CASES.user_tags:
        assert got[case.tag] == case.user, case


def test_group_change_table_as_a_column(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(*facts, outcome) for facts, outcome in GROUP_CHANGES.items()],
        "is_ip boolean, split boolean, unknown boolean, same boolean, want string",
    )
    change = columns.group_change(F.col("is_ip"), F.col("split"), F.col("unknown"), F.col("same"))
    for row in frame.select(change.alias("got"), "want").collect():
        assert row["got"] == row["want"]


def _util_row(**values: Any) -> tuple[Any, ...]:
    return tuple(values.get(c) for c in UTILISATION_COLUMNS)


def test_readable_cases_through_recommend(spark: SparkSession) -> None:
    util = spark.createDataFrame(
        [
            _util_row(
                cluster="c", broker="1", user="", client_id=f"app-{i}",
                ip="192.0.2.1" if _is_ip(c.key) else None, quota_key=c.key,
                p99=c.value, censored=False,
            )
            for i, c in enumerate(CASES.readable)
        ],
        UTILISATION_SCHEMA,
    )  # fmt: skip
    rows = transforms.recommend(util, headroom=1.0).collect()
    got = {r["client_id"]: (r["recommended"], r["recommended_text"]) for r in rows}
    for i, case in enumerate(CASES.readable):
        assert got[f"app-{i}"] == (case.readable, case.text), case.name


def _impact_case(number: int, case: ThrottleCase) -> tuple[tuple[Any, ...], QuotaConfig]:
    """A group unlimited before whose own entity sets ``case.quota`` after."""
    cluster = f"case-{number}"
    if _is_ip(case.key):
        entity, user, client, ip = Entity.of(ip="192.0.2.1"), "", "", "192.0.2.1"
    else:
        entity, user, client, ip = Entity.of(user="u", client_id="app"), "u", "app", None
    row = _util_row(
        cluster=cluster, broker="1", user=user, client_id=client, ip=ip, quota_key=case.key,
        p50=case.observed, p99=case.observed, censored=False,
    )  # fmt: skip
    assert case.quota is not None
    return row, QuotaConfig(cluster, {entity: {case.key: case.quota}}, case.name)


def test_throttle_cases_through_impact(spark: SparkSession) -> None:
    numbered = [(n, c) for n, c in enumerate(CASES.throttle) if c.quota]
    for window_s, cases in groupby(
        sorted(numbered, key=lambda nc: nc[1].window_s), key=lambda nc: nc[1].window_s
    ):
        built = [(n, c, *_impact_case(n, c)) for n, c in cases]
        util = spark.createDataFrame([b[2] for b in built], UTILISATION_SCHEMA)
        after = job.config_frame(spark, [b[3] for b in built])
        rows = transforms.impact(util, after=after, window_s=window_s).collect()
        got = {r["cluster"]: r for r in rows}
        for n, case, _, _ in built:
            row = got[f"case-{n}"]
            if not STEADY_RULES[case.key].token_bucket:  # the bucket's first throttle is S / T
                assert row["first_throttle_ms"] == case.throttle_ms, case.name
            assert row["newly_throttled"] is (case.observed > case.quota), case.name


def test_steady_cases_as_columns(spark: SparkSession) -> None:
    # request_size reads `given` per key: one case at a time.
    selects = []
    for number, case in enumerate(CASES.steady):
        frame = spark.createDataFrame(
            [(number, case.key, case.observed, case.quota, case.typical)],
            "case int, key string, observed double, quota double, typical double",
        )
        key, observed, quota = F.col("key"), F.col("observed"), F.col("quota")
        typical = None if case.typical is None else F.col("typical")
        given = {case.key: case.request_bytes} if case.request_bytes is not None else {}
        window_s = case.window_s
        size, source = columns.request_size(key, quota, given=given, window_s=window_s)
        # The size once, as a column: the figures below read it (each would
        # otherwise carry the whole size expression again).
        sized = frame.select("*", size.alias("size"), source.alias("source"))
        size = F.col("size")
        selects.append(
            sized.select(
                "case",
                "size",
                "source",
                columns.throughput_after(
                    key, observed, quota, size, window_s=window_s, typical=typical
                ).alias("throughput"),
                columns.demand_cut(observed, quota).alias("cut"),
                columns.steady_throttle_ms(key, observed, quota, size, window_s=window_s).alias(
                    "steady"
                ),
                columns.first_throttle_ms(key, observed, quota, size, window_s=window_s).alias(
                    "first"
                ),
            )
        )
    rows = {r["case"]: r for select in selects for r in select.collect()}
    assert sorted(rows) == list(range(len(CASES.steady)))
    for number, case in enumerate(CASES.steady):
        row = rows[number]
        assert (row["size"], row["source"], row["throughput"]) == (
            case.size,
            case.source,
            case.throughput,
        ), case.name
        assert (row["steady"], row["first"]) == (case.throttle_ms, case.first_ms), case.name
        assert row["cut"] == demand_cut(case.observed, case.quota), case.name


def test_share_over_as_a_column(spark: SparkSession) -> None:
    quantiles = [(10.0, 20.0, 30.0, 40.0), (1.0, 1.0, 1.0, 1.0), (None, 2.0, 3.0, 4.0)]
    values = [0.5, 1.0, 5.0, 10.0, 15.0, 20.0, 29.0, 35.0, 40.0, 50.0]
    frame = spark.createDataFrame(
        [(v, *q) for v in values for q in quantiles],
        "v double, p50 double, p95 double, p99 double, mx double",
    )
    points = [(0.5, F.col("p50")), (0.95, F.col("p95")), (0.99, F.col("p99")), (1.0, F.col("mx"))]
    for row in frame.select("*", columns.share_over(F.col("v"), points).alias("s")).collect():
        want = share_over(
            row["v"],
            ((0.5, row["p50"]), (0.95, row["p95"]), (0.99, row["p99"]), (1.0, row["mx"])),
        )
        assert row["s"] == want, row
