"""The fleet analytics without Spark: the usage inputs (every format, bad
rows counted and named), the shared numeric rules, and the Python engine's
utilisation, impact and recommend."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import jsonschema
import pytest

from quotaform.analytics import engine
from quotaform.analytics.configs import QuotaConfig, read_snapshot, snapshot_lines
from quotaform.analytics.model import (
    UsageRow,
    percentile,
    predicted_throttle_ms,
    readable_quota,
)
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import read_usage
from quotaform.analytics.usage import LabelMap, check_row
from quotaform.errors import AnalyticsError
from quotaform.formats.schemas import SCHEMAS
from quotaform.kafka.entity import Entity
from quotaform.kafka.resolution import MetricTags, QuotaIndex, quota_for_tags
from quotaform.manifest import load_manifests

from ..conformance.cases import load_cases

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
KiB, MiB = 1024, 1024 * 1024
T0 = datetime(2026, 11, 23, 10, tzinfo=UTC)


def row(
    metric: str,
    user: str,
    client: str,
    value: float,
    *,
    broker: str = "1",
    ip: str | None = None,
    i: int = 0,
) -> UsageRow:
    return UsageRow("c", broker, T0 + timedelta(seconds=10 * i), metric, user, client, ip, value)


# ----------------------------------------------------------------- rules


def test_percentile_is_exact_with_linear_interpolation() -> None:
    values = [10.0, 20.0, 30.0, 40.0]
    assert percentile(values, 0.5) == 25.0
    assert percentile(values, 0.99) == pytest.approx(39.7)
    assert percentile([5.0], 0.99) == 5.0
    with pytest.raises(ValueError):
        percentile([], 0.5)


def test_predicted_throttle_follows_the_brokers_formula_and_caps() -> None:
    # round((O - T) / T * W), W = 11 s; half up like Java's Math.round.
    assert predicted_throttle_ms("producer_byte_rate", 1.5 * MiB, 1 * MiB) == 5500.0
    assert predicted_throttle_ms("producer_byte_rate", 0.9 * MiB, 1 * MiB) == 0.0
    assert predicted_throttle_ms("producer_byte_rate", 2 * MiB, None) == 0.0
    assert predicted_throttle_ms("request_percentage", 200.0, 50.0) == 1000.0  # capped
    assert predicted_throttle_ms("connection_creation_rate", 30.0, 10.0) == 1000.0
    assert predicted_throttle_ms("producer_byte_rate", 1.5 * MiB, 1 * MiB, window_s=10) == 5000.0


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("producer_byte_rate", 1.3 * MiB, 1.5 * MiB),
        ("producer_byte_rate", 1.0 * MiB, 1.0 * MiB),
        ("producer_byte_rate", 12.2 * MiB, 13 * MiB),
        ("producer_byte_rate", 700.0, 700.0),
        ("producer_byte_rate", 1500.0, 1536.0),
        ("request_percentage", 12.1, 13.0),
        ("controller_mutation_rate", 2.01, 2.1),
        ("connection_creation_rate", 0.2, 1.0),
    ],
)
def test_readable_quota_rounds_up_to_what_people_write(
    key: str, value: float, expected: float
) -> None:
    assert readable_quota(key, value) == expected
    assert readable_quota(key, value) >= value


def test_quota_for_tags_matches_every_conformance_case() -> None:
    # Step 2 alone, from the tags the broker set: what an observed series is held to.
    for case in load_cases():
        index = QuotaIndex(case.entries)
        for key, expect in case.expect.items():
            if not expect["recorded"]:
                continue
            tags = expect["tags"]
            got = quota_for_tags(
                index,
                MetricTags(
                    user=tags.get("user", ""),
                    client_id=tags.get("client-id", ""),
                    ip=tags.get("ip", ""),
                ),
                key,
            )
            assert got.value == expect["value"], (case.name, key)
            assert (got.level.number if got.level else None) == expect["level"], (case.name, key)


# ----------------------------------------------------------------- inputs


def test_a_good_row_and_every_reason_a_row_is_refused() -> None:
    good = dict(
        cluster="c",
        broker="1",
        timestamp="2026-11-23T10:00:00Z",
        metric="produce-byte-rate",
        user="alice",
        client_id="app",
        ip="",
        value="NaN",
    )
    checked = check_row(good)
    assert isinstance(checked, UsageRow) and math.isnan(checked.value) and checked.ip is None
    for patch, reason in [
        ({"cluster": ""}, "cluster: missing or empty"),
        ({"metric": "bytes-in"}, "metric: bytes-in is not a usage metric"),
        ({"timestamp": "2026-11-23"}, "timestamp:"),
        ({"timestamp": "2026-11-23T10:00Z"}, "timestamp:"),  # seconds required (both engines)
        ({"value": "fast"}, "value:"),
        ({"ip": "192.0.2.1"}, "ip: only connection metrics carry an ip"),
        ({"metric": "connection-accept-rate"}, "ip: connection-accept-rate needs the ip tag"),
    ]:
        result = check_row({**good, **patch})
        assert isinstance(result, str) and result.startswith(reason), (patch, result)


def test_every_usage_format_reads_the_same_samples() -> None:
    csv_rows, csv_rejected = read_usage([FIXTURES / "usage.csv"])
    jsonl_rows, jsonl_rejected = read_usage([FIXTURES / "usage.jsonl"])
    key = lambda r: (r.broker, r.timestamp, r.metric, r.user, r.client_id, r.ip)  # noqa: E731
    assert len(csv_rows) == len(jsonl_rows) == 108
    for a, b in zip(sorted(csv_rows, key=key), sorted(jsonl_rows, key=key), strict=True):
        assert key(a) == key(b) and (
            a.value == b.value or (math.isnan(a.value) and math.isnan(b.value))
        )
    assert (csv_rejected.count, jsonl_rejected.count) == (2, 0)
    assert csv_rejected.examples == [
        f"{FIXTURES / 'usage.csv'}:110: timestamp: 'yesterday' is not an ISO-8601 time",
        f"{FIXTURES / 'usage.csv'}:111: metric: bytes-in is not a usage metric",
    ]


def test_prometheus_exports_in_both_naming_conventions() -> None:
    rows, rejected = read_usage([FIXTURES / "prometheus.json"])
    series = {(r.metric, r.user, r.client_id, r.broker) for r in rows}
    assert series == {
        ("produce-byte-rate", "alice", "ingest", "b1:9999"),  # kafka_server_produce_byte_rate
        (
            "fetch-byte-rate",
            "alice",
            "reporting",
            "b1:9999",
        ),  # kafka_server_quota_byte_rate{resource=Fetch}
        ("produce-throttle-time", "bob", "", "b1:9999"),  # kafka_server_quota_throttle_time
    }
    assert dict(rejected.skipped) == {"not a quota usage metric: kafka_server_quota_tokens": 1}
    nans = [r for r in rows if r.metric == "produce-throttle-time"]
    assert nans and all(math.isnan(r.value) for r in nans)


def test_prometheus_labels_map_to_cluster_and_broker(tmp_path: Path) -> None:
    doc = {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {
                    "metric": {
                        "__name__": "kafka_server_fetch_byte_rate",
                        "user": "u",
                        "pod": "kafka-0",
                        "client_id": '"app:1,x\\*y"',
                    },
                    "values": [[1795428000, "5"], [1795428015, "+Inf"]],
                }
            ],
        },
    }  # fmt: skip
    path = tmp_path / "q.json"
    path.write_text(json.dumps(doc), encoding="utf-8")
    rows, _ = read_usage(
        [path], options=ReadOptions(labels=LabelMap(broker="pod", default_cluster="prod"))
    )
    assert {(r.cluster, r.broker, r.client_id) for r in rows} == {("prod", "kafka-0", "app:1,x*y")}
    rows, rejected = read_usage([path], options=ReadOptions(labels=LabelMap(broker="pod")))
    assert rows == [] and rejected.by_reason == {"cluster": 2}


def test_jmxtool_csv_with_a_quoted_client_id() -> None:
    with pytest.raises(AnalyticsError, match="give --default-cluster NAME and --broker ID"):
        read_usage([FIXTURES / "jmxtool.csv"])
    rows, rejected = read_usage(
        [FIXTURES / "jmxtool.csv"], options=ReadOptions(cluster="prod-eu", broker="1")
    )
    assert {(r.metric, r.user, r.client_id) for r in rows} == {
        ("produce-byte-rate", "alice", "in:gest*"),
        ("produce-throttle-time", "alice", "in:gest*"),
    }
    assert len(rows) == 10 and rejected.count == 0
    assert dict(rejected.skipped) == {"not a quota usage metric: Produce:queue-size": 1}


def test_a_csv_without_a_column_is_refused_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "u.csv"
    path.write_text("cluster,broker,timestamp,metric,value\n", encoding="utf-8")
    with pytest.raises(
        AnalyticsError, match=r"u.csv:1: header: missing column\(s\) user, client_id, ip"
    ):
        read_usage([path], fmt="generic")


def test_snapshots_round_trip_and_bad_lines_are_named(tmp_path: Path) -> None:
    (config,) = read_snapshot(FIXTURES / "snapshot.jsonl")
    assert config.cluster == "prod-eu" and len(config.entries) == 6
    again = tmp_path / "s.jsonl"
    again.write_text(
        "\n".join(snapshot_lines("prod-eu", "x", config.entries)) + "\n", encoding="utf-8"
    )
    assert read_snapshot(again)[0].entries == config.entries
    schema = SCHEMAS["snapshot.schema.json"]()
    for line in again.read_text(encoding="utf-8").splitlines():
        jsonschema.validate(json.loads(line), schema)
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"format_version": 1, "cluster": "c", "entity": {"user": "a"}, "quotas": {"x": 1}}\n'
    )
    with pytest.raises(AnalyticsError, match=r"bad.jsonl:1: quotas.x: not a quota key"):
        read_snapshot(bad)


# ----------------------------------------------------------------- the Python engine


def _config() -> QuotaConfig:
    desired = load_manifests([FIXTURES / "manifest.yaml"])
    return QuotaConfig(desired.cluster, desired.quotas, "fixture")


def test_utilisation_resolves_each_group_from_its_tags() -> None:
    rows, _ = read_usage([FIXTURES / "usage.csv"])
    util = engine.utilisation(rows, {"prod-eu": _config().index})
    by = {(r["user"], r["client_id"], r["ip"], r["quota_key"]): r for r in util}
    saturated = by[("alice", "ingest", None, "producer_byte_rate")]
    assert (saturated["level"], saturated["quota_value"], saturated["censored"]) == (1, MiB, True)
    assert saturated["utilisation_p99"] == pytest.approx(1.02)
    assert saturated["entity"] == '{"user":"alice","client-id":"ingest"}'
    # (alice, reporting) is held by {user=alice, client-id=<default>}: level 2.
    assert by[("alice", "reporting", None, "consumer_byte_rate")]["level"] == 2
    # A URL-encoded user tag is decoded before resolution: CN=carol gets the user default.
    carol = by[("CN%3Dcarol", "", None, "producer_byte_rate")]
    assert (carol["level"], carol["quota_value"]) == (6, 512 * KiB)
    ip = by[("", "", "192.0.2.10", "connection_creation_rate")]
    assert (ip["level"], ip["quota_value"]) == (1, 10.0)
    # throttled_share counts samples > 0 among all throttle samples (NaN is not > 0).
    assert by[("bob", "", None, "producer_byte_rate")]["throttled_share"] == 0.0


def test_impact_splits_merges_and_predicts_throttling() -> None:
    before = QuotaIndex(
        {
            Entity.of(client_id=None): {"producer_byte_rate": 1 * MiB},
            Entity.of(user="u"): {"consumer_byte_rate": 1 * MiB},
            Entity.of(user="v", client_id="a"): {"request_percentage": 50.0},
            Entity.of(user="v", client_id="b"): {"request_percentage": 50.0},
        }
    )
    after = QuotaIndex(
        {
            Entity.of(client_id=None): {"producer_byte_rate": 1 * MiB},
            Entity.of(user=None): {"producer_byte_rate": 256 * KiB},  # (c) -> one group per user
            Entity.of(user="u"): {"consumer_byte_rate": 1 * MiB},
            Entity.of(user="u", client_id=None): {
                "consumer_byte_rate": 2 * MiB
            },  # splits (u) by client id
            Entity.of(user="v"): {"request_percentage": 50.0},  # (v,a) and (v,b) merge into (v)
        }
    )
    usage = [
        *[row("produce-byte-rate", "", "app", 512 * KiB, i=i) for i in range(5)],
        *[row("fetch-byte-rate", "u", "", 512 * KiB, i=i) for i in range(5)],
        *[row("request-time", "v", "a", 30.0, i=i) for i in range(5)],
        *[row("request-time", "v", "b", 30.0, i=i) for i in range(5)],
    ]
    util = engine.utilisation(usage, {"c": before})
    changes = {
        (r["user"], r["client_id"], r["quota_key"]): r for r in engine.impact(util, {"c": after})
    }
    # One group per client id today; {user=<default>} makes it one per user: it splits.
    moved = changes[("", "app", "producer_byte_rate")]
    assert (moved["group_change"], moved["tags_after"], moved["quota_after"]) == (
        "splits",
        "user=*",
        256 * KiB,
    )
    split = changes[("u", "", "consumer_byte_rate")]
    assert (split["group_change"], split["tags_after"]) == ("splits", "user=u,client-id=*")
    merged_a = changes[("v", "a", "request_percentage")]
    assert (merged_a["group_change"], merged_a["tags_after"]) == ("merges", "user=v")
    # Merged: the p99s of both groups join one bucket: 60% against 50%.
    assert merged_a["first_throttle_ms"] == predicted_throttle_ms("request_percentage", 60.0, 50.0)
    # The steady state: 1 ms of thread time (0.1 % x s) per request held S / T.
    assert merged_a["predicted_throttle_ms"] == round(0.1 / 50.0 * 1000)
    assert merged_a["throughput_after"] == 50.0
    assert merged_a["demand_cut"] == pytest.approx(1 / 6)
    assert merged_a["newly_throttled"] is True
    first = engine.impact(util, {"c": after})[0]
    assert first["newly_throttled"]  # ranked first


def test_recommend_sizes_from_usage_and_never_below_a_censored_quota() -> None:
    def group(broker: str, user: str, client: str, key: str, p99: float, censored: bool,
              brokers: int, cluster_p99: float) -> dict:  # fmt: skip
        return dict(cluster="c", broker=broker, user=user, client_id=client, ip=None,
                    quota_key=key, quota_value=1.0 * MiB, p99=p99, censored=censored,
                    brokers_observed=brokers, cluster_p99=cluster_p99)  # fmt: skip

    util = [
        group("1", "u", "", "producer_byte_rate", 0.5 * MiB, False, 2, 1.25 * MiB),
        group("2", "u", "", "producer_byte_rate", 0.8 * MiB, False, 2, 1.25 * MiB),
        group("1", "", "hot", "consumer_byte_rate", 1.01 * MiB, True, 1, 1.01 * MiB),
    ]
    recs = {r["user"] or r["client_id"]: r for r in engine.recommend(util)}
    # The busiest broker's p99 0.8 MiB x 1.2 = 983.04 KiB, up to whole KiB.
    assert recs["u"]["recommended"] == 984 * KiB
    assert recs["u"]["recommended_text"] == "984KiB"
    assert recs["u"]["entity"] == '{"user":"u"}'
    # A per-broker quota: on the 2 brokers u reaches it may use twice as much.
    assert (recs["u"]["brokers_observed"], recs["u"]["cluster_p99"]) == (2, 1.25 * MiB)
    assert recs["u"]["cluster_ceiling"] == 2 * MiB
    assert recs["u"]["recommended_cluster_ceiling"] == 2 * 984 * KiB
    assert recs["hot"]["recommended"] >= 1.2 * MiB and recs["hot"]["censored"]
    assert "true demand is unknown" in recs["hot"]["note"]
    assert recs["hot"]["entity"] == '{"client-id":"hot"}'
