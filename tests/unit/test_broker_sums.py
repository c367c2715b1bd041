"""Kafka enforces every client quota on each broker: a group whose clients
reach N brokers may use N times its quota. ``analyze`` sums each group's
usage across brokers next to its per-broker figures (issue 22): Prometheus
steps (aligned: one ``instance`` per broker), samples taken at different
times on each broker (``analyze collect``, JmxTool) aligned on ``--align``
buckets, ``controller_mutation_rate`` held by the active controller alone,
and a one-broker group whose cluster figures are its own. The local engine
equals the Python engine (the reference) exactly; ``tests/spark`` holds the
same cases for Spark."""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jsonschema
import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from quotaform.analytics import engine
from quotaform.analytics.configs import QuotaConfig, by_cluster, read_snapshot
from quotaform.analytics.jobs import AnalyzeRequest, AnalyzeResult, Command, Engine, run_analysis
from quotaform.analytics.model import CLUSTER_COLUMNS, UTILISATION_COLUMNS, percentile
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import read_usage
from quotaform.cli.app import app
from quotaform.errors import AnalyticsError
from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import enforcing_nodes
from tests.docblocks import fenced_blocks, one_line, section

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "analytics"
KiB, MiB = 1024, 1024 * 1024
PROMETHEUS = FIXTURES / "prometheus_brokers.json"
COLLECTED = FIXTURES / "usage_brokers.jsonl"


def analyze(
    tmp_path: Path,
    usage: Path,
    command: Command = Command.utilisation,
    after: Sequence[QuotaConfig] = (),
    **options: Any,
) -> tuple[list[dict[str, Any]], AnalyzeResult]:
    """``run_analysis`` on the local engine with the fixture snapshot: the
    written table's rows and the result."""
    result = run_analysis(
        AnalyzeRequest(
            command=command,
            usage=(usage,),
            out=tmp_path / command.value,
            engine=Engine.python,
            **options,
        ),
        read_snapshot(FIXTURES / "snapshot.jsonl"),
        after=after,
    )
    return pq.read_table(result.table).to_pylist(), result


def reference(usage: Path, **options: Any) -> list[dict[str, Any]]:
    """The Python engine's utilisation of the same file (the reference)."""
    rows, _ = read_usage([usage])
    configs = by_cluster(read_snapshot(FIXTURES / "snapshot.jsonl"))
    index = {c: cfg.index for c, cfg in configs.items()}
    return engine.utilisation(rows, index, **options)


def by_group(rows: list[dict[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(r["user"] or r["client_id"], r["quota_key"], r["broker"]): r for r in rows}


def cluster_part(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(row[c] for c in CLUSTER_COLUMNS)


def test_prometheus_steps_are_summed_across_the_instances(tmp_path: Path) -> None:
    rows, result = analyze(tmp_path, PROMETHEUS)
    assert rows == reference(PROMETHEUS)
    got = by_group(rows)
    alice = [got[("alice", "producer_byte_rate", f"b{n}:9999")] for n in (1, 2, 3)]
    # b3 missed the third step: that step sums b1 and b2 only.
    sums = [400000.0 + 100000 + 10000, 500000.0 + 200000 + 20000, 600000.0 + 300000,
            700000.0 + 400000 + 40000]  # fmt: skip
    for row in alice:  # every per-broker row carries the same cluster figures
        assert row["quota_value"] == MiB and row["brokers_observed"] == 3
        assert row["cluster_samples"] == 4
        assert (row["cluster_p50"], row["cluster_max"]) == (810000.0, 1140000.0)
        assert row["cluster_p95"] == percentile(sums, 0.95)
        assert row["cluster_p99"] == percentile(sums, 0.99)
        assert row["cluster_ceiling"] == 3 * MiB  # 1MiB on each of 3 brokers
        assert row["cluster_utilisation_p99"] == row["cluster_p99"] / (3 * MiB)
    # The per-broker figures are as before.
    assert [r["p50"] for r in alice] == [550000.0, 250000.0, 20000.0]
    assert [r["samples"] for r in alice] == [4, 4, 3]
    # bob reaches one broker: the cluster figures are its own.
    bob = got[("bob", "producer_byte_rate", "b1:9999")]
    assert (bob["brokers_observed"], bob["cluster_ceiling"]) == (1, bob["quota_value"])
    assert (bob["cluster_samples"], bob["cluster_p50"], bob["cluster_p99"], bob["cluster_max"]) == (
        bob["samples"], bob["p50"], bob["p99"], bob["max"],
    )  # fmt: skip
    assert result.extra["cluster_groups"] == 2 and result.extra["multi_broker_groups"] == 1
    assert result.extra["max_brokers_observed"] == 3 and result.extra["groups"] == 4


def test_samples_taken_at_different_times_are_aligned_on_buckets(tmp_path: Path) -> None:
    rows, _ = analyze(tmp_path, COLLECTED, align_s=10.0)
    assert rows == reference(COLLECTED, align_s=10.0)
    got = by_group(rows)
    alice = got[("alice", "producer_byte_rate", "1")]
    # 10:00:00-10:00:10: brokers 1, 2, 3 average (100, 300), (1000, 2000), (10, 30);
    # 10:00:10-10:00:20: (500, 700), (3000, 5000), (50).
    assert alice["brokers_observed"] == 3 and alice["cluster_samples"] == 2
    first, second = 200.0 + 1500.0 + 20.0, 600.0 + 4000.0 + 50.0
    assert (alice["cluster_p50"], alice["cluster_max"]) == ((first + second) / 2, second)
    assert alice["cluster_ceiling"] == 3 * MiB
    # Mutations are throttled by the active controller: one quota, whatever the nodes.
    adm = got[("adm", "controller_mutation_rate", "1")]
    assert (adm["quota_value"], adm["brokers_observed"]) == (2.0, 2)
    assert (adm["cluster_max"], adm["cluster_ceiling"]) == (3.0 + 0.25, 2.0)
    assert enforcing_nodes("controller_mutation_rate", 2) == 1
    assert enforcing_nodes("producer_byte_rate", 2) == 2
    bob = got[("bob", "producer_byte_rate", "1")]
    assert cluster_part(bob)[:2] == (1, 2) and bob["cluster_p99"] == bob["p99"]
    # Other buckets, other sums: the default bucket is the quota window (11 s
    # from the epoch: 10:00:08 is a bucket's start), and still the reference's.
    default, _ = analyze(tmp_path / "default", COLLECTED)
    assert default == reference(COLLECTED)
    assert by_group(default)[("alice", "producer_byte_rate", "1")]["cluster_max"] == (
        600.0 + (2000.0 + 3000.0 + 5000.0) / 3 + 50.0
    )


def test_a_group_on_one_broker_has_its_own_figures_as_cluster_figures(tmp_path: Path) -> None:
    # usage.csv: every group on broker 1, CN=carol's on broker 2 only; 30 s steps.
    rows, result = analyze(tmp_path, FIXTURES / "usage.csv")
    assert {(r["user"], r["broker"]) for r in rows if r["user"] == "CN%3Dcarol"} == {
        ("CN%3Dcarol", "2")
    }
    assert len(rows) > 3
    for row in rows:
        assert row["brokers_observed"] == 1
        assert row["cluster_samples"] == row["samples"], row  # one sample per bucket
        assert (row["cluster_p50"], row["cluster_p95"], row["cluster_p99"]) == (
            row["p50"], row["p95"], row["p99"],
        )  # fmt: skip
        assert row["cluster_max"] == row["max"] and row["cluster_ceiling"] == row["quota_value"]
        assert row["cluster_utilisation_p99"] == row["utilisation_p99"]
    assert list(pq.read_schema(result.table / "part-00000.parquet").names) == list(
        UTILISATION_COLUMNS
    )
    assert result.extra["multi_broker_groups"] == 0 and result.extra["max_brokers_observed"] == 1
    assert result.extra["cluster_groups"] == result.extra["groups"] == len(rows)
    # JmxTool samples every second: whatever the bucket (1 s, the default
    # 11 s), a group seen on one broker has its own figures as its cluster
    # figures, never averages over buckets beside them (issue 32: the docs'
    # live example showed p99 275KiB, 108 % beside cluster p99 261KiB).
    jmx = {"read": ReadOptions(cluster="prod-eu", broker="1")}
    secondly, _ = analyze(tmp_path / "1s", FIXTURES / "jmxtool.csv", align_s=1.0, **jmx)
    windowed, _ = analyze(tmp_path / "11s", FIXTURES / "jmxtool.csv", **jmx)
    (one,), (eleven,) = secondly, windowed
    assert eleven == one
    assert (eleven["cluster_samples"], eleven["cluster_p99"], eleven["cluster_max"]) == (
        eleven["samples"], eleven["p99"], eleven["max"],
    )  # fmt: skip


def test_impact_and_recommend_show_the_quota_across_the_brokers(tmp_path: Path) -> None:
    util = {r["broker"]: r for r in analyze(tmp_path, PROMETHEUS)[0] if r["user"] == "alice"}
    recommended, _ = analyze(tmp_path, PROMETHEUS, Command.recommend)
    (alice,) = [r for r in recommended if r["user"] == "alice"]
    # A per-broker quota, sized on the busiest broker (b1), allowed on each of 3.
    assert alice["peak_p99"] == util["b1:9999"]["p99"]
    assert (alice["brokers_observed"], alice["cluster_p99"]) == (3, util["b1:9999"]["cluster_p99"])
    assert alice["cluster_ceiling"] == 3 * MiB
    assert alice["recommended_cluster_ceiling"] == 3 * alice["recommended"]
    before = read_snapshot(FIXTURES / "snapshot.jsonl")
    halved = {Entity.of(user="alice", client_id="ingest"): {"producer_byte_rate": 512.0 * KiB}}
    after = [QuotaConfig(c.cluster, {**c.entries, **halved}, "after") for c in before]
    changed, _ = analyze(tmp_path, PROMETHEUS, Command.impact, after=after)
    assert len(changed) == 3  # alice on each broker
    for row in changed:
        assert (row["brokers_observed"], row["cluster_p99"]) == (3, util["b1:9999"]["cluster_p99"])
        assert (row["cluster_ceiling_before"], row["cluster_ceiling_after"]) == (3 * MiB, 1.5 * MiB)


def test_a_bucket_that_is_no_duration_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AnalyticsError, match=r"--align 0\.0: give a positive duration"):
        analyze(tmp_path, PROMETHEUS, align_s=0.0)
    result = CliRunner().invoke(
        app, ["analyze", "utilisation", "--usage", str(PROMETHEUS), "--align", "0s",
              "--snapshot", str(FIXTURES / "snapshot.jsonl"), "--out", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 1 and "--align': '0s': give a positive duration" in result.output


# ----------------------------------------------------------------- the documentation


def _documented() -> list[str]:
    text = section("docs/analytics.md", "## Usage across brokers")
    return [one_line(block) for block in fenced_blocks(text)]


def test_the_documented_commands_run_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    commands = _documented()
    assert len(commands) == 2, commands
    (tmp_path / "tests/fixtures").mkdir(parents=True)
    (tmp_path / "tests/fixtures/analytics").symlink_to(FIXTURES)
    monkeypatch.chdir(tmp_path)
    for command in commands:
        words = shlex.split(command)
        assert words[0] == "quotaform", command
        done = CliRunner().invoke(app, words[1:])
        assert done.exit_code == 0, (command, done.output)
    summary = json.loads((tmp_path / "out/brokers/summary.json").read_text(encoding="utf-8"))
    jsonschema.validate(
        summary, json.loads((ROOT / "schemas/analyze.schema.json").read_text(encoding="utf-8"))
    )
    assert summary["align_s"] == 11.0
    counts = summary["counts"]
    assert (counts["cluster_groups"], counts["multi_broker_groups"]) == (2, 1)
    assert counts["max_brokers_observed"] == 3
    top = summary["top"][0]
    assert (top["user"], top["brokers_observed"], top["cluster_ceiling"]) == ("alice", 3, 3 * MiB)
    report = (tmp_path / "out/brokers/report.md").read_text(encoding="utf-8")
    assert (
        "Quotas are enforced per broker: 1 of 2 groups were observed on more than one broker "
        "(at most 3) and may use their quota on each (cluster ceiling); cluster p99: their "
        "usage summed across brokers in 11 s buckets. prod-eu: user=alice, client-id=ingest "
        "producer_byte_rate: 1MiB on each of 3 brokers, 3MiB across them (cluster p99 1.08MiB)."
    ) in report
    header = next(line for line in report.splitlines() if line.startswith("| group"))
    assert header.endswith("| brokers | cluster p99 | cluster ceiling |")
    collected = pq.read_table(tmp_path / "out/collected/utilisation.parquet").to_pylist()
    assert {r["cluster_ceiling"] for r in collected if r["client_id"] == "adm"} == {2.0}
