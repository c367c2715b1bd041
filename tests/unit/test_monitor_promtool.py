"""The rules of ``quotaform monitor rules`` under ``promtool test rules``:
Kafka's resolution done in PromQL from synthetic series, without a broker.

Every case of ``tests/conformance/resolution_cases.yaml`` (each of the eight
user/client-id levels and both ip levels, alone and competing, empty client
ids, unlimited groups) becomes a promtool unit test: its quota configuration
is turned into a rule file, the quota group its principal forms (the case's
expected metric tags: the broker's step 1) into a usage series of every
exporter convention that can carry it, and the limit the rules record must
be the case's value, level and entity, or no series where the case says
unlimited. Then the live scenario's configuration (``examples/monitor/``:
every level at once), KIP-1373's own ratio, the alerts (throttled fires, the
idle group does not; near the limit; a custom quota callback), and
``promtool check rules`` on every variant of the file.

promtool comes from the same cached ``go install`` as Prometheus
(:func:`quotaform.sandbox.prometheus.ensure_promtool`); without it these
tests fail, never skip.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from quotaform.analytics.exporters import (
    CONVENTIONS,
    LABELS,
    QUOTA,
    QUOTA_FOLDED,
    labels_name,
    quota_name,
)
from quotaform.errors import SandboxError
from quotaform.kafka.entity import CLIENT_ID, IP, USER, Entity
from quotaform.kafka.keys import QUOTA_KEYS, KeySpec
from quotaform.kafka.metrics import UTILIZATION_ATTRIBUTE, metric_tag
from quotaform.kafka.resolution import Principal, QuotaIndex, resolve
from quotaform.manifest import load_manifests
from quotaform.monitor.promql import string
from quotaform.monitor.rules import (
    ALERT_CALLBACK,
    ALERT_NEAR_LIMIT,
    ALERT_THROTTLED,
    LIMIT,
    RATIO,
    AlertOptions,
    RuleOptions,
    build_rules,
    render_rules,
)
from quotaform.plan.enforcement import QuotaEnforcement
from tests.conformance.cases import ResolutionCase, load_cases

pytestmark = pytest.mark.prometheus

ROOT = Path(__file__).resolve().parents[2]
SCENARIO = ROOT / "examples" / "monitor" / "quotas.yaml"


@pytest.fixture(scope="module")
def promtool() -> Path:
    from quotaform.sandbox.prometheus import ensure_promtool

    failure = None
    try:
        return ensure_promtool()
    except SandboxError as exc:
        failure = f"No promtool: {exc}"
    pytest.fail(failure, pytrace=False)


def test_promtool_is_built_without_the_kubernetes_client(promtool: Path) -> None:
    """promtool is built from a copy of ``cmd/promtool`` without its one
    ``discovery/kubernetes`` import (quotaform/sandbox/promtool_build.py):
    none of Kubernetes' typed client is linked, the rule tester is, and the
    build stamp says what differs from upstream's."""
    binary = promtool.read_bytes()
    assert b"k8s.io/client-go/kubernetes" not in binary
    assert b"github.com/prometheus/prometheus/promql/promqltest" in binary
    stamp = promtool.with_name("promtool.build").read_text(encoding="utf-8")
    assert stamp.endswith("promtool: cmd/promtool without its kubernetes_sd_configs TLS check\n")
    version = subprocess.run(
        [str(promtool), "--version"], capture_output=True, text=True, timeout=60, check=True
    )
    assert "promtool, version 0.316.0" in version.stdout


def test_the_promtool_copy_drops_the_import_and_its_case_only(tmp_path: Path) -> None:
    from quotaform.sandbox.promtool_build import without_kubernetes

    head = 'import (\n\t"github.com/prometheus/prometheus/discovery/file"\n'
    k8s_import = '\t"github.com/prometheus/prometheus/discovery/kubernetes"\n'
    k8s_case = (
        "\t\t\tcase *kubernetes.SDConfig:\n"
        "\t\t\t\tif err := checkTLSConfig(c.HTTPClientConfig.TLSConfig, checkSyntaxOnly);"
        " err != nil {\n"
        "\t\t\t\t\treturn nil, nil, err\n"
        "\t\t\t\t}\n"
    )
    file_case = "\t\t\tcase *file.SDConfig:\n"
    main = head + k8s_import + ")\n" + k8s_case + file_case
    assert without_kubernetes(main, tmp_path / "main.go") == head + ")\n" + file_case
    with pytest.raises(SandboxError, match=r"main\.go does not import discovery/kubernetes"):
        without_kubernetes(head + ")\n" + file_case, tmp_path / "main.go")
    with pytest.raises(SandboxError):
        without_kubernetes(main + k8s_case, tmp_path / "main.go")


def run_promtool(promtool: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(promtool), *args], cwd=cwd, capture_output=True, text=True, timeout=120, check=False
    )


# ------------------------------------------------------------------ series as exporters write them


def series_text(name: str, labels: Mapping[str, str]) -> str:
    """``name{a="x", ...}`` as promtool's input_series and exp_samples read it."""
    inner = ", ".join(f"{k}={string(v)}" for k, v in sorted(labels.items()))
    return f"{name}{{{inner}}}"


def exported(
    convention: str, spec: KeySpec, attribute: str, user: str, client: str, ip: str
) -> tuple[str, dict[str, str], dict[str, str]] | None:
    """``(metric name, its labels, the labels the rules normalise them to)``
    of one quota group's series in ``convention`` (tags as the broker writes
    them), or ``None`` when the convention cannot carry that group."""
    if IP in spec.entity_types:
        if convention != LABELS:
            return None
        labels = {"ip": ip, "instance": convention}
        return labels_name(spec.sensor, attribute), labels, dict(labels)
    if convention == LABELS:
        labels = {"instance": convention}
        labels.update({k: v for k, v in (("user", user), ("client_id", client)) if v})
        return labels_name(spec.sensor, attribute), labels, dict(labels)
    if convention == QUOTA and (user or client):
        labels = {"resource": spec.sensor, "instance": convention}
        labels.update({k: v for k, v in (("user", user), ("clientId", client)) if v})
        normalised = {**labels, **({"client_id": client} if client else {})}
        return quota_name(attribute), labels, normalised
    if convention == QUOTA_FOLDED and user and client:
        labels = {"resource": f"{spec.sensor}, user={user}", "clientId": client,
                  "instance": convention}  # fmt: skip
        return quota_name(attribute), labels, {**labels, "user": user, "client_id": client}
    return None


def tag_values(tags: Mapping[str, str]) -> tuple[str, str, str]:
    """A case's expected tags (raw names) as the broker writes them."""
    return tuple(  # type: ignore[return-value]
        metric_tag(t, tags[t]) if tags.get(t) else "" for t in (USER, CLIENT_ID, IP)
    )


def case_test(case: ResolutionCase, rules: str) -> dict[str, Any]:
    """A promtool test for ``case``: one usage series per recorded key and
    convention (value: half the expected quota), and the limit and ratio
    series expected from them."""
    inputs, limits, ratios = [], [], []
    for key, expect in case.expect.items():
        if not expect["recorded"]:
            continue
        spec = QUOTA_KEYS[key]
        user, client, ip = tag_values(expect["tags"])
        usage = expect["value"] / 2 if expect["value"] is not None else 1.0
        for convention in CONVENTIONS:
            found = exported(convention, spec, spec.metric, user, client, ip)
            if found is None:
                continue
            name, labels, normalised = found
            inputs.append({"series": series_text(name, labels), "values": f"{usage}x3"})
            if expect["value"] is None:
                continue
            entity = Entity.from_mapping(expect["entity"]).label()
            out = {**normalised, "quota_key": key, "level": str(expect["level"]), "entity": entity}
            limits.append({"labels": series_text(LIMIT, out), "value": expect["value"]})
            ratios.append(
                {"labels": series_text(RATIO, {**out, "source": "quotaform"}), "value": 0.5}
            )
    return {
        "rule_files": [rules],
        "evaluation_interval": "1m",
        "tests": [
            {
                "name": case.name,
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [
                    {"expr": LIMIT, "eval_time": "2m", "exp_samples": limits},
                    {"expr": RATIO, "eval_time": "2m", "exp_samples": ratios},
                ],
            }
        ],
    }


CASES = load_cases()


def test_every_conformance_case_is_resolved_in_promql_as_kafka_does(
    promtool: Path, tmp_path: Path
) -> None:
    """27 cases, every level and both ip levels, three exporter conventions:
    one promtool run over one test file per case."""
    files, levels = [], set()
    for number, case in enumerate(CASES):
        rules = tmp_path / f"rules-{number}.yaml"
        options = RuleOptions(cluster=f"case-{number}", source=case.name)
        rules.write_text(render_rules(build_rules(QuotaIndex(case.entries), options)))
        test = tmp_path / f"test-{number}.yaml"
        test.write_text(json.dumps(case_test(case, rules.name), indent=1))
        files.append(test.name)
        for key, expect in case.expect.items():
            if expect["value"] is not None:
                levels.add(
                    ("ip" if IP in QUOTA_KEYS[key].entity_types else "client", expect["level"])
                )
    assert levels == {("client", n) for n in range(1, 9)} | {("ip", 1), ("ip", 2)}
    done = run_promtool(promtool, "test", "rules", *files, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    assert done.stdout.count("SUCCESS") == len(files), done.stdout[-3000:]


# ------------------------------------------------------------------ the live scenario, offline


#: (user, client id) of the live scenario's clients and the keys they use.
SCENARIO_CLIENTS = (
    ("alice", "alice-app", "producer_byte_rate"),
    ("bob", "bob-app", "producer_byte_rate"),
    ("carol", "carol-app", "producer_byte_rate"),
    ("dave", "dave-app", "producer_byte_rate"),
    ("erin", "erin-app", "producer_byte_rate"),
    ("dave", "", "producer_byte_rate"),
    ("bob", "reader-7", "consumer_byte_rate"),
    ("carol", "reader-8", "consumer_byte_rate"),
    ("dave", "", "consumer_byte_rate"),
)


def scenario_groups(index: QuotaIndex) -> Iterator[tuple[str, Principal, Any]]:
    for user, client, key in SCENARIO_CLIENTS:
        principal = Principal(user=user, client_id=client)
        yield key, principal, resolve(index, principal, key)
    for ip in ("127.0.0.1", "127.0.0.2"):
        principal = Principal(ip=ip)
        yield (
            "connection_creation_rate",
            principal,
            resolve(index, principal, "connection_creation_rate"),
        )


def test_the_live_scenario_every_level_at_once(promtool: Path, tmp_path: Path) -> None:
    """examples/monitor/quotas.yaml sets every level at once: each client's
    group (its tags from Kafka's step 1, :func:`resolve`) gets the limit,
    level and entity ``explain`` gives it; the empty group (dave's consumer,
    no quota) gets no limit."""
    desired = load_manifests([SCENARIO])
    index = QuotaIndex(desired.quotas)
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        render_rules(build_rules(index, RuleOptions(cluster="monitor-sandbox", source="test")))
    )
    inputs, limits, seen = [], [], set()
    for key, _principal, resolution in scenario_groups(index):
        tags = resolution.tags
        group = (key, tags.user, tags.client_id, tags.ip)
        if group in seen:
            continue
        seen.add(group)
        spec = QUOTA_KEYS[key]
        user, client, ip = tag_values(tags.as_dict())
        name, labels, normalised = exported(LABELS, spec, spec.metric, user, client, ip) or (
            "",
            {},
            {},
        )
        inputs.append({"series": series_text(name, labels), "values": "1000x3"})
        if resolution.value is not None:
            out = {**normalised, "quota_key": key, "level": str(resolution.level.number),
                   "entity": resolution.entity.label()}  # fmt: skip
            limits.append({"labels": series_text(LIMIT, out), "value": resolution.value})
    levels = {(k, r.level.number) for k, _, r in scenario_groups(index) if r.level}
    assert {n for k, n in levels if k != "connection_creation_rate"} == set(range(1, 9))
    assert {n for k, n in levels if k == "connection_creation_rate"} == {1, 2}
    assert ("consumer_byte_rate", "", "", "") in seen  # the empty group: no quota, no limit
    test = {
        "rule_files": [rules.name],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": inputs,
                "promql_expr_test": [{"expr": LIMIT, "eval_time": "2m", "exp_samples": limits}],
            }
        ],
    }
    (tmp_path / "test.yaml").write_text(json.dumps(test, indent=1))
    done = run_promtool(promtool, "test", "rules", "test.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


# ------------------------------------------------------------------ KIP-1373, alerts, callback


def _rule_file(
    tmp_path: Path, entries: Mapping[Entity, Mapping[str, float]], **options: Any
) -> str:
    rules = tmp_path / "rules.yaml"
    rules.write_text(
        render_rules(
            build_rules(QuotaIndex(entries), RuleOptions(cluster="c", source="test", **options))
        )
    )
    return rules.name


def sample(name: str, labels: Mapping[str, str], value: float) -> dict[str, Any]:
    return {"labels": series_text(name, labels), "value": value}


def limited(base: Mapping[str, str], key: str, level: int, entity: str) -> dict[str, str]:
    """The labels of ``base``'s limit series."""
    return {**base, "quota_key": key, "level": str(level), "entity": entity}


def check_test(
    promtool: Path,
    tmp_path: Path,
    rules: str,
    inputs: list[tuple[str, Mapping[str, str], str]],
    *,
    exprs: list[dict[str, Any]] = (),  # type: ignore[assignment]
    alerts: list[dict[str, Any]] = (),  # type: ignore[assignment]
) -> None:
    """Run one promtool unit test over ``rules`` (``inputs``: name, labels,
    promtool values) and assert it passes."""
    test: dict[str, Any] = {
        "interval": "1m",
        "input_series": [
            {"series": series_text(n, labels), "values": v} for n, labels, v in inputs
        ],
    }
    if exprs:
        test["promql_expr_test"] = list(exprs)
    if alerts:
        test["alert_rule_test"] = list(alerts)
    document = {"rule_files": [rules], "evaluation_interval": "1m", "tests": [test]}
    (tmp_path / "test.yaml").write_text(json.dumps(document, indent=1))
    done = run_promtool(promtool, "test", "rules", "test.yaml", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]


ALICE = {"user": "alice", "client_id": "app", "instance": "b1"}
IDLE = {"user": "idle", "client_id": "app", "instance": "b1"}
DEFAULTS = Entity.of(user=None, client_id=None)
PRODUCE = labels_name("Produce", "byte-rate")
NAN = " ".join(["NaN"] * 21)


def test_kip_1373_quota_utilization_is_used_where_a_broker_exports_it(
    promtool: Path, tmp_path: Path
) -> None:
    """The broker's own ratio (quota-utilization / 100) wins over usage /
    limit and says so (source="kip-1373"); NaN (no quota) is not a ratio."""
    rules = _rule_file(tmp_path, {DEFAULTS: {"producer_byte_rate": 1000}})
    reported = labels_name("Produce", UTILIZATION_ATTRIBUTE)
    inputs = [
        (PRODUCE, ALICE, "300x3"),
        (reported, ALICE, "42x3"),
        (PRODUCE, IDLE, "100x3"),
        (reported, IDLE, NAN),
    ]
    entity = DEFAULTS.label()
    expected = [
        sample(
            RATIO, {**limited(ALICE, "producer_byte_rate", 5, entity), "source": "kip-1373"}, 0.42
        ),
        sample(
            RATIO, {**limited(IDLE, "producer_byte_rate", 5, entity), "source": "quotaform"}, 0.1
        ),
    ]
    exprs = [{"expr": RATIO, "eval_time": "2m", "exp_samples": expected}]
    check_test(promtool, tmp_path, rules, inputs, exprs=exprs)


def test_the_throttled_group_alerts_and_the_idle_one_does_not(
    promtool: Path, tmp_path: Path
) -> None:
    """Throttled for 5 minutes fires (with the group's level and entity), near
    the limit for 10 minutes fires; an idle group never does; the labels of
    --alert-label are on every alert."""
    rules = _rule_file(
        tmp_path,
        {DEFAULTS: {"producer_byte_rate": 1000}},
        alerts=AlertOptions(labels={"team": "platform"}),
    )
    throttle = labels_name("Produce", "throttle-time")
    inputs = [
        (PRODUCE, ALICE, "990x20"),
        (throttle, ALICE, "120x20"),
        (PRODUCE, IDLE, "0x20"),
        (throttle, IDLE, NAN),
    ]
    labels = {
        **limited(ALICE, "producer_byte_rate", 5, DEFAULTS.label()),
        "severity": "warning",
        "team": "platform",
    }
    throttled = {
        "summary": "A Kafka quota group is throttled (producer_byte_rate)",
        "description": (
            "The broker b1 has throttled the quota group user=alice client-id=app for 5m: 120 ms "
            "per throttled response on average, for its producer_byte_rate quota, quota from "
            "user=<default>, client-id=<default> (level 5)."
        ),
    }
    near = {
        "summary": "A Kafka quota group runs near its producer_byte_rate quota",
        "description": (
            "The quota group user=alice client-id=app on b1 has used 99% of its "
            "producer_byte_rate quota for 10m, quota from user=<default>, client-id=<default> "
            "(level 5). The quota is a limit per broker; `quotaform explain` names every client "
            "that shares it."
        ),
    }
    alerts = [
        {"eval_time": "4m", "alertname": ALERT_THROTTLED, "exp_alerts": []},
        {
            "eval_time": "6m",
            "alertname": ALERT_THROTTLED,
            "exp_alerts": [{"exp_labels": labels, "exp_annotations": throttled}],
        },
        {"eval_time": "9m", "alertname": ALERT_NEAR_LIMIT, "exp_alerts": []},
        {
            "eval_time": "11m",
            "alertname": ALERT_NEAR_LIMIT,
            "exp_alerts": [
                {"exp_labels": {**labels, "source": "quotaform"}, "exp_annotations": near}
            ],
        },
    ]
    check_test(promtool, tmp_path, rules, inputs, alerts=alerts)


def test_a_custom_quota_callback_gets_no_limit_and_an_alert_saying_why(
    promtool: Path, tmp_path: Path
) -> None:
    """Under a KIP-257 callback the user/client-id keys get no limit series
    (the resolution does not apply); ip quotas still do; the callback alert
    fires at once, naming the class and the brokers."""
    enforcement = QuotaEnforcement(("1", "2"), {"1": "io.example.Flat", "2": "io.example.Flat"})
    entries = {
        Entity.of(user=None): {"producer_byte_rate": 1000},
        Entity.of(ip=None): {"connection_creation_rate": 5},
    }
    rules = _rule_file(tmp_path, entries, enforcement=enforcement)
    accept = labels_name("socket-server-metrics", "connection-accept-rate")
    ip = {"ip": "10.0.0.1", "instance": "b1"}
    inputs = [(PRODUCE, {"user": "alice", "instance": "b1"}, "5x3"), (accept, ip, "1x3")]
    limit = sample(LIMIT, limited(ip, "connection_creation_rate", 2, "ip=<default>"), 5)
    description = (
        "Brokers 1, 2 set client.quota.callback.class=io.example.Flat (KIP-257): that class "
        "decides the quota groups and limits of producer_byte_rate, consumer_byte_rate, "
        "request_percentage, controller_mutation_rate, not Kafka's default resolution of the "
        "stored quotas, so these rules record no quotaform:client_quota_limit and no "
        "utilisation for them (usage and throttling are still recorded, and ip quotas are "
        "resolved: the callback never decides them). Ask the callback's configuration what a "
        "client really gets."
    )
    fired = {
        "exp_labels": {"severity": "info", "quota_callback": "io.example.Flat", "brokers": "1, 2"},
        "exp_annotations": {
            "summary": "Kafka brokers 1, 2 use a custom quota callback: quotaform's limits do not "
            "apply there",
            "description": description,
        },
    }
    check_test(
        promtool,
        tmp_path,
        rules,
        inputs,
        exprs=[{"expr": LIMIT, "eval_time": "2m", "exp_samples": [limit]}],
        alerts=[{"eval_time": "1m", "alertname": ALERT_CALLBACK, "exp_alerts": [fired]}],
    )


# ------------------------------------------------------------------ promtool check rules


VARIANTS: dict[str, dict[str, Any]] = {
    "defaults": {},
    "cluster label and interval": {"cluster_label": "kafka_cluster", "interval_s": 30.0},
    "one convention, no alerts": {"conventions": (QUOTA,), "alerts": AlertOptions(enabled=False)},
    "callback": {"enforcement": QuotaEnforcement(("1",), {"1": "io.example.Flat"})},
}


@pytest.mark.parametrize("variant", VARIANTS, ids=list(VARIANTS))
def test_promtool_check_rules_is_clean(promtool: Path, tmp_path: Path, variant: str) -> None:
    desired = load_manifests([SCENARIO])
    strange = {
        Entity.of(user='CN=a,O="x"', client_id="app:1,x*y"): {"producer_byte_rate": 1.5},
        Entity.of(ip="2001:db8::10"): {"connection_creation_rate": 7},
    }
    rules = _rule_file(tmp_path, {**desired.quotas, **strange}, **VARIANTS[variant])
    done = run_promtool(promtool, "check", "rules", rules, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout and "lint" not in (done.stdout + done.stderr).lower()


def test_names_with_quotes_commas_and_ipv6_join_as_the_broker_writes_them(
    promtool: Path, tmp_path: Path
) -> None:
    """The entry table holds the tags as the broker writes them (user
    URL-encoded, JMX quoting, IPv6 in full), so such groups still resolve."""
    user, client = 'CN=a,O="x"', "app:1,x*y"
    pair = Entity.of(user=user, client_id=client)
    entries = {
        pair: {"producer_byte_rate": 1500},
        Entity.of(ip="2001:db8::10"): {"connection_creation_rate": 7},
    }
    rules = _rule_file(tmp_path, entries)
    group = {
        "user": metric_tag(USER, user),
        "client_id": metric_tag(CLIENT_ID, client),
        "instance": "b",
    }
    ip = {"ip": metric_tag(IP, "2001:db8::10"), "instance": "b"}
    assert group["user"] == "CN%3Da%2CO%3D%22x%22" and group["client_id"] == '"app:1,x\\*y"'
    assert ip["ip"] == '"2001:db8:0:0:0:0:0:10"'
    accept = labels_name("socket-server-metrics", "connection-accept-rate")
    expected = [
        sample(LIMIT, limited(group, "producer_byte_rate", 1, pair.label()), 1500),
        sample(LIMIT, limited(ip, "connection_creation_rate", 1, 'ip="2001:db8::10"'), 7),
    ]
    check_test(
        promtool,
        tmp_path,
        rules,
        [(PRODUCE, group, "10x3"), (accept, ip, "1x3")],
        exprs=[{"expr": LIMIT, "eval_time": "2m", "exp_samples": expected}],
    )
