"""``quotaform monitor``: the rule file and the dashboard as files, offline.

The builders (stable bytes, what each source gives, the conventions and
their detection from saved Prometheus answers, a custom quota callback), the
command line (manifests, snapshot, ``-``, errors), the Grafana dashboard's
structure (current schema, variables querying Prometheus with
``label_values``, every panel's queries over the recorded series), and the
files ``examples/monitor/`` ships, kept in step with ``examples/manifests``.
What the rules compute is checked by promtool (``test_monitor_promtool.py``)
and on a real broker and Prometheus (``tests/integration/test_monitor_live.py``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from quotaform.analytics.configs import snapshot_lines
from quotaform.analytics.exporters import CONVENTIONS as DECODED
from quotaform.cli.app import app
from quotaform.errors import MonitorError
from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import QuotaIndex
from quotaform.manifest import load_manifests
from quotaform.monitor.conventions import CONVENTIONS, detect, series_labels
from quotaform.monitor.dashboard import (
    SCHEMA_VERSION,
    DashboardOptions,
    build_dashboard,
    dashboard_queries,
    render_dashboard,
)
from quotaform.monitor.rules import (
    ALERT_CALLBACK,
    ENTRY,
    LIMIT,
    RATIO,
    THROTTLE,
    USAGE,
    AlertOptions,
    RuleOptions,
    build_rules,
    prometheus_duration,
    render_rules,
)
from quotaform.plan.enforcement import QuotaEnforcement

ROOT = Path(__file__).resolve().parents[2]
RECORDED = ROOT / "tests" / "fixtures" / "prometheus" / "recorded"
SCENARIO = ROOT / "examples" / "monitor" / "quotas.yaml"
SHIPPED_RULES = ROOT / "examples" / "monitor" / "prometheus" / "quotaform.rules.yaml"
SHIPPED_DASHBOARD = ROOT / "examples" / "monitor" / "grafana" / "quotaform-dashboard.json"
runner = CliRunner()


def scenario() -> QuotaIndex:
    return QuotaIndex(load_manifests([SCENARIO]).quotas)


def rules_text(index: QuotaIndex, **options: Any) -> str:
    return render_rules(build_rules(index, RuleOptions(cluster="c", source="s", **options)))


#: A metric name with its label matchers (quoted values may hold "}" or "(").
SELECTOR = re.compile(r'(?:kafka_server_\w+|quotaform:[\w:]+)(?:\{(?:[^"}]|"(?:[^"\\]|\\.)*")*\})?')


def records(text: str) -> list[dict[str, Any]]:
    document = YAML(typ="safe").load(text)
    return [rule for group in document["groups"] for rule in group["rules"]]


# ------------------------------------------------------------------ the rule file


def test_the_conventions_are_the_ones_analyze_decodes() -> None:
    assert tuple(CONVENTIONS) == DECODED


def test_same_configuration_same_bytes_whatever_the_order() -> None:
    desired = load_manifests([SCENARIO]).quotas
    reversed_order = dict(reversed(list(desired.items())))
    assert rules_text(QuotaIndex(desired)) == rules_text(QuotaIndex(reversed_order))
    assert rules_text(QuotaIndex(desired)) == rules_text(QuotaIndex(desired))


def test_the_entry_table_has_one_series_per_entity_and_key() -> None:
    found = [r for r in records(rules_text(scenario())) if r.get("record") == ENTRY]
    assert len(found) == 10
    alice = next(r for r in found if r["labels"].get("user") == "alice")
    assert alice["expr"] == "vector(262144)"
    assert alice["labels"] == {
        "quota_key": "producer_byte_rate",
        "level": "1",
        "entity": 'user="alice", client-id="alice-app"',
        "user": "alice",
        "client_id": "alice-app",
    }


def test_limits_only_for_keys_an_entity_sets() -> None:
    built = build_rules(scenario(), RuleOptions(cluster="c", source="s"))
    assert built.resolved == (
        "producer_byte_rate",
        "consumer_byte_rate",
        "connection_creation_rate",
    )
    limits = [r for r in records(render_rules(built)) if r.get("record") == LIMIT]
    assert [r["labels"]["quota_key"] for r in limits] == list(built.resolved)
    # the producer ladder: (u,c) groups 1, 2, 4, 5; (u) groups 3, 6; most specific first
    producer = limits[0]["expr"]
    assert re.findall(r'level="(\d)"', producer) == ["1", "2", "4", "5", "3", "6"]
    assert producer.count("or ignoring(level, entity)") == 5
    nothing = build_rules(QuotaIndex({}), RuleOptions(cluster="c", source="s"))
    assert nothing.resolved == () and nothing.entries == 0


def test_a_cluster_label_restricts_every_selector_and_labels_the_table() -> None:
    text = rules_text(scenario(), cluster_label="kafka_cluster", interval_s=30.0)
    document = YAML(typ="safe").load(text)
    assert {g["interval"] for g in document["groups"]} == {"30s"}
    for rule in records(text):
        if rule.get("record") == ENTRY:
            assert rule["labels"]["kafka_cluster"] == "c"
        elif "alert" not in rule or rule["alert"] != ALERT_CALLBACK:
            selectors = [m.group(0) for m in SELECTOR.finditer(rule["expr"])]
            assert selectors and all('kafka_cluster="c"' in s for s in selectors), rule


def test_a_custom_quota_callback_leaves_the_client_keys_without_limits() -> None:
    enforcement = QuotaEnforcement(("1",), {"1": "io.example.Flat"})
    built = build_rules(scenario(), RuleOptions(cluster="c", source="s", enforcement=enforcement))
    assert built.resolved == ("connection_creation_rate",)
    assert built.callback_keys == tuple(k for k in QUOTA_KEYS if k != "connection_creation_rate")
    assert built.entries == 2  # the ip entries only
    alerts = [r for r in records(render_rules(built)) if r.get("alert") == ALERT_CALLBACK]
    assert len(alerts) == 1 and alerts[0]["labels"]["quota_callback"] == "io.example.Flat"
    assert "custom quota callback" in " ".join(built.header)
    unknown = QuotaEnforcement(("1",), {}, {"1": "ClusterAuthorizationFailedError"})
    assert build_rules(scenario(), RuleOptions("c", "s", enforcement=unknown)).callback_keys == ()


def test_alert_options_and_durations() -> None:
    text = rules_text(
        scenario(),
        alerts=AlertOptions(near_limit=0.8, near_limit_for_s=90, throttled_for_s=0.5,
                            labels={"severity": "page"}),
    )  # fmt: skip
    alerts = {r["alert"]: r for r in records(text) if "alert" in r}
    assert alerts["KafkaClientQuotaNearLimit"]["expr"] == f"{RATIO} > 0.8"
    assert alerts["KafkaClientQuotaNearLimit"]["for"] == "90s"
    assert alerts["KafkaClientQuotaThrottled"]["for"] == "500ms"
    assert {a["labels"]["severity"] for a in alerts.values()} == {"page"}
    assert not any(
        "alert" in r for r in records(rules_text(scenario(), alerts=AlertOptions(False)))
    )
    assert [prometheus_duration(s) for s in (600, 3600, 45, 0.25)] == ["10m", "1h", "45s", "250ms"]
    with pytest.raises(ValueError):
        prometheus_duration(0.0001)


def test_bad_options_are_refused() -> None:
    with pytest.raises(MonitorError, match="unknown exporter convention nope"):
        build_rules(scenario(), RuleOptions("c", "s", conventions=("nope",)))
    with pytest.raises(MonitorError, match="near-limit"):
        build_rules(scenario(), RuleOptions("c", "s", alerts=AlertOptions(near_limit=0)))


# ------------------------------------------------------------------ conventions from an answer


def _answer(name: str) -> Any:
    return json.loads((RECORDED / f"{name}.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize(
    ("recording", "conventions"),
    [
        ("ours-strimzi", ("labels",)),
        ("ours-kraft", ("labels",)),
        ("confluent", ("labels",)),
        ("jmx-exporter-2_0_0", ("quota",)),
        ("jmx-exporter-2_0_0-2022", ("quota", "quota-folded")),
    ],
)
def test_conventions_are_detected_from_real_answers(
    recording: str, conventions: tuple[str, ...]
) -> None:
    assert detect(series_labels(_answer(recording))).conventions == conventions


def test_answers_without_readable_quota_series_are_refused() -> None:
    with pytest.raises(MonitorError, match="folded the quota groups' tags into the metric names"):
        detect(series_labels(_answer("kraft")))
    with pytest.raises(MonitorError, match="no quota series"):
        detect(series_labels(_answer("strimzi")))
    with pytest.raises(MonitorError, match="not a Prometheus API answer"):
        series_labels({"status": "success"})


def test_the_series_api_and_kip_1373_are_read() -> None:
    answer = {
        "status": "success",
        "data": [
            {"__name__": "kafka_server_produce_byte_rate", "user": "alice"},
            {"__name__": "kafka_server_produce_quota_utilization", "user": "alice"},
        ],
    }
    found = detect(series_labels(answer))
    assert found.conventions == ("labels",) and found.utilisation == 1


# ------------------------------------------------------------------ the command line


def test_rules_from_manifests_and_from_a_snapshot_are_the_same_rules(tmp_path: Path) -> None:
    out = tmp_path / "rules.yaml"
    first = runner.invoke(app, ["monitor", "rules", str(SCENARIO), "--out", str(out)])
    assert first.exit_code == 0, first.output
    assert "28 rules for cluster 'monitor-sandbox' (10 quota entries" in first.stderr
    text = out.read_text(encoding="utf-8")
    again = runner.invoke(app, ["monitor", "rules", str(SCENARIO), "--out", "-"])
    assert again.exit_code == 0 and again.stdout == text  # same input, same bytes
    snapshot = tmp_path / "quotas.jsonl"
    desired = load_manifests([SCENARIO])
    snapshot.write_text(
        "".join(line + "\n" for line in snapshot_lines("monitor-sandbox", None, desired.quotas))
    )
    from_snapshot = runner.invoke(
        app, ["monitor", "rules", "--snapshot", str(snapshot), "--out", "-"]
    )
    assert from_snapshot.exit_code == 0, from_snapshot.output

    def body(rules: str) -> str:
        return rules[rules.index("groups:") :]

    assert body(from_snapshot.stdout) == body(text)
    header = " ".join(line.lstrip("# ") for line in from_snapshot.stdout.splitlines()[:3])
    assert f"from the snapshot {snapshot} (cluster" in header


def test_a_snapshot_of_several_clusters_needs_cluster(tmp_path: Path) -> None:
    entries = {Entity.of(user="a"): {"producer_byte_rate": 1.0}}
    snapshot = tmp_path / "quotas.jsonl"
    lines = snapshot_lines("one", None, entries) + snapshot_lines("two", None, entries)
    snapshot.write_text("".join(line + "\n" for line in lines))
    refused = runner.invoke(app, ["monitor", "rules", "--snapshot", str(snapshot), "--out", "-"])
    assert refused.exit_code == 1 and "pick one with --cluster NAME" in refused.stderr
    picked = runner.invoke(
        app, ["monitor", "rules", "--snapshot", str(snapshot), "--cluster", "two", "--out", "-"]
    )
    assert picked.exit_code == 0 and "quotaform-entries-two" in picked.stdout


def test_offline_connection_options_are_noted_and_bad_options_refused(tmp_path: Path) -> None:
    noted = runner.invoke(
        app,
        ["monitor", "rules", str(SCENARIO), "--out", "-", "--bootstrap-server", "127.0.0.1:1"],
    )
    assert noted.exit_code == 0
    assert (
        "Note: building the rules from the manifests offline; --bootstrap-server is not used"
        in (" ".join(noted.stderr.split()))
    )
    for args, said in (
        (["--convention", "folded"], "'folded' is not one of"),
        (["--near-limit", "ninety"], "give a ratio (0.9) or a percentage (90%)"),
        (["--near-limit-for", "soon"], "not a duration"),
        (["--alert-label", "severity"], "give NAME=VALUE"),
    ):
        result = runner.invoke(app, ["monitor", "rules", str(SCENARIO), "--out", "-", *args])
        assert result.exit_code == 1, args
        assert said in " ".join(result.output.split()), (args, result.output)
    percent = runner.invoke(
        app, ["monitor", "rules", str(SCENARIO), "--out", "-", "--near-limit", "85%"]
    )
    assert f"{RATIO} > 0.85" in percent.stdout


def test_an_unwritable_out_is_one_error_line(tmp_path: Path) -> None:
    out = tmp_path / "missing" / "rules.yaml"
    for args in (["rules", str(SCENARIO)], ["dashboard"]):
        result = runner.invoke(app, ["monitor", *args, "--out", str(out)])
        assert result.exit_code == 1
        assert result.stderr.startswith("Error: cannot write the ") and str(out) in result.stderr
        assert "No such file or directory" in result.stderr


def test_the_sample_answer_picks_the_conventions(tmp_path: Path) -> None:
    sample = RECORDED / "jmx-exporter-2_0_0-2022.json"
    result = runner.invoke(
        app, ["monitor", "rules", str(SCENARIO), "--out", "-", "--sample", str(sample)]
    )
    assert result.exit_code == 0, result.output
    assert "exporter conventions: quota, quota-folded" in " ".join(result.stdout.split())
    assert "kafka_server_produce_byte_rate" not in result.stdout
    assert f"conventions in {sample}: quota, quota-folded" in " ".join(result.stderr.split())
    refused = runner.invoke(
        app,
        ["monitor", "rules", str(SCENARIO), "--out", "-", "--sample", str(RECORDED / "kraft.json")],
    )
    assert refused.exit_code == 1 and "kafka-kraft-3_0_0.yml catch-all" in refused.stderr


# ------------------------------------------------------------------ the dashboard


def test_the_dashboard_is_a_current_schema_grafana_model() -> None:
    dashboard = build_dashboard(DashboardOptions())
    assert dashboard["schemaVersion"] >= 39 and dashboard["schemaVersion"] == SCHEMA_VERSION
    assert dashboard["uid"] and dashboard["title"] and "templating" in dashboard
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert list(variables) == ["datasource", "cluster", "user", "client_id"]
    assert variables["datasource"]["type"] == "datasource"
    assert variables["datasource"]["query"] == "prometheus"
    for name in ("cluster", "user", "client_id"):
        variable = variables[name]
        assert variable["type"] == "query"
        assert variable["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        assert re.fullmatch(r"label_values\(quotaform:client_quota_usage\{.*\}?, \w+\)|"
                            r"label_values\(quotaform:client_quota_usage, \w+\)",
                            variable["definition"]), variable["definition"]  # fmt: skip
        assert variable["query"]["query"] == variable["definition"]
        assert variable["includeAll"] and variable["allValue"] == ".*"
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    used = set()
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24 and grid["h"] > 0
        if panel["type"] == "row":
            continue
        assert panel["type"] in ("timeseries", "table")
        assert panel["datasource"] == {"type": "prometheus", "uid": "${datasource}"}
        refs = [t["refId"] for t in panel["targets"]]
        assert refs and len(refs) == len(set(refs))
        assert panel["fieldConfig"]["defaults"]["unit"]
        for target in panel["targets"]:
            used |= set(re.findall(r"\$(\w+)", target["expr"]))
            metrics = set(re.findall(r"quotaform:[\w:]+", target["expr"]))
            assert metrics and metrics <= {USAGE, LIMIT, RATIO, THROTTLE}, target["expr"]
    assert used == {"cluster", "user", "client_id"}
    titles = [p["title"] for p in dashboard["panels"]]
    assert "Top quota groups by utilisation (busiest broker)" in titles
    assert "Throttled quota groups" in titles
    for key in QUOTA_KEYS:
        assert f"{key}: usage against the effective limit, per broker" in titles
        assert f"{key}: summed across brokers" in titles


def test_dashboard_options_and_queries() -> None:
    options = DashboardOptions(title="T", uid="u1", cluster_label="kc", broker_label="pod")
    dashboard = build_dashboard(options)
    assert (dashboard["title"], dashboard["uid"]) == ("T", "u1")
    queries = list(dashboard_queries(dashboard))
    assert [q.where for q in queries if q.variable] == [
        "variable cluster", "variable user", "variable client_id",
    ]  # fmt: skip
    assert queries[0].expr == "label_values(quotaform:client_quota_usage, kc)"
    exprs = [q.expr for q in queries if not q.variable]
    assert all('kc=~"$cluster"' in e for e in exprs)
    assert any("pod" in e for e in exprs)
    summed = next(
        p
        for p in dashboard["panels"]
        if p["title"] == "controller_mutation_rate: summed across brokers"
    )
    assert summed["targets"][1]["expr"].startswith("max by")  # the active controller alone
    assert render_dashboard(dashboard) == render_dashboard(build_dashboard(options))


# ------------------------------------------------------------------ what examples/monitor ships


def test_the_shipped_rules_and_dashboard_are_in_step_with_the_manifests() -> None:
    """examples/monitor/ holds what `monitor rules examples/manifests` and
    `monitor dashboard` write, byte for byte (the pull-request pipeline of
    examples/ci/ keeps a repository's copies in step the same way)."""
    rules = runner.invoke(app, ["monitor", "rules", "examples/manifests", "--out", "-"])
    assert rules.exit_code == 0, rules.output
    assert rules.stdout == SHIPPED_RULES.read_text(encoding="utf-8")
    dashboard = runner.invoke(app, ["monitor", "dashboard", "--out", "-"])
    assert dashboard.exit_code == 0, dashboard.output
    assert dashboard.stdout == SHIPPED_DASHBOARD.read_text(encoding="utf-8")
