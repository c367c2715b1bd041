"""Reading real exporter setups: every naming convention, folded names refused,
series without __name__, per-listener connection rates, duplicates, *.json that
is not a query_range answer, no silent empty report, and the --prometheus
client's pure parts (ranges, steps, authentication)."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.analytics.configs import read_snapshot
from quotaform.analytics.exporters import (
    KRAFT_RULES,
    LIVE_SELECTOR,
    OLD_RULES_NOTE,
    STRIMZI_RULES,
    decode_series,
    metric_of_name,
)
from quotaform.analytics.jobs import AnalyzeRequest, Command, Engine, run_analysis
from quotaform.analytics.local.reader import read_coded_usage
from quotaform.analytics.prometheus_api import (
    ENVIRONMENT,
    MAX_POINTS,
    PrometheusAuth,
    default_step,
    load_auth,
    redact_url,
    split_range,
)
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import read_usage
from quotaform.analytics.usage import LabelMap, usage_problem
from quotaform.cli.app import app
from quotaform.errors import AnalyticsError

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"
T0 = 1795428000
runner = CliRunner()


def answer(*series: tuple[dict[str, str], list[tuple[float, str]]]) -> dict[str, Any]:
    """A query_range answer holding ``series`` (labels, [(unix s, value)])."""
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [
                {"metric": labels, "values": [[t, v] for t, v in values]}
                for labels, values in series
            ],
        },
    }


def write(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


POINTS = [(T0, "100"), (T0 + 15, "200"), (T0 + 30, "NaN")]
BASE = {"instance": "b1:9999", "cluster": "prod-eu"}


# ----------------------------------------------------------------- conventions


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (  # Confluent jmx-monitoring-stacks, quotaform's rules
            {"__name__": "kafka_server_produce_byte_rate", "user": "alice", "client_id": "a"},
            ("produce-byte-rate", "alice", "a", None, "labels"),
        ),
        (  # user-only group
            {"__name__": "kafka_server_fetch_throttle_time", "user": "bob"},
            ("fetch-throttle-time", "bob", "", None, "labels"),
        ),
        (  # the empty group: a byte-rate on bare type=Produce
            {"__name__": "kafka_server_produce_byte_rate"},
            ("produce-byte-rate", "", "", None, "labels"),
        ),
        (
            {"__name__": "kafka_server_request_request_time", "client_id": '"etl:batch"'},
            ("request-time", "", "etl:batch", None, "labels"),
        ),
        (
            {"__name__": "kafka_server_controllermutation_mutation_rate", "user": "ops"},
            ("controller-mutation-rate", "ops", "", None, "labels"),
        ),
        (
            {"__name__": "kafka_server_socket_server_metrics_connection_accept_rate", "ip": "::1"},
            ("connection-accept-rate", "", "", "::1", "labels"),
        ),
        (  # jmx_exporter examples/kafka-2_0_0.yml
            {
                "__name__": "kafka_server_quota_byte_rate",
                "resource": "Fetch",
                "user": "u",
                "clientId": "c",
            },
            ("fetch-byte-rate", "u", "c", None, "quota"),
        ),
        (  # the pre-2023 example_configs/kafka-2_0_0.yml: the user folded into resource
            {
                "__name__": "kafka_server_quota_byte_rate",
                "resource": "Produce, user=alice",
                "clientId": "ingest",
            },
            ("produce-byte-rate", "alice", "ingest", None, "quota-folded"),
        ),
        (
            {"__name__": "kafka_server_quota_throttle_time", "resource": "Request, user=CN%3Dx"},
            ("request-throttle-time", "CN%3Dx", "", None, "quota-folded"),
        ),
    ],
)
def test_every_convention_decodes_to_the_group_tags(
    labels: dict[str, str], expected: tuple[Any, ...]
) -> None:
    meaning = decode_series(labels)
    assert (
        meaning.metric,
        meaning.user,
        meaning.client_id,
        meaning.ip,
        meaning.convention,
    ) == expected


def test_names_that_are_not_quota_groups_are_skipped_with_the_right_reason() -> None:
    listener = decode_series(
        {
            "__name__": "kafka_server_socket_server_metrics_connection_accept_rate",
            "listener": "PLAINTEXT",
        }
    )
    assert listener.metric is None and not listener.unusable
    assert (
        listener.reason == "connection rate of listener PLAINTEXT, not of an ip: not a quota group"
    )
    tokens = decode_series({"__name__": "kafka_server_quota_tokens", "resource": "x"})
    assert tokens.reason == "not a quota usage metric: kafka_server_quota_tokens"
    queue = decode_series({"__name__": "kafka_server_produce_queue_size"})
    assert queue.reason == "not a quota usage metric: kafka_server_produce_queue_size"


def test_folded_names_are_unusable_and_name_the_rules_to_use() -> None:
    meaning = decode_series(
        {"__name__": "kafka_server_produce_user_alice_client_id_ingest_byte_rate"}
    )
    assert meaning.metric is None and meaning.unusable
    assert meaning.convention == "name-folded"
    assert KRAFT_RULES in meaning.reason and "lower-cased" in meaning.reason


def test_the_live_selector_asks_for_every_convention() -> None:
    import re

    pattern = re.compile(LIVE_SELECTOR.split('"')[1])  # PromQL anchors the regex
    for name in (
        "kafka_server_produce_byte_rate",
        "kafka_server_request_throttle_time",
        "kafka_server_controllermutation_mutation_rate",
        "kafka_server_quota_byte_rate",
        "kafka_server_socket_server_metrics_connection_accept_rate",
        "kafka_server_fetch_user_alice_byte_rate",
    ):
        assert pattern.fullmatch(name), name
    assert not pattern.fullmatch("kafka_server_brokertopicmetrics_bytesin_total")


def test_metric_names_for_series_without_one() -> None:
    assert metric_of_name("produce-byte-rate") == "produce-byte-rate"
    assert metric_of_name("kafka_server_fetch_byte_rate") == "fetch-byte-rate"
    assert metric_of_name("bytes-in") is None


# ----------------------------------------------------------------- files


def test_the_old_resource_form_is_read_and_said(tmp_path: Path) -> None:
    path = write(
        tmp_path / "old.json",
        answer(
            (
                {
                    "__name__": "kafka_server_quota_byte_rate",
                    "resource": "Produce, user=alice",
                    "clientId": "ingest",
                    **BASE,
                },
                POINTS,
            )
        ),
    )
    rows, rejected = read_usage([path])
    assert {(r.metric, r.user, r.client_id) for r in rows} == {
        ("produce-byte-rate", "alice", "ingest")
    }
    assert rejected.count == 0 and not rejected.skipped
    assert dict(rejected.notes) == {OLD_RULES_NOTE: 1}
    assert dict(rejected.matched) == {
        "kafka_server_quota_byte_rate -> produce-byte-rate (quota-folded)": 1
    }


def test_series_without_a_name_need_metric(tmp_path: Path) -> None:
    path = write(tmp_path / "avg.json", answer(({"user": "alice", **BASE}, POINTS)))
    rows, rejected = read_usage([path])
    assert rows == []
    problem = usage_problem(0, rejected, LabelMap())
    assert problem is not None and "--metric NAME" in problem
    labels = LabelMap(metric="produce-byte-rate")
    rows, rejected = read_usage([path], options=ReadOptions(labels=labels))
    assert [(r.metric, r.user) for r in rows] == [("produce-byte-rate", "alice")] * 3
    assert usage_problem(len(rows), rejected, LabelMap()) is None


def test_folded_series_beside_good_ones_are_still_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path / "kraft.json",
        answer(
            ({"__name__": "kafka_server_produce_byte_rate", "user": "a", **BASE}, POINTS),
            ({"__name__": "kafka_server_produce_user_bob_byte_rate", **BASE}, POINTS),
        ),
    )
    rows, rejected = read_usage([path])
    assert len(rows) == 3
    problem = usage_problem(len(rows), rejected, LabelMap())
    assert problem is not None
    assert problem.startswith("usage series hold quota metrics quotaform cannot read (")
    assert "kafka_server_produce_user_bob_byte_rate" in problem and KRAFT_RULES in problem


def test_per_listener_connection_rates_are_skipped_not_rejected(tmp_path: Path) -> None:
    name = "kafka_server_socket_server_metrics_connection_accept_rate"
    path = write(
        tmp_path / "conn.json",
        answer(
            ({"__name__": name, "ip": "127.0.0.1", **BASE}, POINTS),
            ({"__name__": name, "listener": "PLAINTEXT", **BASE}, POINTS),
            ({"__name__": name, "listener": "CONTROLLER", **BASE}, POINTS),
        ),
    )
    for _rows, rejected in (
        read_usage([path]),
        read_coded_usage([path], clusters=["prod-eu"]),
    ):
        assert rejected.count == 0
        assert dict(rejected.skipped) == {
            "connection rate of listener PLAINTEXT, not of an ip: not a quota group": 1,
            "connection rate of listener CONTROLLER, not of an ip: not a quota group": 1,
        }
    usage, _ = read_coded_usage([path], clusters=["prod-eu"])
    assert usage.rows == 3


def test_json_that_is_not_a_query_range_answer(tmp_path: Path) -> None:
    data = tmp_path / "usage"
    data.mkdir()
    write(data / "q.json", answer(({"__name__": "kafka_server_produce_byte_rate", **BASE}, POINTS)))
    (data / "summary.json").write_text('{"format_version": 1, "rows": 3}\n', encoding="utf-8")
    (data / "rows.json").write_text(
        json.dumps(
            {
                "cluster": "prod-eu",
                "broker": "1",
                "timestamp": "2026-11-23T10:00:00Z",
                "metric": "fetch-byte-rate",
                "user": "u",
                "client_id": "",
                "ip": None,
                "value": 5,
            }
        )
        + "\n",
        encoding="utf-8",
    )
    (data / "pretty.json").write_text(
        json.dumps(
            answer(({"__name__": "kafka_server_fetch_byte_rate", **BASE}, POINTS)), indent=2
        ),
        encoding="utf-8",
    )
    rows, rejected = read_usage([data])
    assert sorted({r.metric for r in rows}) == ["fetch-byte-rate", "produce-byte-rate"]
    assert len(rows) == 3 + 1 + 3
    assert dict(rejected.skipped) == {
        f"{data / 'summary.json'}: neither a Prometheus query_range answer nor JSON Lines": 1
    }
    with pytest.raises(AnalyticsError, match=r"summary\.json: neither a Prometheus query_range"):
        read_usage([data / "summary.json"])


def test_the_same_series_twice_is_counted_once(tmp_path: Path) -> None:
    combined = write(tmp_path / "all.json", json.loads((FIXTURES / "prometheus.json").read_text()))
    folder = tmp_path / "dir"
    folder.mkdir()
    write(folder / "part.json", json.loads((FIXTURES / "prometheus.json").read_text()))
    once, _ = read_coded_usage([combined], clusters=["prod-eu"])
    twice, rejected = read_coded_usage([combined, folder], clusters=["prod-eu"])
    assert twice.rows == once.rows and rejected.duplicates == once.rows


def test_no_cluster_label_is_an_error_saying_what_to_do(tmp_path: Path) -> None:
    path = write(
        tmp_path / "q.json",
        answer(({"__name__": "kafka_server_produce_byte_rate", "instance": "b1"}, POINTS)),
    )
    configs = read_snapshot(FIXTURES / "snapshot.jsonl")
    with pytest.raises(AnalyticsError) as caught:
        run_analysis(
            AnalyzeRequest(
                command=Command.utilisation,
                usage=(path,),
                out=tmp_path / "out",
                engine=Engine.python,
            ),
            configs,
        )
    assert str(caught.value) == (
        "no usable usage row: 3 row(s) have no 'cluster' label (or name an unconfigured "
        "cluster): give --default-cluster NAME for series without it, or --cluster-label LABEL"
    )


def _utilisation(usage: Path, out: Path) -> Any:
    """``quotaform analyze utilisation`` of the fixture manifest on ``usage``."""
    return runner.invoke(
        app,
        [
            "analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage", str(usage),
            "--out", str(out), "--engine", "python",
        ],
    )  # fmt: skip


def test_one_configured_cluster_is_assumed_and_said(tmp_path: Path) -> None:
    path = write(
        tmp_path / "q.json",
        answer(({"__name__": "kafka_server_produce_byte_rate", "instance": "b1"}, POINTS)),
    )
    result = _utilisation(path, tmp_path / "out")
    assert result.exit_code == 0, result.output
    assert (
        "Note: series without a 'cluster' label: assumed the one configured cluster 'prod-eu' "
        "(--default-cluster NAME says so) (1 series)"
    ) in " ".join(result.stderr.split())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert summary["usage_rows"] == 3
    assert summary["rejected"]["matched"] == {
        "kafka_server_produce_byte_rate -> produce-byte-rate (labels)": 1
    }


def test_exporter_rules_without_quota_metrics_are_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path / "strimzi.json",
        answer(({"__name__": "kafka_server_replicamanager_leadercount", **BASE}, POINTS)),
    )
    result = _utilisation(path, tmp_path / "out")
    assert result.exit_code == 1
    text = " ".join(result.stderr.split())
    assert text.count("Error: ") == 1
    assert "no quota usage series in the usage: only other series" in text
    assert STRIMZI_RULES in text and KRAFT_RULES in text
    assert not (tmp_path / "out" / "utilisation.parquet").exists()


def test_usage_or_prometheus_is_required(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--out", str(tmp_path)],
    )
    assert result.exit_code == 1
    assert "give the usage: --usage PATH (repeatable) or --prometheus URL" in result.stderr


# ----------------------------------------------------------------- --prometheus, pure parts


def test_ranges_never_exceed_the_points_limit_nor_overlap() -> None:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for span, step in ((timedelta(days=7), 15.0), (timedelta(hours=1), 1.0), (timedelta(0), 5.0)):
        ranges = split_range(start, start + span, step)
        points = [round((b - a).total_seconds() / step) + 1 for a, b in ranges]
        assert all(p <= MAX_POINTS for p in points)
        assert sum(points) == int(span.total_seconds() // step) + 1
        for (_, end), (nxt, _) in itertools.pairwise(ranges):
            assert nxt - end == timedelta(seconds=step)
    assert len(split_range(start, start + timedelta(days=7), 15.0)) == 4  # 40,321 points
    assert default_step(start, start + timedelta(hours=1)) == 15.0
    ninety_days = start + timedelta(days=90)
    assert default_step(start, ninety_days) == 707.0  # 7,776,000 s / 10,999, rounded up
    assert len(split_range(start, ninety_days, default_step(start, ninety_days))) == 1
    with pytest.raises(AnalyticsError, match="is before --since"):
        split_range(start, start - timedelta(seconds=1), 1.0)


def test_authentication_from_the_environment_or_a_prometheus_config(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("s3cr3t-token\n", encoding="utf-8")
    auth = load_auth({ENVIRONMENT["token_file"]: str(token)})
    assert auth.header() == "Bearer s3cr3t-token"
    assert "s3cr3t" not in repr(auth)
    basic = load_auth({ENVIRONMENT["username"]: "reader", ENVIRONMENT["password"]: "pw"})
    assert basic.header() == "Basic cmVhZGVyOnB3"
    assert "pw" not in repr(basic).replace("password=", "")
    with pytest.raises(AnalyticsError, match="a bearer token or basic auth, not both"):
        load_auth({ENVIRONMENT["token"]: "t", ENVIRONMENT["username"]: "u"})
    secret = tmp_path / "password"
    secret.write_text("from-file", encoding="utf-8")
    config = tmp_path / "http.yml"
    config.write_text(
        "basic_auth:\n  username: reader\n  password_file: password\n"
        "tls_config:\n  ca_file: ca.pem\n",
        encoding="utf-8",
    )
    auth = load_auth({}, config=config)
    assert (auth.username, auth.password, auth.ca_file) == (
        "reader",
        "from-file",
        tmp_path / "ca.pem",
    )
    assert load_auth({}, config=config, ca_file=Path("/x/ca.pem")).ca_file == Path("/x/ca.pem")
    config.write_text("basic_auth:\n  user: reader\n", encoding="utf-8")
    with pytest.raises(AnalyticsError, match=r"http.yml: basic_auth.user: not a key quotaform"):
        load_auth({}, config=config)
    assert PrometheusAuth().header() is None


def test_credentials_never_go_in_the_url(tmp_path: Path) -> None:
    assert redact_url("https://u:p@prom.example:9090/q?x=1") == "https://prom.example:9090/q"
    result = runner.invoke(
        app,
        [
            "analyze",
            "utilisation",
            str(FIXTURES / "manifest.yaml"),
            "--prometheus",
            "http://reader:hunter2@127.0.0.1:9",
            "--out",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 1
    assert "hunter2" not in result.output + result.stderr
    assert "credentials do not go in the URL" in result.stderr


def test_prometheus_answers_are_not_read_as_another_format(tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--prometheus",
            "http://127.0.0.1:9", "--usage-format", "jmxtool", "--out", str(tmp_path),
        ],
    )  # fmt: skip
    assert result.exit_code == 1
    assert "--usage-format jmxtool: --prometheus answers are query_range JSON" in result.stderr


def _answer(series: list[str]) -> bytes:
    return ('{"status":"success","data":{"resultType":"matrix","result":[' + ",".join(series)
            + "]}}").encode()  # fmt: skip


_METRIC_JSON = (
    '"metric":{"__name__":"kafka_server_produce_byte_rate","user":"alice",'
    '"client_id":"ingest","instance":"1","cluster":"prod-eu"}'
)


def test_a_series_of_a_million_samples_is_read_sample_by_sample(tmp_path: Path) -> None:
    """A live answer of 300 MB with one series crashed the reader (ijson built
    the series whole: gigabytes). The first rows now come before the rest of
    the series is read: little memory however long the series."""
    import tracemalloc

    from quotaform.analytics.sources.prometheus import prometheus_rows
    from quotaform.analytics.usage import Rejections

    values = ",".join(f'[{1795428000 + i},"{i}"]' for i in range(1_000_000))
    path = tmp_path / "answer.json"
    path.write_bytes(_answer(["{" + _METRIC_JSON + ',"values":[' + values + "]}"]))
    del values
    tracemalloc.start()
    try:
        rows = prometheus_rows(path, LabelMap(), Rejections())
        first = list(itertools.islice(rows, 3))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert [r[1]["value"] for r in first] == ["0", "1", "2"]
    assert first[0][0].endswith("series 1 sample 1")
    # The depth scan's 8 MiB blocks and their copies: about 45 MB, whatever the
    # series' length; the series built whole as lists: about 250 MB.
    assert peak < 96 * 1024 * 1024, peak


def test_samples_before_the_metric_wait_for_it_and_bad_series_are_named(tmp_path: Path) -> None:
    from quotaform.analytics.sources.prometheus import prometheus_rows
    from quotaform.analytics.usage import Rejections

    path = tmp_path / "answer.json"
    path.write_bytes(
        _answer([
            '{"values":[[1795428000,"5"],[1795428001,"6"]],' + _METRIC_JSON + "}",
            "[1, 2]",
            '{"values":[[1795428000,"5"]]}',
            '{' + _METRIC_JSON + ',"values":"none"}',
            '{' + _METRIC_JSON + ',"values":[[1795428000,"7"], 3, [{"a": 1}, "8"]]}',
        ])
    )  # fmt: skip
    got = list(prometheus_rows(path, LabelMap(), Rejections()))
    rows = [(where.split(": ", 1)[1], row if isinstance(row, str) else row["value"])
            for where, row in got]  # fmt: skip
    assert rows == [
        ("series 1 sample 1", "5"),
        ("series 1 sample 2", "6"),
        ("series 2", "series: expected {metric, values}"),
        ("series 3", "series: expected {metric, values}"),
        ("series 4", "values: expected [[time, value], ...]"),
        ("series 5 sample 1", "7"),
        ("series 5 sample 2", "values: expected [time, value]"),
        ("series 5 sample 3", "timestamp: {'a': 1} is not unix seconds"),
    ]
