"""explain: the engine's answers with provenance, quota groups, overrides and
unknown names; shadowing warnings (never a false positive); probes in plans,
drift and saved plans; the JSON contract; the CLI offline."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.formats.explain import explain_document, render_explain_json
from quotaform.formats.plan import PlanDocument, plan_from_document, render_json
from quotaform.formats.planfile import read_plan_file, write_plan_file
from quotaform.formats.schemas import SCHEMAS
from quotaform.kafka.entity import Entity
from quotaform.kafka.metrics import jmx_quote, jmx_unquote, mbean_name, sanitize_user
from quotaform.kafka.resolution import (
    MetricTags,
    Principal,
    QuotaIndex,
    ShadowKind,
    resolve,
    shadows,
)
from quotaform.manifest import load_manifests
from quotaform.plan.drift import compute_drift
from quotaform.plan.explain import explain, explain_change
from quotaform.plan.state import Probe, SourceLocation
from quotaform.render.explain import render_explain_text
from quotaform.render.text import render_markdown, render_text

from .builders import assert_plan_data_is_its_model, desired_state, live_state, reviewed

MiB = 1024 * 1024
U, C = "svc-a", "ingest"
runner = CliRunner()

CONFIG = {
    Entity.of(user=U, client_id=None): {"producer_byte_rate": 10 * MiB},  # level 2
    Entity.of(user=None): {"producer_byte_rate": 1 * MiB, "consumer_byte_rate": 2 * MiB},  # 6
    Entity.of(client_id=None): {"request_percentage": 200.0},  # level 8
    Entity.of(user=U, client_id="batch"): {"producer_byte_rate": 3 * MiB},  # level 1
}


def test_each_key_from_its_own_level_with_its_quota_group() -> None:
    got = explain(QuotaIndex(CONFIG), Principal(user=U, client_id=C)).keys
    producer = got["producer_byte_rate"].resolution
    assert (producer.value, producer.level and producer.level.number) == (10 * MiB, 2)
    assert producer.tags == MetricTags(user=U, client_id=C)
    consumer = got["consumer_byte_rate"].resolution
    assert (consumer.level and consumer.level.number, consumer.tags) == (
        6,
        MetricTags(user=U, client_id=""),
    )
    request = got["request_percentage"].resolution
    assert (request.level and request.level.number, request.tags) == (
        8,
        MetricTags(user="", client_id=C),
    )
    assert got["controller_mutation_rate"].resolution.unlimited
    assert not got["controller_mutation_rate"].resolution.recorded


def test_include_overrides_lists_the_less_specific_matches() -> None:
    got = explain(QuotaIndex(CONFIG), Principal(user=U, client_id=C), include_overrides=True)
    overridden = got.keys["producer_byte_rate"].overridden
    assert [(m.level.number, m.entity, m.value) for m in overridden] == [
        (6, Entity.of(user=None), 1 * MiB)
    ]
    assert (
        explain(QuotaIndex(CONFIG), Principal(user=U, client_id=C))
        .keys["producer_byte_rate"]
        .overridden
        == ()
    )


def test_an_unknown_client_id_lists_the_entries_that_depend_on_it() -> None:
    got = explain(QuotaIndex(CONFIG), Principal(user=U)).keys["producer_byte_rate"]
    assert got.resolution.value == 10 * MiB  # a client id without entries of its own
    assert [(m.level.number, m.entity) for m in got.variants] == [
        (1, Entity.of(user=U, client_id="batch"))
    ]
    text = render_explain_text(explain(QuotaIndex(CONFIG), Principal(user=U)), where="t").plain
    assert "client-id unknown" in text and 'client-id="batch"' in text


def test_a_name_no_entry_matches_is_unlimited_said_plainly() -> None:
    explanation = explain(QuotaIndex({}), Principal(user="nobody", client_id="x"))
    assert explanation.unlimited
    text = render_explain_text(explanation, where="t").plain
    assert 'No entry applies to user="nobody", client-id="x": every quota key is unlimited' in text


def test_the_json_keeps_the_contract_and_validates() -> None:
    explanation = explain(QuotaIndex(CONFIG), Principal(user=U, client_id=C))
    data = json.loads(render_explain_json(explain_document(explanation, source="manifests")))
    jsonschema.validate(data, SCHEMAS["explain.schema.json"]())
    assert data["format_version"] == 1
    assert data["principal"] == {"user": U, "client-id": C}
    assert set(data["quotas"]) == {
        "producer_byte_rate",
        "consumer_byte_rate",
        "request_percentage",
        "controller_mutation_rate",
    }
    producer = data["quotas"]["producer_byte_rate"]
    assert {k: producer[k] for k in ("value", "level", "entity", "metric_tags")} == {
        "value": 10 * MiB,
        "level": 2,
        "entity": {"user": U, "client-id": None},
        "metric_tags": {"user": U, "client-id": C},
    }
    assert producer["mbean"] == f"kafka.server:type=Produce,user={U},client-id={C}"
    unlimited = data["quotas"]["controller_mutation_rate"]
    assert (unlimited["value"], unlimited["level"], unlimited["entity"]) == (None, None, None)
    ip = explain(
        QuotaIndex({Entity.of(ip=None): {"connection_creation_rate": 20.0}}),
        Principal(ip="192.0.2.10"),
    )
    data = json.loads(render_explain_json(explain_document(ip, source="cluster")))
    assert data["principal"] == {"ip": "192.0.2.10"}
    assert data["quotas"]["connection_creation_rate"]["level"] == 2
    assert data["quotas"]["connection_creation_rate"]["metric_tags"] == {"ip": "192.0.2.10"}


def test_metric_names_follow_kafkas_sanitizers() -> None:
    assert sanitize_user("CN=alice,O=x") == "CN%3Dalice%2CO%3Dx"
    assert sanitize_user("a b*~") == "a%20b%2A%7E"
    assert mbean_name("producer_byte_rate", MetricTags("alice", "app:1,x*y")) == (
        'kafka.server:type=Produce,user=alice,client-id="app:1,x\\*y"'
    )
    assert mbean_name("consumer_byte_rate", MetricTags("u", "")) == "kafka.server:type=Fetch,user=u"
    assert mbean_name("connection_creation_rate", MetricTags("", "", "2001:db8::10")) == (
        'kafka.server:type=socket-server-metrics,ip="2001:db8:0:0:0:0:0:10"'
    )
    assert mbean_name("producer_byte_rate", MetricTags("u", None)) is None
    for raw in ("plain", 'a"b', "x*y?z", "back\\slash", "new\nline"):
        assert jmx_unquote(jmx_quote(raw)) == raw


# ----------------------------------------------------------------- shadowing

_USERS, _CLIENTS = ["a", "b"], ["x", "y"]
_SHAPES = [
    *(Entity.of(user=u) for u in [*_USERS, None]),
    *(Entity.of(user=u, client_id=c) for u in [*_USERS, None] for c in [*_CLIENTS, None]),
    *(Entity.of(client_id=c) for c in [*_CLIENTS, None]),
]
_KEYS = ["producer_byte_rate", "request_percentage"]
# Every name the configurations use, one they do not, and the empty client id:
# a complete universe (any other name behaves like "zz" / "ww").
_UNIVERSE = [Principal(user=u, client_id=c) for u in [*_USERS, "zz"] for c in [*_CLIENTS, "ww", ""]]


@settings(max_examples=400, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from(_SHAPES),
        st.dictionaries(st.sampled_from(_KEYS), st.integers(1, 9).map(float), min_size=1),
        min_size=1,
        max_size=8,
    )
)
def test_a_shadow_warning_is_never_a_false_positive(config: dict[Entity, dict[str, float]]) -> None:
    index = QuotaIndex(config)
    flagged = {(s.entity, s.key): s for s in shadows(index)}
    for entity, quotas in config.items():
        for key in quotas:
            winners = [p for p in _UNIVERSE if resolve(index, p, key).entity == entity]
            shadow = flagged.get((entity, key))
            if shadow is None:
                continue
            if shadow.kind is ShadowKind.NEVER:
                assert winners == [], (shadow, winners)
            else:
                assert winners and all(p.client_id == "" for p in winners), (shadow, winners)


def _write(tmp_path: Path, quotas: str) -> Path:
    path = tmp_path / "m.yaml"
    path.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\n"
        "spec:\n  scope: [{shape: user}, {shape: client-id}, {shape: user+client-id}]\n"
        f"  quotas:\n{quotas}",
        encoding="utf-8",
    )
    return path


def test_each_shadow_kind_is_one_warning_naming_the_winner(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "    - entity: {user: {default: true}}\n      values: {consumer_byte_rate: 2MiB}\n"
        "    - entity: {client-id: app}\n      values: {consumer_byte_rate: 1MiB}\n"
        "    - entity: {user: svc, client-id: {default: true}}\n"
        "      values: {producer_byte_rate: 1MiB}\n"
        "    - entity: {user: svc}\n      values: {producer_byte_rate: 2MiB}\n"
        "    - entity: {user: {default: true}, client-id: web}\n"
        "      values: {request_percentage: 50}\n"
        "    - entity: {client-id: web}\n      values: {request_percentage: 80}\n",
    )
    warnings = load_manifests([path]).warnings
    assert warnings == (
        f'{path}:9: values.consumer_byte_rate: client-id="app" never applies to anyone for '
        f"consumer_byte_rate: user=<default> ({path}:7) sets it too, and every connection has a "
        "user (ANONYMOUS at least), so Kafka resolves consumer_byte_rate at that user level "
        'first and never looks up client-id="app"',
        f'{path}:13: values.producer_byte_rate: user="svc" applies to producer_byte_rate only '
        f'for connections that send no client id: user="svc", client-id=<default> ({path}:11) '
        "sets it for every connection with one",
        f'{path}:17: values.request_percentage: client-id="web" never applies to anyone for '
        f'request_percentage: user=<default>, client-id="web" ({path}:15) sets it too, and every '
        "connection has a user (ANONYMOUS at least), so Kafka resolves request_percentage at "
        'that user level first and never looks up client-id="web"',
    )


def test_no_warning_where_keys_differ(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "    - entity: {user: {default: true}}\n      values: {producer_byte_rate: 2MiB}\n"
        "    - entity: {client-id: app}\n      values: {consumer_byte_rate: 1MiB}\n",
    )
    assert load_manifests([path]).warnings == ()


# ----------------------------------------------------------------- probes


def _probe(**names: str) -> Probe:
    principal = (
        Principal(ip=names["ip"])
        if "ip" in names
        else Principal(user=names.get("user"), client_id=names.get("client_id"))
    )
    return Probe(principal, SourceLocation("m.yaml", 40))


def test_a_plan_shows_the_probes_it_moves_and_says_so_when_none() -> None:
    live = {Entity.of(client_id=None): {"producer_byte_rate": 256 * 1024.0}}
    desired = desired_state(
        {**live, Entity.of(user=None): {"producer_byte_rate": 512 * 1024.0}},
        probes=[_probe(user="ANONYMOUS", client_id="app"), _probe(ip="192.0.2.10")],
    )
    plan, review = reviewed(desired, live)
    moved, untouched = review.probes
    assert not untouched.affected
    (change,) = moved.keys
    assert (change.key, change.value_changed, change.group_changed) == (
        "producer_byte_rate",
        True,
        True,
    )
    text = render_text(plan, review).plain
    assert "Probes: 1 of 2 declared probe(s) affected." in text
    assert "quota group moves: client-id=app -> user=ANONYMOUS" in text
    assert "| producer_byte_rate |" not in render_markdown(plan, review)  # code span
    assert "moves: client-id=app → user=ANONYMOUS" in render_markdown(plan, review)
    same, same_review = reviewed(desired, desired.quotas)
    assert (
        "Probes: none of the 2 declared probe(s) is affected."
        in render_text(same, same_review).plain
    )


def test_probes_see_entities_outside_the_scope() -> None:
    # {user=<default>} lives outside a scope that owns only client-id entities:
    # it still decides the probe's quota, before and after.
    from quotaform.plan.state import Scope, ScopeRule

    scope = Scope.build([ScopeRule.build(("client-id",))])
    desired = desired_state(
        {Entity.of(client_id=None): {"producer_byte_rate": 1024.0}},
        scope=scope,
        probes=[_probe(user="u", client_id="c")],
    )
    live = live_state(
        {},
        outside={Entity.of(user=None): {"producer_byte_rate": 4096.0}},
        unmanaged_by_shape={"user": 1, "client-id": 0, "user+client-id": 0, "ip": 0},
    )
    _, review = reviewed(desired, live)
    (impact,) = review.probes
    assert not impact.affected  # level 6 wins before and after: the new level 8 never applies


def test_saved_plans_and_drift_carry_the_probe_view(tmp_path: Path) -> None:
    live = {Entity.of(client_id=None): {"producer_byte_rate": 256 * 1024.0}}
    desired = desired_state(
        {**live, Entity.of(user=None): {"producer_byte_rate": 512 * 1024.0}},
        probes=[_probe(user="ANONYMOUS", client_id="app")],
    )
    plan, review = reviewed(desired, live)
    path = tmp_path / "plan.json"
    write_plan_file(plan, review, path)
    again_plan, again = read_plan_file(path)
    assert again.probes == review.probes
    assert render_text(again_plan, again).plain == render_text(plan, review).plain
    doc = json.loads(render_json(plan, review))
    assert_plan_data_is_its_model(plan, review)
    assert doc["probes"][0]["keys"]["producer_byte_rate"]["group_changed"] is True
    assert plan_from_document(PlanDocument.model_validate(doc))[1].probes == review.probes
    drift = compute_drift(desired, live_state(live))
    (impact,) = drift.probes
    (change,) = impact.keys
    # drift reads declared -> live
    assert change.before.resolution.value == 512 * 1024.0
    assert change.after.resolution.value == 256 * 1024.0


def test_explain_change_side_by_side() -> None:
    before = QuotaIndex({Entity.of(client_id=None): {"producer_byte_rate": 1024.0}})
    after = QuotaIndex(
        {
            Entity.of(client_id=None): {"producer_byte_rate": 1024.0},
            Entity.of(user="u", client_id="c"): {"producer_byte_rate": 2048.0},
        }
    )
    was, now, changed = explain_change(before, after, Principal(user="u", client_id="c"))
    producer = next(c for c in changed if c.key == "producer_byte_rate")
    assert (producer.value_changed, producer.source_changed, producer.group_changed) == (
        True,
        True,
        True,
    )
    text = render_explain_text(now, where="t", before=was, changed=changed).plain
    assert "The plan changes 1 of 4 quota key(s) for this client." in text


# ----------------------------------------------------------------- the CLI, offline


def test_explain_cli_on_manifests_and_a_saved_plan(tmp_path: Path) -> None:
    manifests = Path(__file__).resolve().parents[2] / "examples" / "manifests"
    result = runner.invoke(
        app,
        ["explain", str(manifests), "--user", "svc-payments-api", "--client-id", "payments-api"],
    )
    assert result.exit_code == 0, result.output
    assert (  # wrapped at 80 columns, the continuation under its text (issue 23)
        '  producer_byte_rate        10MiB from user="svc-payments-api",\n'
        '                              client-id="payments-api"\n' in result.stdout
    )
    as_json = runner.invoke(app, ["explain", str(manifests), "--ip", "192.0.2.10", "-o", "json"])
    assert json.loads(as_json.stdout)["quotas"]["connection_creation_rate"]["value"] == 100
    bad = runner.invoke(app, ["explain", str(manifests), "--ip", "10.0.0.0/8"])
    assert bad.exit_code == 1 and "CIDR" in bad.output
    neither = runner.invoke(app, ["explain", str(manifests)])
    assert neither.exit_code == 1 and "--user U and/or --client-id C" in neither.output
    both = runner.invoke(app, ["explain", str(manifests), "--ip", "192.0.2.1", "--user", "u"])
    assert both.exit_code == 1
