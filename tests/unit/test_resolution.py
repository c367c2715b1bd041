"""Kafka's quota resolution (quotaform.kafka.resolution): the conformance cases,
the two-step algorithm against the plain "first of levels 1-8" rule, and the
level table itself."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import (
    CLIENT_LEVELS,
    IP_LEVELS,
    Principal,
    QuotaIndex,
    candidates,
    level_of,
    resolve,
    resolve_all,
)
from tests.conformance.cases import ResolutionCase, load_cases

CASES = load_cases()


def test_the_conformance_file_covers_every_level_key_and_ip() -> None:
    levels = {
        (c.principal.is_ip, e["level"]) for c in CASES for e in c.expect.values() if e["level"]
    }
    assert {(False, n) for n in range(1, 9)} <= levels
    assert {(True, 1), (True, 2)} <= levels
    resolved_keys = {k for c in CASES for k, e in c.expect.items() if e["value"] is not None}
    assert resolved_keys == set(QUOTA_KEYS)
    assert any(e["value"] is None for c in CASES for e in c.expect.values())
    # keys from different levels for one principal
    assert any(len({e["level"] for e in c.expect.values() if e["level"]}) >= 3 for c in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_case(case: ResolutionCase) -> None:
    got = resolve_all(QuotaIndex(case.entries), case.principal)
    assert set(got) == set(case.expect), "every key that applies is resolved"
    for key, want in case.expect.items():
        r = got[key]
        assert (
            r.value,
            r.level.number if r.level else None,
            r.entity.as_dict() if r.entity else None,
            r.tags.as_dict(),
            r.recorded,
        ) == (want["value"], want["level"], want["entity"], want["tags"], want["recorded"]), key


# ------------------------------------------------------------------ two steps == first match

_USERS = st.sampled_from(["alice", "bob", None])
_CLIENTS = st.sampled_from(["app", "web", None])
_ENTITY = st.one_of(
    st.builds(lambda u, c: Entity.of(user=u, client_id=c), _USERS, _CLIENTS),
    st.builds(lambda u: Entity.of(user=u), _USERS),
    st.builds(lambda c: Entity.of(client_id=c), _CLIENTS),
)
_ENTRIES = st.dictionaries(
    _ENTITY,
    st.dictionaries(
        st.sampled_from(["producer_byte_rate", "consumer_byte_rate"]),
        st.integers(1, 10**6).map(float),
        min_size=1,
    ),
    max_size=12,
)


@settings(max_examples=400, deadline=None)
@given(
    entries=_ENTRIES,
    user=st.sampled_from(["alice", "bob"]),
    client=st.sampled_from(["app", "web"]),
)
def test_with_a_client_id_the_broker_steps_equal_the_first_matching_level(
    entries: dict[Entity, dict[str, float]], user: str, client: str
) -> None:
    principal = Principal(user=user, client_id=client)
    index = QuotaIndex(entries)
    for key in ("producer_byte_rate", "consumer_byte_rate"):
        first = next(
            ((lvl, e) for lvl, e in candidates(principal) if key in entries.get(e, {})), None
        )
        got = resolve(index, principal, key)
        if first is None:
            assert got.unlimited
        else:
            assert (got.level, got.entity, got.value) == (
                first[0],
                first[1],
                entries[first[1]][key],
            )
            # The tags name the principal's real names, never <default>.
            assert got.tags.user in ("", user) and got.tags.client_id in ("", client)


# ------------------------------------------------------------------ the table


def test_level_table() -> None:
    assert [lvl.number for lvl in CLIENT_LEVELS] == list(range(1, 9))
    assert [lvl.pattern() for lvl in CLIENT_LEVELS] == [
        "{user=U, client-id=C}",
        "{user=U, client-id=<default>}",
        "{user=U}",
        "{user=<default>, client-id=C}",
        "{user=<default>, client-id=<default>}",
        "{user=<default>}",
        "{client-id=C}",
        "{client-id=<default>}",
    ]
    assert [lvl.pattern() for lvl in IP_LEVELS] == ["{ip=A}", "{ip=<default>}"]
    assert level_of(Entity.of(user=None, client_id="x")).number == 4
    assert level_of(Entity.of(ip=None)) is IP_LEVELS[1]
    with pytest.raises(ValueError, match="not a client-quota entity"):
        level_of(Entity.of(user="u", ip="192.0.2.1"))


def test_candidates_skip_unknown_and_empty_names() -> None:
    assert [lvl.number for lvl, _ in candidates(Principal(user="u", client_id="c"))] == list(
        range(1, 9)
    )
    assert [lvl.number for lvl, _ in candidates(Principal(user="u", client_id=""))] == [
        2,
        3,
        5,
        6,
        8,
    ]
    assert [lvl.number for lvl, _ in candidates(Principal(client_id="c"))] == [4, 5, 6, 7, 8]
    assert [e for _, e in candidates(Principal(ip="192.0.2.1"))] == [
        Entity.of(ip="192.0.2.1"),
        Entity.of(ip=None),
    ]
    with pytest.raises(ValueError, match="no user or client-id"):
        Principal(user="u", ip="192.0.2.1")


def test_keys_must_fit_the_principal_and_unlimited_is_the_brokers_bound() -> None:
    index = QuotaIndex({})
    with pytest.raises(ValueError, match="does not apply"):
        resolve(index, Principal(user="u", client_id="c"), "connection_creation_rate")
    r = resolve(index, Principal(user="u", client_id="c"), "producer_byte_rate")
    assert r.bound == float(2**63 - 1)
    assert resolve(index, Principal(ip="192.0.2.1"), "connection_creation_rate").bound == float(
        2**31 - 1
    )
    # Keys that do not fit an entity's types are ignored, as the broker ignores them.
    odd = QuotaIndex({Entity.of(ip=None): {"producer_byte_rate": 5.0}})
    assert resolve(odd, Principal(user="u", client_id="c"), "producer_byte_rate").unlimited


def test_entity_hash_and_shape_survive_pickling() -> None:
    # Entity keeps its hash and types precomputed; a pickle (Spark ships
    # entities to worker processes, whose string hashes differ) rebuilds them.
    import pickle

    entity = Entity.of(user="svc-a", client_id=None)
    again = pickle.loads(pickle.dumps(entity))
    assert again == entity and hash(again) == hash(entity)
    assert again.types == ("user", "client-id") and again.types is entity.types
    assert {entity: 1}[Entity.from_mapping({"client-id": None, "user": "svc-a"})] == 1
    assert Entity.of(user="a") != Entity.of(client_id="a")
