"""What quotaform makes of each published exporter rule set, on query_range
answers a real Prometheus gave (``scripts/prometheus_live.py`` against the
real JMX exporter 1.0.1 on a SCRAM sandbox broker under the scenario of
``quotaform.sandbox.livemetrics``; ``tests/fixtures/prometheus/recorded/``).
The live path runs in ``tests/integration/test_prometheus_exporter.py``;
this keeps every rule set's outcome checked without seven exporters in CI.
The "Exporter rules" table of docs/analytics.md says the same."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaform.analytics.exporters import KRAFT_RULES, OLD_RULES_NOTE, STRIMZI_RULES
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.registry import read_usage
from quotaform.analytics.usage import LabelMap, usage_problem
from quotaform.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "fixtures" / "prometheus" / "recorded"
QUOTAS = ROOT / "examples" / "prometheus" / "quotas.yaml"
runner = CliRunner()

#: Produce groups with traffic in the scenario (metric tags).
ALICE, BOB, CAROL, EMPTY = ("alice", "alice-app"), ("bob", ""), ("", "carol-app"), ("", "")


def _groups(name: str) -> tuple[dict[str, set[tuple[str, str]]], str | None, list[str]]:
    rows, rejected = read_usage(
        [RECORDED / f"{name}.json"], options=ReadOptions(labels=LabelMap(default_cluster="c"))
    )
    groups: dict[str, set[tuple[str, str]]] = {}
    for row in rows:
        groups.setdefault(row.metric, set()).add((row.user, row.client_id))
    assert rejected.count == 0, rejected.examples
    return groups, usage_problem(len(rows), rejected, LabelMap()), list(rejected.notes)


@pytest.mark.parametrize("name", ["ours-strimzi", "ours-kraft"])
def test_our_rules_give_every_group(name: str) -> None:
    groups, problem, notes = _groups(name)
    assert problem is None and notes == []
    assert groups["produce-byte-rate"] == {ALICE, BOB, CAROL, EMPTY}
    assert groups["fetch-byte-rate"] == {BOB}
    assert groups["controller-mutation-rate"] == {("alice", "")}
    assert groups["connection-accept-rate"] == {("", "")}  # the ip row: ip 127.0.0.1


def test_confluents_rules_give_the_tagged_groups_only() -> None:
    groups, problem, _ = _groups("confluent")
    assert problem is None
    assert groups["produce-byte-rate"] == {ALICE, BOB, CAROL}
    assert "controller-mutation-rate" not in groups and "connection-accept-rate" not in groups


def test_jmx_exporters_current_example_is_read() -> None:
    groups, problem, notes = _groups("jmx-exporter-2_0_0")
    assert problem is None and notes == []
    assert groups["produce-byte-rate"] == {ALICE, BOB, CAROL}
    assert groups["controller-mutation-rate"] == {("alice", "")}


def test_the_pre_2023_example_is_decoded_and_its_gap_said() -> None:
    groups, problem, notes = _groups("jmx-exporter-2_0_0-2022")
    assert problem is None and notes == [OLD_RULES_NOTE]
    assert groups["produce-byte-rate"] == {ALICE, CAROL}  # bob's user-only group is lost


def test_the_kraft_examples_folded_names_are_an_error_naming_the_rules() -> None:
    _, problem, _ = _groups("kraft")
    assert problem is not None and KRAFT_RULES in problem
    assert "kafka_server_" in problem.split("(", 1)[1]  # the first folded series named


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("strimzi", "no series at all. The exporter rules export no client-quota metrics"),
        ("kraft", "quotaform cannot read (kafka_server_"),
    ],
)
def test_analyze_refuses_what_it_cannot_read(name: str, expected: str, tmp_path: Path) -> None:
    result = runner.invoke(
        app,
        [
            "analyze", "utilisation", str(QUOTAS), "--usage", str(RECORDED / f"{name}.json"),
            "--out", str(tmp_path), "--engine", "python",
        ],
    )  # fmt: skip
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("Error:")]
    assert len(errors) == 1, result.stderr
    text = " ".join(result.stderr.split())
    assert expected in text
    assert (STRIMZI_RULES if name == "strimzi" else KRAFT_RULES) in text
    assert not (tmp_path / "utilisation.parquet").exists()
