"""The local engine (Arrow, no JVM) equals the row-by-row Python reading and
engine it replaced: the same usable rows, the same rejected rows (counts by
reason, the first named in the same words), and the same utilisation,
impact and recommend rows, value for value, on every usage format."""

from __future__ import annotations

import csv
import json
import math
import random
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from quotaform.analytics import engine
from quotaform.analytics.configs import QuotaConfig, by_cluster, read_snapshot
from quotaform.analytics.jobs import (
    AUTO_SPARK_BYTES,
    AnalyzeRequest,
    Command,
    Engine,
    choose_engine,
    run_analysis,
)
from quotaform.analytics.local import aggregate, reader
from quotaform.analytics.local.checks import METRIC_CODES
from quotaform.analytics.local.reader import CodedUsage, read_coded_usage
from quotaform.analytics.model import USAGE_COLUMNS, UsageRow
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import read_usage
from quotaform.analytics.usage import Rejections, one_per_series_time
from quotaform.errors import AnalyticsError
from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.metrics import sanitize_user
from quotaform.kafka.resolution import QuotaIndex

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
T0 = datetime(2026, 11, 23, 10, tzinfo=UTC)
USERS = ["alice", "bob", "CN=carol,O=x", "d ave*"]
CLIENTS = ["app", "batch", "web"]
IPS = ["192.0.2.10", "192.0.2.11", "2001:db8::10"]
CLIENT_KEYS = [k for k, s in QUOTA_KEYS.items() if "user" in s.entity_types]


# ----------------------------------------------------------------- the oracle: the old path


def old_read(
    paths: Sequence[Path],
    clusters: Sequence[str],
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    **options: Any,
) -> tuple[list[UsageRow], Rejections]:
    """What ``analyze --engine python`` read before the local engine:
    ``read_usage``, the time range, then rows of unconfigured clusters refused."""
    rows, rejected = read_usage(paths, options=ReadOptions(**options))
    rows = [
        r
        for r in rows
        if (since is None or r.timestamp >= since) and (until is None or r.timestamp < until)
    ]
    kept = []
    for r in rows:
        if r.cluster in clusters:
            kept.append(r)
        else:
            rejected.reject(
                f"cluster {r.cluster}",
                f"cluster: no quota configuration for cluster {r.cluster!r} "
                f"(configured: {', '.join(sorted(clusters))})",
            )
    unique = one_per_series_time(kept)
    rejected.duplicates += len(kept) - len(unique)
    return unique, rejected


def decoded(usage: CodedUsage) -> list[tuple[Any, ...]]:
    parts = usage.series(usage.key)
    columns = [parts[c].to_pylist() for c in ("cluster", "broker", "user", "client_id", "ip")]
    metrics = [METRIC_CODES[m] for m in parts["metric"].tolist()]
    times = pa.array(usage.timestamp, pa.timestamp("us", "UTC")).to_pylist()
    out = []
    for cluster, broker, user, client_id, ip, metric, when, value in zip(
        *columns, metrics, times, usage.value.tolist(), strict=True
    ):
        out.append((cluster, broker, _t(when), metric, user, client_id, ip or None, _v(value)))
    return sorted(out, key=repr)


def _t(when: datetime) -> str:
    return when.astimezone(UTC).isoformat()


def _v(value: float) -> float | str:
    return "NaN" if math.isnan(value) else value


def as_tuples(rows: Sequence[UsageRow]) -> list[tuple[Any, ...]]:
    return sorted(
        (
            (r.cluster, r.broker, _t(r.timestamp), r.metric, r.user, r.client_id, r.ip, _v(r.value))
            for r in rows
        ),
        key=repr,
    )


def assert_same_reading(
    paths: Sequence[Path], clusters: Sequence[str], **options: Any
) -> CodedUsage:
    rows, old = old_read(paths, clusters, **options)
    read = {k: options.pop(k) for k in ("since", "until") if k in options}
    usage, new = read_coded_usage(
        paths, clusters=clusters, options=ReadOptions(**options), **read
    )
    assert decoded(usage) == as_tuples(rows)
    assert (new.count, dict(new.by_reason), dict(new.skipped), new.duplicates) == (
        old.count,
        dict(old.by_reason),
        dict(old.skipped),
        old.duplicates,
    )
    assert new.examples == old.examples
    return usage


# ----------------------------------------------------------------- generated usage


def _configs(rng: random.Random) -> dict[Entity, dict[str, float]]:
    entries: dict[Entity, dict[str, float]] = {}
    for entity in [
        Entity.of(user=None),
        Entity.of(user=None, client_id=None),
        Entity.of(client_id=None),
        Entity.of(user="alice"),
        Entity.of(user="bob", client_id="app"),
        Entity.of(user="CN=carol,O=x", client_id=None),
        Entity.of(user=None, client_id="web"),
        Entity.of(client_id="batch"),
    ]:
        key = rng.choice([k for k in CLIENT_KEYS if k != "controller_mutation_rate"])
        entries[entity] = {key: float(rng.randint(1, 40) * 32 * 1024)}
    entries[Entity.of(ip="192.0.2.10")] = {"connection_creation_rate": 30.0}
    entries[Entity.of(ip=None)] = {"connection_creation_rate": 50.0}
    return entries


def generated_records(seed: int) -> list[dict[str, Any]]:
    """Usage records of two clusters (one unconfigured), two brokers, with NaN
    values and throttle times, ip rows, and a bad row of every kind."""
    rng = random.Random(seed)
    records: list[dict[str, Any]] = []
    groups = [(sanitize_user(u) if u else "", c) for u in ["", *USERS] for c in ["", *CLIENTS]]

    def add(cluster: str, broker: str, i: int, metric: str, user: str, client: str, **kw: Any):
        when = T0 + timedelta(seconds=15 * i)
        records.append(
            {
                "cluster": cluster,
                "broker": broker,
                "timestamp": when,
                "metric": metric,
                "user": user,
                "client_id": client,
                "ip": None,
                "value": rng.random() * 3e6,
                **kw,
            }
        )

    for cluster in ("c", "c", "other"):
        for broker in ("1", "2", "3"):
            for user, client in rng.sample(groups, 10):
                for key in rng.sample(CLIENT_KEYS, 2):
                    spec = QUOTA_KEYS[key]
                    for i in range(rng.randint(1, 25)):
                        value = math.nan if rng.random() < 0.1 else rng.random() * 3e6
                        if rng.random() < 0.1:
                            value = float(rng.randint(0, 3))  # ties
                        add(cluster, broker, i, spec.usage_metric, user, client, value=value)
                        if spec.throttle_metric is not None and rng.random() < 0.8:
                            throttle = rng.choice([math.nan, 0.0, rng.random() * 300])
                            add(
                                cluster,
                                broker,
                                i,
                                spec.throttle_metric,
                                user,
                                client,
                                value=throttle,
                            )
            for ip in rng.sample(IPS, 2):
                for i in range(6):
                    add(cluster, broker, i, "connection-accept-rate", "", "", ip=ip)
    for i in range(3):  # a group with NaN samples only, one with throttle times only
        add("c", "1", i, "produce-byte-rate", "zed", "", value=math.nan)
        add("c", "1", i, "fetch-throttle-time", "zed", "", value=5.0)
        add("c", "2", i, "controller-mutation-rate", "zed", "", value=1.0)
    rng.shuffle(records)
    good = dict(records[0])
    bad = [
        {"cluster": ""},
        {"cluster": None},
        {"broker": ""},
        {"metric": "bytes-in"},
        {"metric": None},
        {"timestamp": None},
        {"value": None},
        {"ip": "192.0.2.1"},
        {"metric": "connection-accept-rate", "ip": None},
    ]
    for n, patch in enumerate(bad * 2):
        records.insert(7 * n + 3, {**good, **patch})
    return records


def _text(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float):
        return repr(value) if not math.isnan(value) else "NaN"
    return value


def write_csv(records: Sequence[Mapping[str, Any]], path: Path) -> Path:
    with path.open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh)
        writer.writerow(USAGE_COLUMNS)
        for r in records:
            writer.writerow(["" if r[c] is None else _text(r[c]) for c in USAGE_COLUMNS])
    return path


def write_jsonl(records: Sequence[Mapping[str, Any]], path: Path, *, nan: str = "null") -> Path:
    lines = []
    for r in records:
        data = {c: _text(r[c]) if c == "timestamp" else r[c] for c in USAGE_COLUMNS}
        if isinstance(data["value"], float) and math.isnan(data["value"]):
            data["value"] = nan
        lines.append(json.dumps(data))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_parquet(records: Sequence[Mapping[str, Any]], path: Path, **kw: Any) -> Path:
    schema = pa.schema(
        [
            ("cluster", pa.string()),
            ("broker", pa.string()),
            ("timestamp", pa.timestamp("us", tz="UTC")),
            ("metric", pa.string()),
            ("user", pa.string()),
            ("client_id", pa.string()),
            ("ip", pa.string()),
            ("value", pa.float64()),
        ]
    )
    pq.write_table(pa.Table.from_pylist(list(records), schema=schema), path, **kw)
    return path


@pytest.mark.parametrize("seed", [1, 2])
def test_every_generic_format_reads_and_rejects_as_before(tmp_path: Path, seed: int) -> None:
    records = generated_records(seed)
    for path in [
        write_parquet(records, tmp_path / "u.parquet", row_group_size=500),
        write_csv(records, tmp_path / "u.csv"),
        write_jsonl(records, tmp_path / "u.jsonl"),
    ]:
        usage = assert_same_reading([path], ["c"])
        assert usage.rows > 1000
    # Several files at once, and a time range.
    assert_same_reading(
        [tmp_path / "u.csv", tmp_path / "u.parquet"],
        ["c"],
        since=T0 + timedelta(seconds=30),
        until=T0 + timedelta(seconds=200),
    )


def test_the_rejected_rows_are_counted_and_named_in_the_old_words(tmp_path: Path) -> None:
    header = ",".join(USAGE_COLUMNS)
    lines = [
        header,
        "c,1,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,,1.5",
        ",1,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,,1.5",
        "c,,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,,1.5",
        "c,1,2026-11-23T10:00:00Z,bytes-in,alice,app,,1.5",
        "c,1,yesterday,produce-byte-rate,alice,app,,1.5",
        "c,1,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,,fast",
        "c,1,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,,",
        "c,1,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,192.0.2.1,1",
        "c,1,2026-11-23T10:00:00Z,connection-accept-rate,,,,1",
        "elsewhere,1,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,,1.5",
        "c,1,2026-02-30T10:00:00Z,produce-byte-rate,alice,app,,1.5",
        "c,1,2026-11-23T10:00:00Z,produce-byte-rate,alice,app,,1.5",
    ]
    path = tmp_path / "bad.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    usage, rejected = read_coded_usage([path], clusters=["c"])
    assert usage.rows == 1  # the first and the last row are one (series, time)
    assert rejected.duplicates == 1
    assert rejected.count == 10
    assert dict(rejected.by_reason) == {
        "cluster": 2,
        "broker": 1,
        "metric": 1,
        "timestamp": 2,
        "value": 2,
        "ip": 2,
    }
    assert rejected.examples == [
        f"{path}:3: cluster: missing or empty",
        f"{path}:4: broker: missing or empty",
        f"{path}:5: metric: bytes-in is not a usage metric",
        f"{path}:6: timestamp: 'yesterday' is not an ISO-8601 time",
        f"{path}:7: value: 'fast' is not a number",
        f"{path}:8: value: '' is not a number",
        f"{path}:9: ip: only connection metrics carry an ip, not produce-byte-rate",
        f"{path}:10: ip: connection-accept-rate needs the ip tag",
        f"{path}:12: timestamp: '2026-02-30T10:00:00Z' is not an ISO-8601 time",
        "cluster elsewhere: cluster: no quota configuration for cluster 'elsewhere' "
        "(configured: c)",
    ]
    assert_same_reading([path], ["c"])


def test_odd_times_and_numbers_read_as_check_row_reads_them(tmp_path: Path) -> None:
    times = [
        "2026-11-23T10:00:00Z",
        "2026-11-23 10:00:00",
        "2026-11-23T10:00:00.5",
        "2026-11-23T10:00:00.123456+01:00",
        "2026-11-23T10:00:00.123456789Z",
        "2026-11-23T10:00:00+0130",
        "2026-11-23T23:59:60Z",
        "2026-11-23T24:00:00Z",
        "2026-11-23T10:00Z",
        "2026-11-23",
        "",
    ]
    values = ["1.5", " 2.5 ", "1_000", "nan", "NaN", "-inf", "Infinity", "1e3", ".5", "5.", "+7"]
    values += ["0x10", "1,5", "true", "", "  ", "١٢"]
    lines = [",".join(USAGE_COLUMNS)]
    for t in times:
        for v in values:
            lines.append(f'c,1,{t},produce-byte-rate,alice,app,,"{v}"')
    path = tmp_path / "odd.csv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert_same_reading([path], ["c"])


def test_files_arrow_cannot_read_as_tables_fall_back_to_the_python_readers(
    tmp_path: Path,
) -> None:
    records = generated_records(3)[:400]
    short = write_csv(records, tmp_path / "short.csv")
    text = short.read_text(encoding="utf-8").splitlines()
    text.insert(50, "c,1,2026-11-23T10:00:00Z")  # a short row
    short.write_text("\n".join(text) + "\n", encoding="utf-8")
    odd = write_jsonl(records, tmp_path / "odd.jsonl", nan="NaN")
    lines = odd.read_text(encoding="utf-8").splitlines()
    lines[10:10] = ["", "not json", "[1, 2]", "   "]
    lines.append(json.dumps({**json.loads(lines[0]), "user": 7}))  # a number where text goes
    odd.write_text("\n".join(lines) + "\n", encoding="utf-8")
    blank = write_jsonl(records, tmp_path / "blank.jsonl")
    lines = blank.read_text(encoding="utf-8").splitlines()
    lines[5:5] = ["", ""]
    blank.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for path in (short, odd, blank):
        assert_same_reading([path], ["c"])
    parquet = tmp_path / "typed.parquet"
    pq.write_table(
        pa.table(
            {
                "cluster": ["c", "c", "c"],
                "broker": ["1", "1", "1"],
                "timestamp": ["2026-11-23T10:00:00Z", "bad", "2026-11-23 10:00:01"],
                "metric": ["produce-byte-rate"] * 3,
                "user": ["alice", None, "bob"],
                "client_id": [None, "app", ""],
                "value": ["1.5", "2", "x"],
            }
        ),
        parquet,
    )
    assert_same_reading([parquet], ["c"])


@pytest.mark.parametrize("bits", [63, 16, 4])
def test_keys_that_do_not_pack_into_63_bits_are_paired(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits: int
) -> None:
    # Small batches, and a key budget that the first batches fit and later
    # ones do not (16), or none does (4): the same rows and statistics.
    monkeypatch.setattr(reader, "BATCH_ROWS", 300)
    monkeypatch.setattr(reader, "_KEY_BITS", bits)
    rng = random.Random(5)
    configs = {"c": QuotaIndex(_configs(rng))}
    path = write_parquet(generated_records(5), tmp_path / "u.parquet", row_group_size=300)
    usage = assert_same_reading([path], ["c"])
    assert (usage.widths is None) == (bits < 63)
    rows, _ = old_read([path], ["c"])
    assert aggregate.utilisation(usage, configs).table.to_pylist() == engine.utilisation(
        rows, configs
    )


def test_prometheus_and_jmxtool_read_as_before() -> None:
    assert_same_reading([FIXTURES / "prometheus.json"], ["prod-eu"])
    assert_same_reading([FIXTURES / "jmxtool.csv"], ["prod-eu"], cluster="prod-eu", broker="1")
    assert_same_reading([FIXTURES / "usage.csv", FIXTURES / "usage.jsonl"], ["prod-eu"])


def test_no_row_of_a_configured_cluster_is_refused_as_before(tmp_path: Path) -> None:
    with pytest.raises(AnalyticsError, match="usage names prod-eu, the configuration nowhere"):
        read_coded_usage([FIXTURES / "usage.csv"], clusters=["nowhere"])


# ----------------------------------------------------------------- the statistics


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_utilisation_equals_the_python_engine_row_for_row(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    configs = {"c": QuotaIndex(_configs(rng))}
    path = write_parquet(generated_records(seed), tmp_path / "u.parquet", row_group_size=700)
    rows, _ = old_read([path], ["c"])
    usage, _ = read_coded_usage([path], clusters=["c"])
    want = engine.utilisation(rows, configs)
    got = aggregate.utilisation(usage, configs).table.to_pylist()
    assert got == want
    assert len({r["level"] for r in want} - {None}) >= 3, "coverage"
    assert any(r["ip"] for r in want) and any(r["censored"] for r in want)
    assert any(r["samples"] == 0 for r in want) and any(r["quota_value"] is None for r in want)


def test_analyze_on_the_local_engine_writes_what_the_python_engine_computed(
    tmp_path: Path,
) -> None:
    configs = read_snapshot(FIXTURES / "snapshot.jsonl")
    index = {c: cfg.index for c, cfg in by_cluster(configs).items()}
    rows, _ = old_read([FIXTURES / "usage.csv"], list(index))
    util = engine.utilisation(rows, index)
    after = [QuotaConfig(c.cluster, {e: {} for e in c.entries}, c.source) for c in configs]
    want = {
        Command.utilisation: util,
        Command.impact: engine.impact(
            util, {c: QuotaIndex(a.entries) for c, a in by_cluster(after).items()}
        ),
        Command.recommend: engine.recommend(util),
    }
    for command, rows_wanted in want.items():
        result = run_analysis(
            AnalyzeRequest(
                command=command,
                usage=(FIXTURES / "usage.csv",),
                out=tmp_path / command.value,
                engine=Engine.python,
            ),
            configs,
            after=after,
        )
        assert result.engine is Engine.python
        assert pq.read_table(result.table).to_pylist() == rows_wanted, command
        assert result.rejected.count == 2 and result.usage_rows == len(rows)
    assert result.top  # recommend ran
    util_run = run_analysis(
        AnalyzeRequest(
            command=Command.utilisation,
            usage=(FIXTURES / "usage.csv",),
            out=tmp_path / "again",
            engine=Engine.python,
        ),
        configs,
    )
    assert util_run.extra["groups"] == len(util)
    assert [s.title for s in util_run.series] and all(s.points for s in util_run.series)
    for series in util_run.series:
        group = next(r for r in util if f"{r['quota_key']}" in series.title)
        assert group
    first = util_run.series[0]
    points = sorted(
        (r.timestamp, r.value)
        for r in rows
        if r.kind == "usage"
        and not math.isnan(r.value)
        and f"{r.quota_key}" in first.title
        and first.title.startswith(f"{r.cluster}: ")
    )
    assert set(first.points) <= set(points)


def test_a_usage_file_without_one_usable_row_is_an_error_not_an_empty_table(
    tmp_path: Path,
) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(
        ",".join(USAGE_COLUMNS) + "\nprod-eu,1,yesterday,produce-byte-rate,x,,,1\n",
        encoding="utf-8",
    )
    with pytest.raises(AnalyticsError) as caught:
        run_analysis(
            AnalyzeRequest(
                command=Command.utilisation,
                usage=(path,),
                out=tmp_path / "out",
                engine=Engine.python,
            ),
            read_snapshot(FIXTURES / "snapshot.jsonl"),
        )
    assert str(caught.value) == (
        "no usable usage row: 1 rejected (timestamp: 1); first: "
        f"{path}:2: timestamp: 'yesterday' is not an ISO-8601 time"
    )
    assert not (tmp_path / "out" / "utilisation.parquet").exists()


def test_auto_stays_local_below_a_gibibyte_of_parquet(tmp_path: Path) -> None:
    request = AnalyzeRequest(
        command=Command.utilisation,
        usage=(FIXTURES / "usage.csv",),
        out=tmp_path,
    )
    assert choose_engine(request) is Engine.python
    assert AUTO_SPARK_BYTES == 1 << 30
