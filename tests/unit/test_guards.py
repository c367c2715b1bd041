"""quotaform.plan.guards: protection, the change budget, and removal fallbacks."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from quotaform.formats.plan import plan_document
from quotaform.kafka.entity import Entity
from quotaform.kafka.removals import Fallback, fallback
from quotaform.plan.guards import GuardKind, Violation
from quotaform.plan.model import Plan
from quotaform.plan.review import removal_fallbacks
from quotaform.plan.state import (
    DEFAULT_MAX_RELAX_FACTOR,
    ChangeBudget,
    DesiredState,
    Scope,
    ScopeRule,
    SourceLocation,
)
from quotaform.words import (
    allow_flag,
    fallback_text,
    missing_permissions,
    violation_line,
    violation_message,
)

from .builders import ALL_SHAPES, desired_state, reviewed
from .builders import plan_of as _plan_of

ALLOW_MASS_DELETE = "--allow-mass-delete"
ALLOW_DEFAULT_REMOVAL = "--allow-default-removal"
ALLOW_RELAX = "--allow-relax"
NO_RELAX_LIMIT = {"allow_relax": True}

MIB = 1024.0**2
P = "producer_byte_rate"
C = "consumer_byte_rate"
R = "request_percentage"
CONN = "connection_creation_rate"

U = Entity.of(user="u")
U_C = Entity.of(user="u", client_id="c")
U_DC = Entity.of(user="u", client_id=None)
DU = Entity.of(user=None)
DU_C = Entity.of(user=None, client_id="c")
DU_DC = Entity.of(user=None, client_id=None)
CID = Entity.of(client_id="c")
DCID = Entity.of(client_id=None)
IP_A = Entity.of(ip="192.0.2.1")
DIP = Entity.of(ip=None)

Quotas = Mapping[Entity, Mapping[str, float]]


def desired(
    entities: Quotas,
    *,
    scope: Scope = ALL_SHAPES,
    prevent_destroy: frozenset[Entity] = frozenset(),
    protected: Mapping[Entity, SourceLocation] | None = None,
    limits: ChangeBudget | None = None,
) -> DesiredState:
    return desired_state(
        entities,
        scope=scope,
        allow_deletes=True,
        budget=limits,
        prevent_destroy=prevent_destroy,
        protected=protected,
    )


def plan_of(state: DesiredState, live: Quotas) -> Plan:
    return _plan_of(state, live)


def guards(
    live: Quotas, wanted: Quotas, budget: ChangeBudget | None = None, **kwargs: object
) -> list[Violation]:
    state = desired(wanted, **kwargs)  # type: ignore[arg-type]
    return list(reviewed(state, live, budget)[1].violations)


def kinds(violations: list[Violation]) -> list[tuple[GuardKind, Entity | None, str | None]]:
    return [(v.kind, v.entity, v.key) for v in violations]


# ------------------------------------------------------------------ fallbacks: user / client-id


@pytest.mark.parametrize(
    ("removed", "after", "expected"),
    [
        # {user=u, client-id=c}: every next level is known.
        (U_C, {}, Fallback(P, None, None)),
        (U_C, {U_DC: {P: 2.0}, U: {P: 3.0}}, Fallback(P, U_DC, 2.0)),
        (U_C, {U: {P: 3.0}, DU_C: {P: 4.0}}, Fallback(P, U, 3.0)),
        (U_C, {DU_C: {P: 4.0}, DU_DC: {P: 5.0}}, Fallback(P, DU_C, 4.0)),
        (U_C, {DU: {P: 6.0}, CID: {P: 7.0}}, Fallback(P, DU, 6.0)),
        (U_C, {CID: {P: 7.0}, DCID: {P: 8.0}}, Fallback(P, CID, 7.0)),
        (U_C, {DCID: {P: 8.0}}, Fallback(P, DCID, 8.0)),
        # other keys and other users' entities do not count
        (U_C, {U: {C: 3.0}, Entity.of(user="v"): {P: 1.0}}, Fallback(P, None, None)),
        # {user=u, client-id=<default>}: {user=<default>, client-id=c} depends on c
        (U_DC, {U: {P: 3.0}}, Fallback(P, U, 3.0)),
        (U_DC, {DU_C: {P: 4.0}, DU_DC: {P: 5.0}}, Fallback(P, DU_DC, 5.0, "client-id")),
        (U_DC, {DU_C: {P: 4.0}}, Fallback(P, None, None, "client-id")),
        # {user=u}
        (U, {DU_DC: {P: 5.0}, DU: {P: 6.0}}, Fallback(P, DU_DC, 5.0, "client-id")),
        (U, {DU: {P: 6.0}}, Fallback(P, DU, 6.0, "client-id")),
        (U, {CID: {P: 7.0}, DCID: {P: 8.0}}, Fallback(P, DCID, 8.0, "client-id")),
        (U, {U_C: {P: 1.0}, U_DC: {P: 2.0}}, Fallback(P, None, None, "client-id")),
        # {user=<default>, client-id=c}: the client id is known, users do not matter below
        (DU_C, {DU_DC: {P: 5.0}}, Fallback(P, DU_DC, 5.0)),
        (DU_C, {CID: {P: 7.0}}, Fallback(P, CID, 7.0)),
        (DU_C, {}, Fallback(P, None, None)),
        # {user=<default>, client-id=<default>}
        (DU_DC, {DU: {R: 25.0}}, Fallback(R, DU, 25.0)),
        (DU_DC, {DCID: {R: 10.0}}, Fallback(R, DCID, 10.0, "client-id")),
        # {user=<default>}
        (DU, {DCID: {P: 8.0}, CID: {P: 7.0}}, Fallback(P, DCID, 8.0, "client-id")),
        (DU, {}, Fallback(P, None, None, "client-id")),
        # {client-id=c}, {client-id=<default>}
        (CID, {DCID: {P: 8.0}, DU: {P: 6.0}}, Fallback(P, DCID, 8.0)),
        (DCID, {DU: {P: 6.0}}, Fallback(P, None, None)),
    ],
)
def test_fallback_walks_kafkas_levels(removed: Entity, after: Quotas, expected: Fallback) -> None:
    key = expected.key
    assert fallback(removed, key, after) == expected


def test_fallback_ignores_the_removed_entity_and_more_specific_levels() -> None:
    # The removed entity may still be in `after` with other keys; levels above
    # it are never consulted.
    after = {U: {C: 1.0}, U_C: {P: 1.0}, U_DC: {P: 2.0}, DU: {P: 6.0}}
    assert fallback(U, P, after) == Fallback(P, DU, 6.0, "client-id")


def test_named_default_user_is_not_the_default_entity() -> None:
    literal = Entity.of(user="<default>")
    assert fallback(U, P, {literal: {P: 1.0}}) == Fallback(P, None, None, "client-id")
    assert fallback(literal, P, {DU: {P: 6.0}}) == Fallback(P, DU, 6.0, "client-id")


# ------------------------------------------------------------------ fallbacks: ip


def test_fallback_for_ip() -> None:
    assert fallback(IP_A, CONN, {DIP: {CONN: 20.0}}) == Fallback(CONN, DIP, 20.0)
    assert fallback(IP_A, CONN, {Entity.of(ip="192.0.2.2"): {CONN: 5.0}}) == Fallback(
        CONN, None, None
    )
    assert fallback(DIP, CONN, {IP_A: {CONN: 5.0}}) == Fallback(CONN, None, None)
    # ip levels never fall through to user / client-id entities
    assert fallback(IP_A, CONN, {DU: {CONN: 1.0}}) == Fallback(CONN, None, None)


# ------------------------------------------------------------------ fallbacks: scope, text


def test_fallback_outside_the_scope_is_unknown() -> None:
    only_named_users = Scope.build(
        [ScopeRule.build(("user",), {"user": ["svc-"]}, include_defaults=False)]
    )
    svc = Entity.of(user="svc-a")
    found = fallback(svc, P, {}, in_scope=only_named_users.contains)
    assert found == Fallback(P, DU_DC, None, "client-id")
    assert not found.known and not found.unlimited
    assert fallback_text(found) == (
        "falls back to user=<default>, client-id=<default> if that sets it (outside the "
        "manifests' scope: not known here) for client ids without their own quota"
    )
    # In-scope levels that are absent are known to be empty: the walk goes on.
    assert fallback(svc, P, {DU: {P: 6.0}}, in_scope=ALL_SHAPES.contains) == Fallback(
        P, DU, 6.0, "client-id"
    )


def test_fallback_text_and_json() -> None:
    assert fallback_text(Fallback(P, DU, MIB)) == "falls back to user=<default> (1MiB)"
    assert fallback_text(Fallback(P, None, None)) == "unlimited"
    assert (
        fallback_text(Fallback(R, DU_DC, 25.0, "client-id"))
        == "falls back to user=<default>, client-id=<default> (25%) for client ids without "
        "their own quota"
    )
    assert fallback_text(Fallback(P, Entity.of(client_id="a b"), 512.0)) == (
        'falls back to client-id="a b" (512)'
    )
    # The plan JSON carries both the words and the data.
    state = desired({DU: {P: MIB}})
    plan, review = reviewed(state, {U: {P: 1.0}, DU: {P: MIB}}, ChangeBudget(allow_relax=True))
    doc = plan_document(plan, review)
    removed = next(k for c in doc.changes for k in c.key_changes if k.action == "remove")
    assert removed.fallback == (
        "falls back to user=<default> (1MiB) for client ids without their own quota"
    )
    assert removed.fallback_to is not None
    assert removed.fallback_to.model_dump() == {
        "entity": {"user": None},
        "value": MIB,
        "varies_by": "client-id",
    }


def test_fallback_rejects_unknown_shapes() -> None:
    with pytest.raises(ValueError, match="not a client-quota entity"):
        fallback(Entity.of(user="u", ip="192.0.2.1"), P, {})


def test_removal_notes_cover_updates_and_deletes_in_plan_order() -> None:
    state = desired({U: {P: MIB}, DU: {P: 2 * MIB}})
    live = {U: {P: MIB, C: MIB}, IP_A: {CONN: 5.0}, DU: {P: 2 * MIB, C: 3 * MIB}}
    notes = removal_fallbacks(plan_of(state, live), state)
    assert list(notes) == [(DU, C), (U, C), (IP_A, CONN)]
    assert notes[(U, C)] == Fallback(C, None, None, "client-id")  # DU loses C in the same plan
    assert notes[(IP_A, CONN)] == Fallback(CONN, None, None)
    with_default_ip = desired({U: {P: MIB}, DU: {P: 2 * MIB}, DIP: {CONN: 50.0}})
    notes = removal_fallbacks(plan_of(with_default_ip, live), with_default_ip)
    assert notes[(IP_A, CONN)] == Fallback(CONN, DIP, 50.0)


# ------------------------------------------------------------------ protection


def test_deleting_a_protected_entity_is_always_refused() -> None:
    where = SourceLocation("shared.yaml", 7)
    everything = ChangeBudget(allow_mass_delete=True, allow_default_removal=True, allow_relax=True)
    found = guards(
        {U: {P: MIB}, Entity.of(user="v"): {P: MIB}},
        {},
        everything,
        protected={U: where},
    )
    assert kinds(found) == [(GuardKind.PROTECTED, U, None)]
    assert allow_flag(found[0].kind) is None
    assert violation_message(found[0]) == (
        'user="u" is protected (shared.yaml:7) and would be deleted: declare its quotas '
        "again, or remove the protection in a reviewed change first"
    )
    assert violation_line(found[0]).endswith("(no flag overrides this)")


def test_prevent_destroy_refuses_key_removal() -> None:
    everything = ChangeBudget(allow_relax=True, allow_default_removal=True)
    found = guards(
        {U: {P: MIB, C: MIB, R: 50.0}},
        {U: {P: MIB}},
        everything,
        prevent_destroy=frozenset({U}),
    )
    assert kinds(found) == [
        (GuardKind.PREVENT_DESTROY, U, C),
        (GuardKind.PREVENT_DESTROY, U, R),
    ]
    assert violation_message(found[0]) == (
        'user="u" has preventDestroy (m.yaml:1) and would lose consumer_byte_rate: keep the '
        "key in the manifest, or drop preventDestroy in a reviewed change first"
    )
    assert all(allow_flag(v.kind) is None for v in found)
    # Changing or adding keys is fine.
    assert guards({U: {P: MIB}}, {U: {P: 2 * MIB, C: MIB}}, prevent_destroy=frozenset({U})) == []


def test_prevent_destroy_entities_are_protected() -> None:
    state = desired({U: {P: MIB}}, prevent_destroy=frozenset({U}))
    assert dict(state.protected) == {U: SourceLocation("m.yaml", 1)}
    given = SourceLocation("p.yaml", 3)
    state = desired({U: {P: MIB}}, prevent_destroy=frozenset({U}), protected={U: given, DU: given})
    assert list(state.protected) == [DU, U]  # sorted, spec.protect's location kept
    assert state.protected[U] == given


# ------------------------------------------------------------------ mass delete


def _users(n: int) -> dict[Entity, dict[str, float]]:
    return {Entity.of(user=f"u{i}"): {P: MIB} for i in range(n)}


def test_delete_count_budget() -> None:
    live = _users(10)
    keep = dict(list(live.items())[:7])
    budget = ChangeBudget(max_deletes=2, **NO_RELAX_LIMIT)
    found = guards(live, keep, budget)
    assert kinds(found) == [(GuardKind.MASS_DELETE, None, None)]
    assert (
        violation_message(found[0])
        == "the plan deletes 3 entities, more than the budget of 2 (maxDeletes)"
    )
    assert violation_line(found[0]).endswith(f"(pass {ALLOW_MASS_DELETE} to allow)")
    assert guards(live, keep, ChangeBudget(max_deletes=3, **NO_RELAX_LIMIT)) == []
    allowed = ChangeBudget(max_deletes=2, allow_mass_delete=True, **NO_RELAX_LIMIT)
    assert guards(live, keep, allowed) == []


def test_delete_share_budget_counts_live_entities() -> None:
    live = _users(10)
    keep = dict(list(live.items())[:8])
    creates = {Entity.of(user=f"new{i}"): {P: MIB} for i in range(90)}
    budget = ChangeBudget(max_delete_fraction=0.1, **NO_RELAX_LIMIT)
    found = guards(live, {**keep, **creates}, budget)
    assert [violation_message(v) for v in found] == [
        "the plan deletes 2 of 10 live in-scope entities (20%), more than the budget of "
        "10% (maxDeleteFraction)"
    ]
    assert guards(live, dict(list(live.items())[:9]), budget) == []
    both = ChangeBudget(max_deletes=1, max_delete_fraction=0.1, **NO_RELAX_LIMIT)
    assert len(guards(live, keep, both)) == 2
    assert guards({}, creates, budget) == []  # nothing live: nothing to share


# ------------------------------------------------------------------ default removal


def test_default_entity_delete_and_key_removal() -> None:
    relaxed = ChangeBudget(**NO_RELAX_LIMIT)
    found = guards({DU: {P: MIB, C: MIB}, DIP: {CONN: 5.0}}, {DU: {P: MIB}}, relaxed)
    assert kinds(found) == [
        (GuardKind.DEFAULT_REMOVAL, DU, C),
        (GuardKind.DEFAULT_REMOVAL, DIP, None),
    ]
    assert (
        violation_message(found[0])
        == "removing consumer_byte_rate from the default entity user=<default>"
    )
    assert violation_message(found[1]) == (
        "deleting the default entity ip=<default> (connection_creation_rate): every client "
        "that relies on it falls back to a less specific level or is unlimited"
    )
    assert {allow_flag(v.kind) for v in found} == {ALLOW_DEFAULT_REMOVAL}
    # Partly default entities count too.
    found = guards({U_DC: {P: MIB}}, {}, relaxed)
    assert kinds(found) == [(GuardKind.DEFAULT_REMOVAL, U_DC, None)]
    allowed = ChangeBudget(allow_default_removal=True, **NO_RELAX_LIMIT)
    assert guards({DU: {P: MIB, C: MIB}, DIP: {CONN: 5.0}}, {DU: {P: MIB}}, allowed) == []
    # Changing a default's value is not a removal.
    assert guards({DU: {P: MIB}}, {DU: {P: 2 * MIB}}) == []


# ------------------------------------------------------------------ relax


def test_raising_a_value_beyond_the_factor() -> None:
    found = guards({U: {P: MIB, C: MIB}}, {U: {P: 11 * MIB, C: 10 * MIB}})
    assert kinds(found) == [(GuardKind.RELAX, U, P)]
    assert violation_message(found[0]) == (
        'producer_byte_rate of user="u" rises from 1MiB to 11MiB: 11x, more than the '
        "budget's 10x (maxRelaxFactor)"
    )
    assert allow_flag(found[0].kind) == ALLOW_RELAX
    assert guards({U: {P: MIB}}, {U: {P: 11 * MIB}}, ChangeBudget(max_relax_factor=20)) == []
    big = guards({U: {P: 1.0}}, {U: {P: 5000.0}})
    assert violation_message(big[0]).startswith(
        'producer_byte_rate of user="u" rises from 1 to 5kB: 5,000x'
    )
    assert guards({U: {P: MIB}}, {U: {P: 11 * MIB}}, ChangeBudget(allow_relax=True)) == []
    assert guards({U: {P: MIB}}, {U: {P: 11 * MIB}}, ChangeBudget(**NO_RELAX_LIMIT)) == []
    # Lowering is never relaxing; adding a key is not judged.
    assert guards({U: {P: 100 * MIB}}, {U: {P: MIB, C: 1000 * MIB}}) == []


def test_removing_a_key_relaxes_to_its_fallback() -> None:
    # Unlimited.
    found = guards({U: {P: MIB, C: MIB}}, {U: {C: MIB}})
    assert kinds(found) == [(GuardKind.RELAX, U, P)]
    assert violation_message(found[0]) == (
        'removing producer_byte_rate (1MiB) from user="u": its clients become unlimited '
        "for client ids without their own quota"
    )
    # A fallback within the factor is fine, beyond it is not.
    assert guards({U: {P: MIB, C: MIB}, DU: {P: 8 * MIB}}, {U: {C: MIB}, DU: {P: 8 * MIB}}) == []
    found = guards({U: {P: MIB, C: MIB}, DU: {P: 64 * MIB}}, {U: {C: MIB}, DU: {P: 64 * MIB}})
    assert [violation_message(v) for v in found] == [
        'removing producer_byte_rate (1MiB) from user="u": falls back to user=<default> '
        "(64MiB) for client ids without their own quota: 64x, more than the budget's 10x "
        "(maxRelaxFactor)"
    ]
    # A delete removes every key.
    found = guards({IP_A: {CONN: 5.0}, DIP: {CONN: 10.0}}, {DIP: {CONN: 10.0}})
    assert found == []
    # A delete's keys are the delete's risk (allowed here), not relaxing:
    # one flag per kind of risk.
    assert guards({IP_A: {CONN: 5.0}}, {}) == []


def test_removal_to_an_unknown_fallback_is_refused() -> None:
    scope = Scope.build([ScopeRule.build(("user",), {"user": ["svc-"]}, include_defaults=False)])
    svc = Entity.of(user="svc-a")
    found = guards({svc: {P: MIB, C: MIB}}, {svc: {C: MIB}}, scope=scope)
    assert [violation_message(v) for v in found] == [
        'removing producer_byte_rate (1MiB) from user="svc-a": falls back to '
        "user=<default>, client-id=<default> if that sets it (outside the manifests' scope: "
        "not known here) for client ids without their own quota, so the rise cannot be checked"
    ]


def test_violations_are_ordered_and_combined() -> None:
    live = {DU: {P: MIB}, U: {P: MIB}, Entity.of(user="v"): {P: MIB}}
    found = guards(live, {}, ChangeBudget(max_deletes=1), protected={U: SourceLocation("p", 1)})
    assert kinds(found) == [
        (GuardKind.MASS_DELETE, None, None),
        (GuardKind.DEFAULT_REMOVAL, DU, None),
        (GuardKind.PROTECTED, U, None),
    ]
    # Without deletes allowed, every missing permission is listed at once.
    state = desired_state({}, protected={U: SourceLocation("p", 1)})
    _, review = reviewed(state, live, ChangeBudget(max_deletes=1))
    assert kinds(list(review.violations)) == [
        (GuardKind.MASS_DELETE, None, None),
        (GuardKind.DELETE, DU, None),
        (GuardKind.DEFAULT_REMOVAL, DU, None),
        (GuardKind.DELETE, U, None),
        (GuardKind.PROTECTED, U, None),
        (GuardKind.DELETE, Entity.of(user="v"), None),
    ]
    assert missing_permissions(review.violations) == [
        "--allow-deletes",
        "--allow-mass-delete",
        "--allow-default-removal",
    ]
    state = desired({}, protected={U: SourceLocation("p", 1)})
    plan, review = reviewed(state, live, ChangeBudget(max_deletes=1))
    doc = plan_document(plan, review).violations[0].model_dump()
    assert {k: doc[k] for k in ("kind", "entity", "key", "message", "allow_flag")} == {
        "kind": "mass-delete",
        "entity": None,
        "key": None,
        "message": "the plan deletes 3 entities, more than the budget of 1 (maxDeletes)",
        "allow_flag": ALLOW_MASS_DELETE,
    }
    assert doc["deletes"] == 3 and doc["limit"] == 1 and doc["limit_name"] == "maxDeletes"
    assert guards({U: {P: MIB}}, {U: {P: MIB}}) == []


# ------------------------------------------------------------------ budget from the manifest


def test_flags_go_over_the_manifests_budget() -> None:
    assert ChangeBudget().resolved().max_relax_factor == DEFAULT_MAX_RELAX_FACTOR
    declared = ChangeBudget(max_deletes=5, max_relax_factor=4.0)
    assert ChangeBudget().over(declared).resolved() == ChangeBudget(
        max_deletes=5,
        max_relax_factor=4.0,
        allow_deletes=False,
        allow_mass_delete=False,
        allow_default_removal=False,
        allow_relax=False,
    )
    flags = ChangeBudget(
        max_deletes=9,
        max_delete_fraction=0.5,
        allow_mass_delete=True,
        allow_default_removal=True,
        allow_relax=True,
    )
    assert flags.over(declared).resolved() == ChangeBudget(
        max_deletes=9,
        max_delete_fraction=0.5,
        max_relax_factor=4.0,
        allow_deletes=False,
        allow_mass_delete=True,
        allow_default_removal=True,
        allow_relax=True,
    )
    assert ChangeBudget(max_relax_factor=2.0).over(declared).max_relax_factor == 2.0
    # The review judges by the combination.
    state = desired({U: {P: 3 * MIB}}, limits=ChangeBudget(max_relax_factor=2.0))
    assert kinds(list(reviewed(state, {U: {P: MIB}})[1].violations)) == [(GuardKind.RELAX, U, P)]
    assert reviewed(state, {U: {P: MIB}}, ChangeBudget(max_relax_factor=4.0))[1].violations == ()
