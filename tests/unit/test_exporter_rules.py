"""The shipped exporter rules (``examples/prometheus/``), the vendored upstream
rule sets and the config merge, without a broker (the live proof is
``tests/integration/test_prometheus_exporter.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from quotaform.errors import SandboxError
from quotaform.sandbox.exporter import exporter_config, load_exporter_config, load_rules

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "tests" / "fixtures" / "prometheus" / "rules"
RECORDED = ROOT / "tests" / "fixtures" / "prometheus" / "recorded"
PLAIN = ROOT / "examples" / "prometheus" / "jmx-exporter-quota-rules.yml"
STRIMZI = ROOT / "examples" / "prometheus" / "strimzi-kafka-metrics-quota-rules.yaml"


def test_both_snippets_hold_the_same_rules() -> None:
    plain = load_rules(PLAIN)
    assert plain == load_rules(STRIMZI)
    assert len(plain) == 6
    assert load_exporter_config(STRIMZI)["lowercaseOutputName"] is True


@pytest.mark.parametrize(
    ("upstream", "snippet"),
    [("strimzi-kafka-metrics.yaml", STRIMZI), ("jmx-exporter-kafka-kraft-3_0_0.yml", PLAIN)],
)
def test_the_merge_puts_our_rules_first_and_keeps_the_rest(upstream: str, snippet: Path) -> None:
    original = load_exporter_config(RULES / upstream)
    merged = YAML(typ="safe").load(
        exporter_config(RULES / upstream, snippet=snippet, overrides={"startDelaySeconds": 0})
    )
    ours = load_rules(snippet)
    assert merged["rules"] == ours + original["rules"]
    assert merged["startDelaySeconds"] == 0
    assert merged["lowercaseOutputName"] is True


def test_strimzis_example_has_no_quota_rule() -> None:
    rules = load_exporter_config(RULES / "strimzi-kafka-metrics.yaml")["rules"]
    patterns = " ".join(rule["pattern"] for rule in rules)
    assert "user=" not in patterns and "client-id=" not in patterns
    assert "Produce" not in patterns


def test_every_vendored_rule_set_names_its_source() -> None:
    for path in sorted(RULES.iterdir()):
        header = path.read_text(encoding="utf-8").splitlines()[0]
        assert header.startswith("# Vendored unchanged below this header from "), path
        assert "commit " in header, path
        assert load_exporter_config(path)["rules"], path


def test_a_file_of_neither_form_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.yaml"
    path.write_text("kind: ConfigMap\ndata: {other: 1}\n")
    with pytest.raises(SandboxError, match="neither a JMX exporter config"):
        load_exporter_config(path)


def test_recordings_are_query_range_answers_with_a_sidecar() -> None:
    recorded = sorted(RECORDED.glob("*.sidecar.json"))
    assert len(recorded) == 7, recorded
    for sidecar_path in recorded:
        sidecar = json.loads(sidecar_path.read_text())
        answer = json.loads((RECORDED / f"{sidecar['ruleset']}.json").read_text())
        assert answer["status"] == "success"
        assert answer["data"]["resultType"] == "matrix"
        assert len(answer["data"]["result"]) == sidecar["series"]
        assert sidecar["broker_jmxtool"] and sidecar["quotas"]
