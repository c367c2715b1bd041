"""How the brokers enforce quotas, said wherever quotaform resolves them: per
broker ("on each of N brokers"), and, with a custom quota callback
(``client.quota.callback.class``, KIP-257), that the resolution shown is
Kafka's default, not what the brokers enforce, the class named; brokers that
disagree or could not be read are said too, never taken for "no callback".
(The same against a real broker with a callback: tests/integration/
test_quota_callback.py.)"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import jsonschema
import pytest

from quotaform.analytics.configs import QuotaConfig
from quotaform.analytics.report import enforcement_warnings
from quotaform.formats.explain import explain_document, render_explain_json
from quotaform.formats.plan import PlanDocument, plan_from_document, render_json
from quotaform.formats.planfile import read_plan_file, write_plan_file
from quotaform.formats.schemas import SCHEMAS
from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import Principal, QuotaIndex
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.explain import explain
from quotaform.plan.state import Probe, SourceLocation
from quotaform.render.explain import probe_text, render_explain_markdown, render_explain_text
from quotaform.render.text import render_markdown, render_text
from quotaform.words import enforcement_warning, per_broker_sentence, per_broker_text

from .builders import assert_plan_data_is_its_model, desired_state, reviewed

FLAT = "io.example.FlatQuotaCallback"
DENIED = "ClusterAuthorizationFailedError: Cluster authorization failed."
MiB = 1024 * 1024
CLIENT = Principal(user="alice", client_id="ingest")

DEFAULT_3 = QuotaEnforcement(("1", "2", "3"), {"1": None, "2": None, "3": None})
CALLBACK_1 = QuotaEnforcement(("1",), {"1": FLAT})
DISAGREE = QuotaEnforcement(("1", "2", "3"), {"1": FLAT, "2": FLAT, "3": None})
REFUSED = QuotaEnforcement(("1", "2"), {"1": None}, {"2": DENIED})


def test_from_configs_keeps_each_broker_and_every_error() -> None:
    values = {"1": {"client.quota.callback.class": FLAT}, "2": {"client.quota.callback.class": ""}}
    found = QuotaEnforcement.from_configs(["1", "2", "3", "4"], values, {"3": DENIED})
    assert found.callbacks == {"1": FLAT, "2": None}  # "" is not set
    assert found.unreadable == {"3": DENIED, "4": "no answer"}  # never "no callback"
    assert (found.count, found.quota_callback, found.agree) == (4, FLAT, False)


@pytest.mark.parametrize(
    ("enforcement", "enforced"),
    [
        (DEFAULT_3, True),
        (CALLBACK_1, False),
        (DISAGREE, False),
        (REFUSED, None),
        (replace(REFUSED, callbacks={"1": FLAT}), False),
        (QuotaEnforcement(()), None),
    ],
)
def test_resolution_enforced_is_true_false_or_unknown(
    enforcement: QuotaEnforcement, enforced: bool | None
) -> None:
    assert enforcement.resolution_enforced is enforced
    client_keys = [k for k, s in QUOTA_KEYS.items() if s.callback_type is not None]
    assert enforcement.enforced_for(client_keys) is enforced
    # ConnectionQuotas never asks the callback: ip quotas are enforced as resolved.
    assert enforcement.enforced_for(["connection_creation_rate"]) is True
    assert enforcement.enforced_for_principal(Principal(ip="192.0.2.10")) is True
    assert enforcement.enforced_for_principal(CLIENT) is enforced


def test_the_per_broker_wording_takes_the_number_of_brokers() -> None:
    assert per_broker_text(3) == "on each of 3 brokers"
    assert per_broker_text(1) == "on the cluster's 1 broker"
    assert per_broker_sentence(3) == (
        "Quotas are limits per broker, enforced on each of 3 brokers: a client that reaches "
        "all of them can use up to 3 times each value."
    )
    assert (
        per_broker_sentence(1)
        == "Quotas are limits per broker, enforced on the cluster's 1 broker."
    )


def test_the_warning_names_the_callback_and_says_the_values_are_not_enforced() -> None:
    assert enforcement_warning(DEFAULT_3, QUOTA_KEYS) is None
    said = enforcement_warning(CALLBACK_1, QUOTA_KEYS)
    assert said is not None
    assert f"client.quota.callback.class={FLAT}" in said
    assert "NOT what the brokers enforce" in said
    assert enforcement_warning(CALLBACK_1, ["connection_creation_rate"]) is None
    split = enforcement_warning(DISAGREE, QUOTA_KEYS)
    assert split is not None
    assert "brokers 1, 2 use io.example.FlatQuotaCallback" in split
    assert "broker 3 uses Kafka's default resolution" in split
    assert "enforced on broker 3 only" in split
    unknown = enforcement_warning(REFUSED, QUOTA_KEYS)
    assert unknown is not None
    assert f"Could not read client.quota.callback.class of broker 2 ({DENIED})" in unknown
    assert "is unknown" in unknown and "broker 1 uses the default resolution" in unknown


CONFIG = {Entity.of(user="alice"): {"producer_byte_rate": 10 * MiB}}


def _text(enforcement: QuotaEnforcement | None, principal: Principal = CLIENT, **config) -> str:
    explanation = explain(QuotaIndex(config.get("entries", CONFIG)), principal)
    rendered = render_explain_text(
        explanation, where="the live cluster X", width=200, enforcement=enforcement
    )
    return rendered.plain


def test_explain_text_marks_every_client_key_of_a_callback_broker_not_enforced() -> None:
    text = _text(CALLBACK_1)
    assert "Quotas are limits per broker, enforced on the cluster's 1 broker." in text
    assert (
        f"Warning: The brokers use a custom quota callback, client.quota.callback.class={FLAT}"
        in text
    )
    key_lines = [line for line in text.splitlines() if line.startswith("  ") and "_" in line]
    assert len(key_lines) == 4
    assert all("[not enforced] " in line for line in key_lines), key_lines
    assert '[not enforced] 10MiB from user="alice"' in text


def test_explain_never_says_nothing_throttles_a_client_a_callback_decides() -> None:
    bare = _text(CALLBACK_1, entries={})
    assert "nothing throttles it" not in bare
    assert "under Kafka's default resolution every quota key would be unlimited" in bare
    assert "nothing throttles it" in _text(DEFAULT_3, entries={})


def test_explain_without_a_callback_says_per_broker_and_marks_nothing() -> None:
    text = _text(DEFAULT_3)
    assert "enforced on each of 3 brokers: a client that reaches all of them" in text
    assert "[not" not in text and "Warning" not in text
    assert "on each of" not in _text(None)  # offline: not known, not said


def test_an_unreadable_broker_is_unknown_not_no_callback() -> None:
    text = _text(REFUSED)
    assert '[enforcement unknown] 10MiB from user="alice"' in text
    assert "Could not read client.quota.callback.class of broker 2" in text
    markdown = render_explain_markdown(
        explain(QuotaIndex(CONFIG), CLIENT), where="w", enforcement=REFUSED
    )
    assert '| [enforcement unknown] 10MiB from user="alice"' in markdown


def test_an_ip_answer_is_enforced_whatever_the_callback() -> None:
    ip = Principal(ip="192.0.2.10")
    text = _text(CALLBACK_1, ip, entries={Entity.of(ip=None): {"connection_creation_rate": 5.0}})
    assert "[not enforced]" not in text and "Warning" not in text


def test_explain_json_carries_brokers_callback_and_enforced_flags() -> None:
    explanation = explain(QuotaIndex(CONFIG), CLIENT)
    doc = json.loads(
        render_explain_json(explain_document(explanation, source="cluster", enforcement=CALLBACK_1))
    )
    jsonschema.validate(doc, SCHEMAS["explain.schema.json"]())
    assert (doc["brokers"], doc["quota_callback"], doc["resolution_enforced"]) == (1, FLAT, False)
    assert {k["enforced"] for k in doc["quotas"].values()} == {False}
    assert doc["enforcement"]["quota_callbacks"] == {"1": FLAT}
    assert "NOT what the brokers enforce" in doc["enforcement"]["statement"]
    plain = json.loads(
        render_explain_json(explain_document(explanation, source="cluster", enforcement=DEFAULT_3))
    )
    assert (plain["brokers"], plain["quota_callback"], plain["resolution_enforced"]) == (
        3,
        None,
        True,
    )
    offline = explain_document(explanation, source="manifests")
    assert (offline.brokers, offline.resolution_enforced, offline.enforcement) == (None, None, None)


def _probe_plan(enforcement: QuotaEnforcement | None):  # type: ignore[no-untyped-def]
    probe = Probe(CLIENT, SourceLocation("m.yaml", 7))
    desired = desired_state(CONFIG, cluster="c", probes=[probe])
    plan, review = reviewed(desired, {})
    return replace(plan, enforcement=enforcement), review


def test_the_plan_probe_view_names_the_callback_and_marks_the_probe() -> None:
    plan, review = _probe_plan(CALLBACK_1)
    lines = probe_text(review.probes, enforcement=plan.enforcement)
    assert lines[1].startswith(
        "  Quotas are limits per broker, enforced on the cluster's 1 broker."
    )
    assert f"decided by the brokers' quota callback {FLAT}" in lines[1]
    assert lines[2].endswith("(m.yaml:7)  [not enforced]")
    text = render_text(plan, review).plain
    assert (
        f"Warning: The brokers use a custom quota callback, client.quota.callback.class={FLAT}"
        in text
    )
    markdown = render_markdown(plan, review)
    assert FLAT in markdown and "not enforced" in markdown
    plain, _ = _probe_plan(DEFAULT_3)
    assert "enforced on each of 3 brokers" in "\n".join(
        probe_text(review.probes, enforcement=plain.enforcement)
    )
    assert "Warning" not in render_text(plain, review).plain


def test_the_plan_json_and_saved_plans_keep_the_enforcement(tmp_path: Path) -> None:
    plan, review = _probe_plan(DISAGREE)
    assert_plan_data_is_its_model(plan, review)
    doc = json.loads(render_json(plan, review))
    assert doc["enforcement"]["brokers"] == 3
    assert doc["enforcement"]["quota_callbacks"] == {"1": FLAT, "2": FLAT, "3": None}
    assert doc["enforcement"]["resolution_enforced"] is False
    assert doc["probes"][0]["resolution_enforced"] is False
    assert doc["probes"][0]["keys"]["producer_byte_rate"]["after"]["enforced"] is False
    again, _ = plan_from_document(PlanDocument.model_validate(doc))
    assert again.enforcement == DISAGREE
    write_plan_file(plan, review, tmp_path / "p.json")
    assert read_plan_file(tmp_path / "p.json")[0].enforcement == DISAGREE
    unread, _ = _probe_plan(None)
    assert json.loads(render_json(unread, review))["enforcement"] is None


def test_analyze_warns_per_cluster_whose_brokers_use_a_callback() -> None:
    configs = [
        QuotaConfig("a", CONFIG, "live", CALLBACK_1),
        QuotaConfig("a", CONFIG, "plan (after)", CALLBACK_1),  # said once per cluster
        QuotaConfig("b", CONFIG, "live", DEFAULT_3),
        QuotaConfig("c", CONFIG, "snapshot s.jsonl"),  # files: not known, nothing said
    ]
    (said,) = enforcement_warnings(configs)
    assert said.startswith("cluster 'a': The brokers use a custom quota callback")
    assert FLAT in said and "NOT what the brokers enforce" in said


def test_names_from_a_file_or_a_broker_never_reach_the_terminal_raw() -> None:
    hostile = QuotaEnforcement(("1", "2\x1b[2J"), {"1": "evil\x1b[31m"}, {"2\x1b[2J": "no\x07"})
    said = enforcement_warning(hostile, QUOTA_KEYS)
    assert said is not None and "\x1b" not in said and "\x07" not in said
    assert "evil\\u001b[31m" in said and "broker 2\\u001b[2J" in said
    assert "\x1b" not in probe_text(_probe_plan(hostile)[1].probes, enforcement=hostile)[1]
