"""quotaform.guards: protection, the change budget, and removal fallbacks."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from quotaform.desired import (
    ChangeLimits,
    DesiredEntity,
    DesiredState,
    Scope,
    ScopeRule,
    SourceLocation,
)
from quotaform.diff import compute_plan
from quotaform.entity import Entity
from quotaform.guards import (
    ALLOW_DEFAULT_REMOVAL,
    ALLOW_MASS_DELETE,
    ALLOW_RELAX,
    DEFAULT_MAX_RELAX_FACTOR,
    ChangeBudget,
    Fallback,
    GuardKind,
    GuardViolation,
    budget_from_manifest,
    check_guards,
    explain_removal,
    removal_notes,
)
from quotaform.live import LiveState
from quotaform.plan import Plan

MIB = 1024.0**2
P = "producer_byte_rate"
C = "consumer_byte_rate"
R = "request_percentage"
CONN = "connection_creation_rate"

ALL_SHAPES = Scope.build(
    ScopeRule.build(shape) for shape in (("user",), ("client-id",), ("user", "client-id"), ("ip",))
)

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
    limits: ChangeLimits | None = None,
) -> DesiredState:
    return DesiredState.build(
        cluster="test",
        cluster_id=None,
        scope=scope,
        allow_deletes=True,
        entities=[
            DesiredEntity(e, dict(q), e in prevent_destroy, SourceLocation("m.yaml", i + 1))
            for i, (e, q) in enumerate(entities.items())
        ],
        protected=protected,
        change_limits=limits,
    )


def plan_of(state: DesiredState, live: Quotas) -> Plan:
    return compute_plan(state, LiveState(live))


def guards(
    live: Quotas, wanted: Quotas, budget: ChangeBudget | None = None, **kwargs: object
) -> list[GuardViolation]:
    state = desired(wanted, **kwargs)  # type: ignore[arg-type]
    return check_guards(plan_of(state, live), state, budget or ChangeBudget())


def kinds(violations: list[GuardViolation]) -> list[tuple[GuardKind, Entity | None, str | None]]:
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
    assert explain_removal(removed, key, after) == expected


def test_fallback_ignores_the_removed_entity_and_more_specific_levels() -> None:
    # The removed entity may still be in `after` with other keys; levels above
    # it are never consulted.
    after = {U: {C: 1.0}, U_C: {P: 1.0}, U_DC: {P: 2.0}, DU: {P: 6.0}}
    assert explain_removal(U, P, after) == Fallback(P, DU, 6.0, "client-id")


def test_named_default_user_is_not_the_default_entity() -> None:
    literal = Entity.of(user="<default>")
    assert explain_removal(U, P, {literal: {P: 1.0}}) == Fallback(P, None, None, "client-id")
    assert explain_removal(literal, P, {DU: {P: 6.0}}) == Fallback(P, DU, 6.0, "client-id")


# ------------------------------------------------------------------ fallbacks: ip


def test_fallback_for_ip() -> None:
    assert explain_removal(IP_A, CONN, {DIP: {CONN: 20.0}}) == Fallback(CONN, DIP, 20.0)
    assert explain_removal(IP_A, CONN, {Entity.of(ip="192.0.2.2"): {CONN: 5.0}}) == Fallback(
        CONN, None, None
    )
    assert explain_removal(DIP, CONN, {IP_A: {CONN: 5.0}}) == Fallback(CONN, None, None)
    # ip levels never fall through to user / client-id entities
    assert explain_removal(IP_A, CONN, {DU: {CONN: 1.0}}) == Fallback(CONN, None, None)


# ------------------------------------------------------------------ fallbacks: scope, text


def test_fallback_outside_the_scope_is_unknown() -> None:
    only_named_users = Scope.build(
        [ScopeRule.build(("user",), {"user": ["svc-"]}, include_defaults=False)]
    )
    svc = Entity.of(user="svc-a")
    found = explain_removal(svc, P, {}, scope=only_named_users)
    assert found == Fallback(P, DU_DC, None, "client-id")
    assert not found.known and not found.unlimited
    assert str(found) == (
        "falls back to user=<default>, client-id=<default> if that sets it (outside the "
        "manifests' scope: not known here) for client ids without their own quota"
    )
    # In-scope levels that are absent are known to be empty: the walk goes on.
    assert explain_removal(svc, P, {DU: {P: 6.0}}, scope=ALL_SHAPES) == Fallback(
        P, DU, 6.0, "client-id"
    )


def test_fallback_text_and_json() -> None:
    assert str(Fallback(P, DU, MIB)) == "falls back to user=<default> (1MiB)"
    assert str(Fallback(P, None, None)) == "unlimited"
    assert (
        str(Fallback(R, DU_DC, 25.0, "client-id"))
        == "falls back to user=<default>, client-id=<default> (25%) for client ids without "
        "their own quota"
    )
    assert str(Fallback(P, Entity.of(client_id="a b"), 512.0)) == (
        'falls back to client-id="a b" (512)'
    )
    assert Fallback(P, DU, MIB, "client-id").as_dict() == {
        "key": P,
        "entity": {"user": None},
        "value": MIB,
        "unlimited": False,
        "known": True,
        "varies_by": "client-id",
        "text": "falls back to user=<default> (1MiB) for client ids without their own quota",
    }
    assert Fallback(P, None, None).as_dict()["unlimited"] is True


def test_fallback_rejects_unknown_shapes() -> None:
    with pytest.raises(ValueError, match="not a client-quota entity"):
        explain_removal(Entity.of(user="u", ip="192.0.2.1"), P, {})


def test_removal_notes_cover_updates_and_deletes_in_plan_order() -> None:
    state = desired({U: {P: MIB}, DU: {P: 2 * MIB}})
    live = {U: {P: MIB, C: MIB}, IP_A: {CONN: 5.0}, DU: {P: 2 * MIB, C: 3 * MIB}}
    notes = removal_notes(plan_of(state, live), state)
    assert list(notes) == [(DU, C), (U, C), (IP_A, CONN)]
    assert notes[(U, C)] == Fallback(C, None, None, "client-id")  # DU loses C in the same plan
    assert notes[(IP_A, CONN)] == Fallback(CONN, None, None)
    with_default_ip = desired({U: {P: MIB}, DU: {P: 2 * MIB}, DIP: {CONN: 50.0}})
    notes = removal_notes(plan_of(with_default_ip, live), with_default_ip)
    assert notes[(IP_A, CONN)] == Fallback(CONN, DIP, 50.0)


# ------------------------------------------------------------------ protection


def test_deleting_a_protected_entity_is_always_refused() -> None:
    where = SourceLocation("shared.yaml", 7)
    everything = ChangeBudget(
        allow_mass_delete=True,
        allow_default_removal=True,
        allow_relax=True,
        max_relax_factor=None,
    )
    found = guards(
        {U: {P: MIB}, Entity.of(user="v"): {P: MIB}},
        {},
        everything,
        protected={U: where},
    )
    assert kinds(found) == [(GuardKind.PROTECTED, U, None)]
    assert found[0].allow_flag is None
    assert found[0].message == (
        'user="u" is protected (shared.yaml:7) and would be deleted: declare its quotas '
        "again, or remove the protection in a reviewed change first"
    )
    assert str(found[0]).endswith("(no flag overrides this)")


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
    assert found[0].message == (
        'user="u" has preventDestroy (m.yaml:1) and would lose consumer_byte_rate: keep the '
        "key in the manifest, or drop preventDestroy in a reviewed change first"
    )
    assert all(v.allow_flag is None for v in found)
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
    budget = ChangeBudget(max_deletes=2, max_relax_factor=None)
    found = guards(live, keep, budget)
    assert kinds(found) == [(GuardKind.MASS_DELETE, None, None)]
    assert found[0].message == "the plan deletes 3 entities, more than the budget of 2 (maxDeletes)"
    assert str(found[0]).endswith(f"(pass {ALLOW_MASS_DELETE} to allow)")
    assert guards(live, keep, ChangeBudget(max_deletes=3, max_relax_factor=None)) == []
    allowed = ChangeBudget(max_deletes=2, allow_mass_delete=True, max_relax_factor=None)
    assert guards(live, keep, allowed) == []


def test_delete_share_budget_counts_live_entities() -> None:
    live = _users(10)
    keep = dict(list(live.items())[:8])
    creates = {Entity.of(user=f"new{i}"): {P: MIB} for i in range(90)}
    budget = ChangeBudget(max_delete_fraction=0.1, max_relax_factor=None)
    found = guards(live, {**keep, **creates}, budget)
    assert [v.message for v in found] == [
        "the plan deletes 2 of 10 live in-scope entities (20%), more than the budget of "
        "10% (maxDeleteFraction)"
    ]
    assert guards(live, dict(list(live.items())[:9]), budget) == []
    both = ChangeBudget(max_deletes=1, max_delete_fraction=0.1, max_relax_factor=None)
    assert len(guards(live, keep, both)) == 2
    assert guards({}, creates, budget) == []  # nothing live: nothing to share


# ------------------------------------------------------------------ default removal


def test_default_entity_delete_and_key_removal() -> None:
    relaxed = ChangeBudget(max_relax_factor=None)
    found = guards({DU: {P: MIB, C: MIB}, DIP: {CONN: 5.0}}, {DU: {P: MIB}}, relaxed)
    assert kinds(found) == [
        (GuardKind.DEFAULT_REMOVAL, DU, C),
        (GuardKind.DEFAULT_REMOVAL, DIP, None),
    ]
    assert found[0].message == "removing consumer_byte_rate from the default entity user=<default>"
    assert found[1].message == (
        "deleting the default entity ip=<default> (connection_creation_rate): every client "
        "that relies on it falls back to a less specific level or is unlimited"
    )
    assert {v.allow_flag for v in found} == {ALLOW_DEFAULT_REMOVAL}
    # Partly default entities count too.
    found = guards({U_DC: {P: MIB}}, {}, relaxed)
    assert kinds(found) == [(GuardKind.DEFAULT_REMOVAL, U_DC, None)]
    allowed = ChangeBudget(max_relax_factor=None, allow_default_removal=True)
    assert guards({DU: {P: MIB, C: MIB}, DIP: {CONN: 5.0}}, {DU: {P: MIB}}, allowed) == []
    # Changing a default's value is not a removal.
    assert guards({DU: {P: MIB}}, {DU: {P: 2 * MIB}}) == []


# ------------------------------------------------------------------ relax


def test_raising_a_value_beyond_the_factor() -> None:
    found = guards({U: {P: MIB, C: MIB}}, {U: {P: 11 * MIB, C: 10 * MIB}})
    assert kinds(found) == [(GuardKind.RELAX, U, P)]
    assert found[0].message == (
        'producer_byte_rate of user="u" rises from 1MiB to 11MiB: 11x, more than the '
        "budget's 10x (maxRelaxFactor)"
    )
    assert found[0].allow_flag == ALLOW_RELAX
    assert guards({U: {P: MIB}}, {U: {P: 11 * MIB}}, ChangeBudget(max_relax_factor=20)) == []
    big = guards({U: {P: 1.0}}, {U: {P: 5000.0}})
    assert big[0].message.startswith('producer_byte_rate of user="u" rises from 1 to 5kB: 5,000x')
    assert guards({U: {P: MIB}}, {U: {P: 11 * MIB}}, ChangeBudget(allow_relax=True)) == []
    assert guards({U: {P: MIB}}, {U: {P: 11 * MIB}}, ChangeBudget(max_relax_factor=None)) == []
    # Lowering is never relaxing; adding a key is not judged.
    assert guards({U: {P: 100 * MIB}}, {U: {P: MIB, C: 1000 * MIB}}) == []


def test_removing_a_key_relaxes_to_its_fallback() -> None:
    # Unlimited.
    found = guards({U: {P: MIB, C: MIB}}, {U: {C: MIB}})
    assert kinds(found) == [(GuardKind.RELAX, U, P)]
    assert found[0].message == (
        'removing producer_byte_rate (1MiB) from user="u": its clients become unlimited '
        "for client ids without their own quota"
    )
    # A fallback within the factor is fine, beyond it is not.
    assert guards({U: {P: MIB, C: MIB}, DU: {P: 8 * MIB}}, {U: {C: MIB}, DU: {P: 8 * MIB}}) == []
    found = guards({U: {P: MIB, C: MIB}, DU: {P: 64 * MIB}}, {U: {C: MIB}, DU: {P: 64 * MIB}})
    assert [v.message for v in found] == [
        'removing producer_byte_rate (1MiB) from user="u": falls back to user=<default> '
        "(64MiB) for client ids without their own quota: 64x, more than the budget's 10x "
        "(maxRelaxFactor)"
    ]
    # A delete removes every key.
    found = guards({IP_A: {CONN: 5.0}, DIP: {CONN: 10.0}}, {DIP: {CONN: 10.0}})
    assert found == []
    found = guards({IP_A: {CONN: 5.0}}, {})
    assert kinds(found) == [(GuardKind.RELAX, IP_A, CONN)]


def test_removal_to_an_unknown_fallback_is_refused() -> None:
    scope = Scope.build([ScopeRule.build(("user",), {"user": ["svc-"]}, include_defaults=False)])
    svc = Entity.of(user="svc-a")
    found = guards({svc: {P: MIB, C: MIB}}, {svc: {C: MIB}}, scope=scope)
    assert [v.message for v in found] == [
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
        (GuardKind.RELAX, DU, P),
        (GuardKind.PROTECTED, U, None),
        (GuardKind.RELAX, U, P),
        (GuardKind.RELAX, Entity.of(user="v"), P),
    ]
    assert found[0].as_dict() == {
        "kind": "mass-delete",
        "entity": None,
        "key": None,
        "message": "the plan deletes 3 entities, more than the budget of 1 (maxDeletes)",
        "allow_flag": ALLOW_MASS_DELETE,
    }
    assert guards({U: {P: MIB}}, {U: {P: MIB}}) == []


# ------------------------------------------------------------------ budget from the manifest


def test_budget_from_manifest_and_flags() -> None:
    assert budget_from_manifest(desired({})) == ChangeBudget()
    assert ChangeBudget().max_relax_factor == DEFAULT_MAX_RELAX_FACTOR
    state = desired({}, limits=ChangeLimits(max_deletes=5, max_relax_factor=4.0))
    assert budget_from_manifest(state) == ChangeBudget(max_deletes=5, max_relax_factor=4.0)
    assert budget_from_manifest(
        state,
        max_deletes=9,
        max_delete_fraction=0.5,
        allow_mass_delete=True,
        allow_default_removal=True,
        allow_relax=True,
    ) == ChangeBudget(
        max_deletes=9,
        max_delete_fraction=0.5,
        allow_default_removal=True,
        max_relax_factor=4.0,
        allow_mass_delete=True,
        allow_relax=True,
    )
    assert budget_from_manifest(state, max_relax_factor=2.0).max_relax_factor == 2.0
