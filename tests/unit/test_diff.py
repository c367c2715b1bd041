"""The pure diff: declared vs live -> per-entity and per-key changes."""

from __future__ import annotations

from quotaform.desired import DesiredEntity, DesiredState, Scope, ScopeRule, SourceLocation
from quotaform.diff import compute_plan, diff_entity
from quotaform.entity import Entity
from quotaform.live import LiveState
from quotaform.plan import Action, KeyAction, KeyChange


def desired(
    entities: dict[Entity, dict[str, float]], *, allow_deletes: bool = False
) -> DesiredState:
    return DesiredState(
        cluster="test",
        cluster_id=None,
        scope=Scope((ScopeRule.build(("user",)), ScopeRule.build(("ip",)))),
        allow_deletes=allow_deletes,
        entities={
            e: DesiredEntity(e, q, False, SourceLocation("m.yaml", i + 1))
            for i, (e, q) in enumerate(entities.items())
        },
        warnings=(),
    )


ALICE, BOB, CAROL = Entity.of(user="alice"), Entity.of(user="bob"), Entity.of(user="carol")


def test_key_changes_are_add_change_remove_sorted_by_key() -> None:
    changes = diff_entity(
        {"producer_byte_rate": 1.0, "request_percentage": 50.0},
        {"consumer_byte_rate": 2.0, "producer_byte_rate": 3.0},
    )
    assert changes == (
        KeyChange("consumer_byte_rate", KeyAction.ADD, None, 2.0),
        KeyChange("producer_byte_rate", KeyAction.CHANGE, 1.0, 3.0),
        KeyChange("request_percentage", KeyAction.REMOVE, 50.0, None),
    )


def test_values_compare_canonically() -> None:
    assert diff_entity({"producer_byte_rate": 1048576.0}, {"producer_byte_rate": 1048576}) == ()


def test_actions_and_alterations() -> None:
    plan = compute_plan(
        desired(
            {
                ALICE: {"producer_byte_rate": 10.0},
                BOB: {"producer_byte_rate": 5.0, "consumer_byte_rate": 7.0},
            }
        ),
        LiveState(
            {
                BOB: {"producer_byte_rate": 5.0, "request_percentage": 20.0},
                CAROL: {"consumer_byte_rate": 1.0},
            },
            unmanaged=3,
        ),
        allow_deletes=True,
    )
    by_entity = {c.entity: c for c in plan.changes}
    assert by_entity[ALICE].action is Action.CREATE
    assert by_entity[BOB].action is Action.UPDATE
    assert by_entity[CAROL].action is Action.DELETE
    # An update is one entry with only the changed keys and the removals.
    bob = by_entity[BOB].alteration()
    assert bob is not None and dict(bob.ops) == {
        "consumer_byte_rate": 7.0,
        "request_percentage": None,
    }
    carol = by_entity[CAROL].alteration()
    assert carol is not None and dict(carol.ops) == {"consumer_byte_rate": None}
    assert plan.summary.create == 1 and plan.summary.update == 1 and plan.summary.delete == 1
    assert plan.unmanaged == 3
    assert [c.entity for c in plan.changes] == [ALICE, BOB, CAROL]


def test_no_op_when_live_matches() -> None:
    plan = compute_plan(
        desired({ALICE: {"producer_byte_rate": 10.0}}),
        LiveState({ALICE: {"producer_byte_rate": 10.0}}),
    )
    assert [c.action for c in plan.changes] == [Action.NO_OP]
    assert not plan.summary.has_changes
    assert plan.changes[0].alteration() is None


def test_deletes_without_allow_are_blocked_and_warned() -> None:
    plan = compute_plan(desired({}), LiveState({CAROL: {"consumer_byte_rate": 1.0}}))
    assert [c.entity for c in plan.blocked_deletes] == [CAROL]
    assert any("deletes are not allowed" in w for w in plan.warnings)
    allowed = compute_plan(
        desired({}, allow_deletes=True), LiveState({CAROL: {"consumer_byte_rate": 1.0}})
    )
    assert allowed.blocked_deletes == ()


def test_default_entities_sort_first_and_output_is_deterministic() -> None:
    entities = {
        Entity.of(user="b"): {"producer_byte_rate": 1.0},
        Entity.of(user=None): {"producer_byte_rate": 2.0},
        Entity.of(user="a"): {"producer_byte_rate": 3.0},
        Entity.of(ip=None): {"connection_creation_rate": 4.0},
    }
    one = compute_plan(desired(entities), LiveState({}))
    two = compute_plan(desired(dict(reversed(list(entities.items())))), LiveState({}))
    assert [c.entity for c in one.changes] == [c.entity for c in two.changes]
    assert [str(c.entity) for c in one.changes] == [
        "user=<default>",
        "user='a'",
        "user='b'",
        "ip=<default>",
    ]


def test_plans_carry_guard_violations_and_removal_fallbacks() -> None:
    import pytest

    from quotaform.apply import GuardRefusedError, check_allowed
    from quotaform.guards import GuardFlags, GuardKind

    default_user = Entity.of(user=None)
    declared = {default_user: {"producer_byte_rate": 1000.0}, ALICE: {"consumer_byte_rate": 5.0}}
    live = LiveState(
        {
            default_user: {"producer_byte_rate": 1000.0},
            ALICE: {"producer_byte_rate": 10.0, "consumer_byte_rate": 5.0},
        }
    )
    from dataclasses import replace

    every_shape = Scope(
        tuple(
            ScopeRule.build(s) for s in (("user",), ("client-id",), ("user", "client-id"), ("ip",))
        )
    )
    state = replace(desired(declared), scope=every_shape)
    plan = compute_plan(state, live)
    # Removing alice's 10 B/s quota hands her the default's 1000 B/s: 100x.
    assert (
        str(plan.fallbacks[(ALICE, "producer_byte_rate")])
        == "falls back to user=<default> (1kB) for client ids without their own quota"
    )
    assert [v.kind for v in plan.violations] == [GuardKind.RELAX]
    with pytest.raises(GuardRefusedError, match="--allow-relax"):
        check_allowed(plan)

    relaxed = compute_plan(state, live, budget=GuardFlags(allow_relax=True).budget_for(state))
    assert relaxed.violations == ()
    check_allowed(relaxed)
    wide = compute_plan(state, live, budget=GuardFlags(max_relax_factor=200.0).budget_for(state))
    assert wide.violations == ()
