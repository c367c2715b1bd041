"""Drift: classification (pure), the per-shape reader, renderings (golden
files) and the command's offline behaviour.

Regenerate the golden files after an intended change with
``QUOTAFORM_UPDATE_GOLDEN=1 pytest tests/unit/test_drift.py`` and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from rich.console import Console
from typer.testing import CliRunner

from quotaform.cli.app import _QuotaformGroup
from quotaform.cli.drift import register
from quotaform.cluster.read import read_live_state
from quotaform.cluster.wire.types import FilterComponent, MatchType
from quotaform.formats.drift import DriftDocument, render_drift_json
from quotaform.formats.schemas import SCHEMAS
from quotaform.kafka.entity import Entity
from quotaform.plan.drift import DriftKind, compute_drift
from quotaform.plan.model import Action, KeyAction
from quotaform.plan.state import Scope, ScopeRule
from quotaform.render.drift import render_drift_markdown, render_drift_text
from quotaform.words import drift_summary_line

from .builders import Golden, desired_state, live_state, plan_of

CLUSTER_ID = "MkU3OEVBNTcwNTJENDM2Qk"

SVC_A = Entity.of(user="svc-a")
SVC_B = Entity.of(user="svc-b")
SVC_C = Entity.of(user="svc-c")
SVC_STRAY = Entity.of(user="svc-stray")
USER_DEFAULT = Entity.of(user=None)
IP_10 = Entity.of(ip="192.0.2.10")
IP_20 = Entity.of(ip="192.0.2.20")


def svc_scope() -> Scope:
    """Users named ``svc-*`` (no default user) and every ip."""
    return Scope.build(
        [
            ScopeRule.build(("user",), {"user": ["svc-"]}, include_defaults=False),
            ScopeRule.build(("ip",)),
        ]
    )


def desired(entities: dict[Entity, dict[str, float]], *, scope: Scope | None = None):  # type: ignore[no-untyped-def]
    return desired_state(
        entities,
        cluster="sandbox",
        cluster_id=CLUSTER_ID,
        scope=scope or svc_scope(),
        path="quotas/svc.yaml",
        first_line=10,
        line_step=3,
    )


DECLARED = {
    SVC_A: {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
    SVC_B: {"producer_byte_rate": 10485760.0, "request_percentage": 150.0},
    SVC_C: {"consumer_byte_rate": 524288.0},
    IP_10: {"connection_creation_rate": 20.0},
    IP_20: {"connection_creation_rate": 5.0},
}
LIVE = {
    # changed: one value, plus a key declared but not live, plus one live but not declared
    SVC_A: {"producer_byte_rate": 4096.0, "request_percentage": 50.0},
    # in sync (YAML int against a wire float)
    SVC_B: {"producer_byte_rate": 10485760, "request_percentage": 150.0},
    # SVC_C missing; IP_20 missing
    IP_10: {"connection_creation_rate": 20.0},
    # unexpected
    SVC_STRAY: {"producer_byte_rate": 4096.0},
}
BY_SHAPE = {"user": 2, "client-id": 0, "user+client-id": 1, "ip": 0}


def report():  # type: ignore[no-untyped-def]
    return compute_drift(
        desired(DECLARED),
        live_state(
            LIVE,
            cluster_id=CLUSTER_ID,
            rpc_counts={"DescribeClientQuotas": 4},
            unmanaged_by_shape=BY_SHAPE,
        ),
    )


# ------------------------------------------------------------------ compute_drift


def test_each_entity_lands_in_exactly_one_class() -> None:
    r = report()
    assert [d.entity for d in r.changed] == [SVC_A]
    assert [d.entity for d in r.missing] == [SVC_C, IP_20]
    assert [d.entity for d in r.unexpected] == [SVC_STRAY]
    assert r.matching == 2  # SVC_B, IP_10
    assert r.in_scope == 6
    assert not r.in_sync
    assert r.unmanaged == 3 and dict(r.unmanaged_by_shape) == BY_SHAPE
    assert list(r.unmanaged_by_shape) == ["user", "client-id", "user+client-id", "ip"]
    assert r.cluster == "sandbox" and r.cluster_id == CLUSTER_ID
    assert dict(r.rpc_counts) == {"DescribeClientQuotas": 4}
    assert {DriftKind.of_action(d.action) for d in r.changed} == {DriftKind.CHANGED}
    assert {DriftKind.of_action(d.action) for d in r.missing} == {DriftKind.MISSING}
    assert {DriftKind.of_action(d.action) for d in r.unexpected} == {DriftKind.UNEXPECTED}


def test_changed_lists_declared_and_live_per_key() -> None:
    (a,) = report().changed
    assert dict(a.after) == DECLARED[SVC_A]
    assert dict(a.before) == LIVE[SVC_A]
    assert list(a.after) == sorted(a.after)
    assert a.source == "quotas/svc.yaml:10"
    assert [(kc.key, DriftKind.of_key(kc.action), kc.after, kc.before) for kc in a.key_changes] == [
        ("consumer_byte_rate", DriftKind.MISSING, 2097152.0, None),
        ("producer_byte_rate", DriftKind.CHANGED, 1048576.0, 4096.0),
        ("request_percentage", DriftKind.UNEXPECTED, None, 50.0),
    ]


def test_missing_and_unexpected_have_one_empty_side() -> None:
    r = report()
    c = r.missing[0]
    assert dict(c.after) == DECLARED[SVC_C] and dict(c.before) == {}
    assert c.source == "quotas/svc.yaml:16"
    stray = r.unexpected[0]
    assert dict(stray.after) == {} and dict(stray.before) == LIVE[SVC_STRAY]
    assert stray.source is None


def test_classes_are_the_plan_actions_read_backwards() -> None:
    d = desired(DECLARED)
    live = live_state(LIVE)
    plan = plan_of(d, live)
    r = compute_drift(d, live)
    by_action = {a: [c.entity for c in plan.changes if c.action is a] for a in Action}
    assert [x.entity for x in r.changed] == by_action[Action.UPDATE]
    assert [x.entity for x in r.missing] == by_action[Action.CREATE]
    assert [x.entity for x in r.unexpected] == by_action[Action.DELETE]
    assert r.matching == len(by_action[Action.NO_OP])
    assert DriftKind.of_action(Action.NO_OP) is None
    assert DriftKind.of_key(KeyAction.ADD) is DriftKind.MISSING


def test_in_sync_when_only_unmanaged_entities_differ() -> None:
    r = compute_drift(
        desired({SVC_A: {"producer_byte_rate": 1048576.0}}),
        live_state(
            {SVC_A: {"producer_byte_rate": 1048576}},
            unmanaged_by_shape={"user": 5, "client-id": 0, "user+client-id": 0, "ip": 0},
        ),
    )
    assert r.in_sync
    assert (r.changed, r.missing, r.unexpected) == ((), (), ())
    assert r.matching == 1
    assert r.unmanaged == 5
    assert (
        drift_summary_line(r) == "No drift: the cluster matches the manifests (1 entity in scope)."
    )


def test_nothing_declared_nothing_live_is_in_sync() -> None:
    r = compute_drift(desired({}), live_state({}, unmanaged_by_shape={"user": 7}))
    assert r.unmanaged == 7
    assert r.in_sync and r.in_scope == 0


def test_report_is_deterministic_whatever_the_input_order() -> None:
    reversed_live = dict(reversed(list(LIVE.items())))
    other = compute_drift(
        desired(dict(reversed(list(DECLARED.items())))),
        live_state(
            reversed_live,
            cluster_id=CLUSTER_ID,
            rpc_counts={"DescribeClientQuotas": 4},
            unmanaged_by_shape=BY_SHAPE,
        ),
    )
    # Sources differ (line numbers follow input order), so compare the rest.
    key = [
        (d.entity, d.action, dict(d.after), dict(d.before), d.key_changes) for d in report().changed
    ]
    assert key == [
        (d.entity, d.action, dict(d.after), dict(d.before), d.key_changes) for d in other.changed
    ]
    assert [d.entity for d in other.missing] == [SVC_C, IP_20]


# ------------------------------------------------- read_live_state, as drift uses it


class FakeReader:
    """The describe half of a client over a fixed set of live entities; records
    every filter it was asked for."""

    def __init__(self, entities: dict[Entity, dict[str, float]]) -> None:
        self.entities = entities
        self.rpc_counts: dict[str, int] = {}
        self.calls: list[tuple[tuple[str, ...], bool]] = []

    def describe_client_quotas(
        self, components: list[FilterComponent], *, strict: bool
    ) -> dict[Entity, dict[str, float]]:
        self.rpc_counts["DescribeClientQuotas"] = self.rpc_counts.get("DescribeClientQuotas", 0) + 1
        assert all(c.match_type is MatchType.ANY for c in components)
        shape = tuple(c.entity_type for c in components)
        self.calls.append((shape, strict))
        return {e: dict(q) for e, q in self.entities.items() if e.types == shape}


def test_reader_describes_each_shape_once_strictly_and_splits_by_scope() -> None:
    reader = FakeReader(
        {
            SVC_A: {"producer_byte_rate": 1.0},
            USER_DEFAULT: {"producer_byte_rate": 2.0},  # defaults excluded by the scope
            Entity.of(user="legacy"): {"producer_byte_rate": 3.0},  # no svc- prefix
            Entity.of(client_id="reporting"): {"request_percentage": 10.0},
            Entity.of(user="svc-a", client_id=None): {"consumer_byte_rate": 4.0},
            Entity.of(user="legacy", client_id="x"): {"consumer_byte_rate": 5.0},
            IP_10: {"connection_creation_rate": 20.0},
            Entity.of(ip=None): {"connection_creation_rate": 1.0},
        }
    )
    live = read_live_state(reader, svc_scope(), cluster_id=CLUSTER_ID)
    assert reader.calls == [
        (("user",), True),
        (("client-id",), True),
        (("user", "client-id"), True),
        (("ip",), True),
    ]
    assert set(live.entities) == {SVC_A, IP_10, Entity.of(ip=None)}
    assert dict(live.unmanaged_by_shape) == {
        "user": 2,
        "client-id": 1,
        "user+client-id": 2,
        "ip": 0,
    }
    assert live.unmanaged == 5
    assert live.cluster_id == CLUSTER_ID
    assert dict(live.rpc_counts) == {"DescribeClientQuotas": 4}


def test_reader_output_feeds_compute_drift() -> None:
    reader = FakeReader({SVC_A: {"producer_byte_rate": 1.0}, Entity.of(user="legacy"): {}})
    live = read_live_state(reader, svc_scope())
    r = compute_drift(desired({SVC_A: {"producer_byte_rate": 2.0}}), live)
    assert [d.entity for d in r.changed] == [SVC_A]
    assert r.unmanaged == 1
    assert dict(r.unmanaged_by_shape) == {"user": 1, "client-id": 0, "user+client-id": 0, "ip": 0}


# -------------------------------------------------------------------- renderings


def test_text_golden(golden: Golden) -> None:
    golden("drift.txt", render_drift_text(report()).plain)


def test_markdown_golden(golden: Golden) -> None:
    golden("drift.md", render_drift_markdown(report()))


def test_json_golden(golden: Golden) -> None:
    golden("drift.json", render_drift_json(report()))


def test_summary_line_counts_every_class() -> None:
    assert drift_summary_line(report()) == (
        "Drift: 1 changed, 2 missing, 1 unexpected "
        "(3 unmanaged entities outside the scope left alone)."
    )
    one = compute_drift(
        desired({SVC_C: {"consumer_byte_rate": 1.0}}), live_state({}, unmanaged_by_shape={"ip": 1})
    )
    assert drift_summary_line(one) == (
        "Drift: 0 changed, 1 missing, 0 unexpected "
        "(1 unmanaged entity outside the scope left alone)."
    )


def test_text_shows_readable_units_and_sections() -> None:
    text = render_drift_text(report()).plain
    assert "producer_byte_rate: declared 1MiB, live 4KiB" in text
    assert "request_percentage: declared (not set), live 50%" in text
    for header in ("Changed (1)", "Missing (2)", "Unexpected (1)", "Unmanaged (3)"):
        assert header in text
    assert "user 2, user+client-id 1" in text
    # Sections in class order, entities sorted within each.
    assert text.index("Changed") < text.index("Missing") < text.index("Unexpected")
    assert text.index('user="svc-c"') < text.index('ip="192.0.2.20"')


def test_in_sync_text_is_short() -> None:
    r = compute_drift(
        desired({SVC_A: {"producer_byte_rate": 1.0}}),
        live_state({SVC_A: {"producer_byte_rate": 1.0}}),
    )
    text = render_drift_text(r).plain
    assert "No drift: the cluster matches the manifests (1 entity in scope)." in text
    for header in ("Changed", "Missing", "Unexpected", "Unmanaged"):
        assert header not in text
    assert "No drift" in render_drift_markdown(r)


def test_text_on_a_terminal_has_colour() -> None:
    console = Console(force_terminal=True, color_system="standard", width=120, record=True)
    console.print(render_drift_text(report()))
    assert "\x1b[" in console.export_text(styles=True)


def test_json_validates_against_its_model_and_schema() -> None:
    import jsonschema

    text = render_drift_json(report())
    doc = DriftDocument.model_validate_json(text)
    assert doc.format_version == 1
    assert doc.in_sync is False
    assert doc.cluster_id == CLUSTER_ID
    assert [d.entity for d in doc.changed] == [{"user": "svc-a"}]
    assert [d.entity for d in doc.missing] == [{"user": "svc-c"}, {"ip": "192.0.2.20"}]
    assert [d.entity for d in doc.unexpected] == [{"user": "svc-stray"}]
    assert doc.unmanaged.total == 3 and doc.unmanaged.by_shape == BY_SHAPE
    assert (doc.summary.changed, doc.summary.missing, doc.summary.unexpected) == (1, 2, 1)
    data = json.loads(text)
    # Plain numbers, not readable strings.
    assert data["changed"][0]["live"] == {"producer_byte_rate": 4096.0, "request_percentage": 50.0}
    assert data["changed"][0]["key_changes"][1] == {
        "key": "producer_byte_rate",
        "drift": "changed",
        "declared": 1048576.0,
        "live": 4096.0,
    }
    schema = SCHEMAS["drift.schema.json"]()
    jsonschema.Draft202012Validator.check_schema(schema)
    jsonschema.validate(data, schema)
    data["changed"][0]["key_changes"][0]["drift"] = "replaced"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(data, schema)


def test_default_entity_is_null_in_json() -> None:
    scope = Scope.build([ScopeRule.build(("user",))])
    r = compute_drift(
        desired({USER_DEFAULT: {"producer_byte_rate": 1.0}}, scope=scope), live_state({})
    )
    doc = json.loads(render_drift_json(r))
    assert doc["missing"][0]["entity"] == {"user": None}
    assert "user=<default>" in render_drift_text(r).plain


# ------------------------------------------------------- command (no broker needed)


def drift_app() -> typer.Typer:
    """A throwaway app with the real app's error handling and only ``drift``."""
    app = typer.Typer(cls=_QuotaformGroup, rich_markup_mode=None)

    @app.callback()
    def _root() -> None:
        """Test root."""

    register(app)
    return app


def test_help_lists_the_exit_codes_and_options() -> None:
    result = CliRunner().invoke(drift_app(), ["drift", "--help"])
    assert result.exit_code == 0
    out = " ".join(result.output.split())
    assert "Exit codes: 0 in sync, 2 drift found, 1 error." in out
    for option in ("--bootstrap-server", "--command-config", "--output", "text|json|markdown"):
        assert option in out


@pytest.mark.parametrize(
    "args",
    [["drift"], ["drift", "m.yaml", "--no-such-option"], ["drift", "m.yaml", "-o", "yaml"]],
)
def test_usage_errors_exit_1_not_2(args: list[str]) -> None:
    result = CliRunner().invoke(drift_app(), args)
    assert result.exit_code == 1, result.output


def test_bad_manifests_exit_1_before_connecting(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: quotaform.io/v1\nkind: ClientQuotas\nspec: 3\n")
    # Nothing listens on port 1: a connection attempt would fail differently.
    result = CliRunner().invoke(
        drift_app(), ["drift", str(manifest), "--bootstrap-server", "127.0.0.1:1"]
    )
    assert result.exit_code == 1
    assert "m.yaml" in result.output
    assert "cannot reach Kafka" not in result.output

