"""The pure diff: declared vs live -> per-entity and per-key changes."""

from __future__ import annotations

import pytest

from quotaform.app.apply import refuse_unless_allowed
from quotaform.cluster.apply import alteration
from quotaform.errors import GuardRefusedError
from quotaform.kafka.entity import Entity
from quotaform.plan.guards import GuardKind
from quotaform.plan.model import Action, KeyAction, KeyChange, diff_quotas
from quotaform.plan.state import ChangeBudget, Scope, ScopeRule
from quotaform.words import fallback_text

from .builders import desired_state, live_state, plan_of, reviewed

USER_AND_IP = Scope((ScopeRule.build(("user",)), ScopeRule.build(("ip",))))


def desired(entities: dict[Entity, dict[str, float]], *, allow_deletes: bool = False):  # type: ignore[no-untyped-def]
    return desired_state(entities, scope=USER_AND_IP, allow_deletes=allow_deletes)


ALICE, BOB, CAROL = Entity.of(user="alice"), Entity.of(user="bob"), Entity.of(user="carol")


def test_key_changes_are_add_change_remove_sorted_by_key() -> None:
    changes = diff_quotas(
        {"producer_byte_rate": 1.0, "request_percentage": 50.0},
        {"consumer_byte_rate": 2.0, "producer_byte_rate": 3.0},
    )
    assert changes == (
        KeyChange("consumer_byte_rate", KeyAction.ADD, None, 2.0),
        KeyChange("producer_byte_rate", KeyAction.CHANGE, 1.0, 3.0),
        KeyChange("request_percentage", KeyAction.REMOVE, 50.0, None),
    )


def test_values_compare_canonically() -> None:
    assert diff_quotas({"producer_byte_rate": 1048576.0}, {"producer_byte_rate": 1048576}) == ()


def test_actions_and_alterations() -> None:
    plan = plan_of(
        desired(
            {
                ALICE: {"producer_byte_rate": 10.0},
                BOB: {"producer_byte_rate": 5.0, "consumer_byte_rate": 7.0},
            },
            allow_deletes=True,
        ),
        live_state(
            {
                BOB: {"producer_byte_rate": 5.0, "request_percentage": 20.0},
                CAROL: {"consumer_byte_rate": 1.0},
            },
            unmanaged_by_shape={"user": 3},
        ),
    )
    by_entity = {c.entity: c for c in plan.changes}
    assert by_entity[ALICE].action is Action.CREATE
    assert by_entity[BOB].action is Action.UPDATE
    assert by_entity[CAROL].action is Action.DELETE
    # An update is one entry with only the changed keys and the removals.
    bob = alteration(by_entity[BOB])
    assert dict(bob.ops) == {
        "consumer_byte_rate": 7.0,
        "request_percentage": None,
    }
    carol = alteration(by_entity[CAROL])
    assert dict(carol.ops) == {"consumer_byte_rate": None}
    assert plan.summary.create == 1 and plan.summary.update == 1 and plan.summary.delete == 1
    assert plan.unmanaged == 3
    assert [c.entity for c in plan.changes] == [ALICE, BOB, CAROL]


def test_no_op_when_live_matches() -> None:
    plan = plan_of(
        desired({ALICE: {"producer_byte_rate": 10.0}}),
        {ALICE: {"producer_byte_rate": 10.0}},
    )
    assert [c.action for c in plan.changes] == [Action.NO_OP]
    assert not plan.summary.has_changes
    assert plan.pending == ()


def test_deletes_without_allow_are_blocked_by_the_review() -> None:
    _, review = reviewed(desired({}), {CAROL: {"consumer_byte_rate": 1.0}})
    assert review.blocked_deletes == (CAROL,)
    assert [(v.kind, v.entity) for v in review.violations] == [(GuardKind.DELETE, CAROL)]
    with pytest.raises(GuardRefusedError, match=r"deletes are not allowed.*--allow-deletes"):
        refuse_unless_allowed(review)
    _, allowed = reviewed(desired({}, allow_deletes=True), {CAROL: {"consumer_byte_rate": 1.0}})
    assert allowed.blocked_deletes == ()
    _, by_flag = reviewed(
        desired({}), {CAROL: {"consumer_byte_rate": 1.0}}, ChangeBudget(allow_deletes=True)
    )
    assert by_flag.blocked_deletes == ()


def test_the_plan_itself_holds_no_policy() -> None:
    plan = plan_of(desired({}), {CAROL: {"consumer_byte_rate": 1.0}})
    assert [c.action for c in plan.changes] == [Action.DELETE]
    assert not hasattr(plan, "violations") and not hasattr(plan, "deletes_allowed")


def test_default_entities_sort_first_and_output_is_deterministic() -> None:
    entities = {
        Entity.of(user="b"): {"producer_byte_rate": 1.0},
        Entity.of(user=None): {"producer_byte_rate": 2.0},
        Entity.of(user="a"): {"producer_byte_rate": 3.0},
        Entity.of(ip=None): {"connection_creation_rate": 4.0},
    }
    one = plan_of(desired(entities), {})
    two = plan_of(desired(dict(reversed(list(entities.items())))), {})
    assert [c.entity for c in one.changes] == [c.entity for c in two.changes]
    assert [str(c.entity) for c in one.changes] == [
        "user=<default>",
        'user="a"',
        'user="b"',
        "ip=<default>",
    ]


def test_reviews_carry_guard_violations_and_removal_fallbacks() -> None:
    default_user = Entity.of(user=None)
    declared = {default_user: {"producer_byte_rate": 1000.0}, ALICE: {"consumer_byte_rate": 5.0}}
    live = {
        default_user: {"producer_byte_rate": 1000.0},
        ALICE: {"producer_byte_rate": 10.0, "consumer_byte_rate": 5.0},
    }
    state = desired_state(declared)
    _, review = reviewed(state, live)
    # Removing alice's 10 B/s quota hands her the default's 1000 B/s: 100x.
    assert (
        fallback_text(review.fallbacks[(ALICE, "producer_byte_rate")])
        == "falls back to user=<default> (1kB) for client ids without their own quota"
    )
    assert [v.kind for v in review.violations] == [GuardKind.RELAX]
    assert review.violations[0].ratio == 100.0
    with pytest.raises(GuardRefusedError, match="--allow-relax"):
        refuse_unless_allowed(review)

    _, relaxed = reviewed(state, live, ChangeBudget(allow_relax=True))
    assert relaxed.violations == ()
    refuse_unless_allowed(relaxed)
    _, wide = reviewed(state, live, ChangeBudget(max_relax_factor=200.0))
    assert wide.violations == ()
