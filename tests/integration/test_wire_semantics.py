"""Client-quota wire semantics, each checked against the real broker.

Every test here would fail if the broker's behaviour (or our layer over it)
changed. Names are made unique per test; tests that touch the global default
entities remove what they set.
"""

from __future__ import annotations

import pytest
from kafka.protocol.admin import AlterClientQuotasRequest

from quotaform.cluster.wire import AlterOutcome, FilterComponent, QuotaAlteration
from quotaform.kafka.entity import Entity

from .helpers import barrier, eventually

pytestmark = pytest.mark.broker


def _set(admin, entity: Entity, **values: float | None):  # type: ignore[no-untyped-def]
    return admin.alter_client_quotas([QuotaAlteration(entity, values)], validate_only=False)[entity]


def _exact_filter(entity: Entity) -> list[FilterComponent]:
    return [
        FilterComponent.default(t) if n is None else FilterComponent.exact(t, n)
        for t, n in entity.parts
    ]


def _describe_one(admin, entity: Entity) -> dict[str, float] | None:  # type: ignore[no-untyped-def]
    return admin.describe_client_quotas(_exact_filter(entity), strict=True).get(entity)


def _wait_for(admin, entity: Entity, expected: dict[str, float] | None) -> None:  # type: ignore[no-untyped-def]
    eventually(lambda: _describe_one(admin, entity), lambda got: got == expected)


def _error_of(admin, entity: Entity, **values: float):  # type: ignore[no-untyped-def]
    result = admin.alter_client_quotas([QuotaAlteration(entity, values)], validate_only=True)[
        entity
    ]
    assert result.outcome is AlterOutcome.FAILED, result
    assert result.error is not None
    return result.error


def _shapes(uniq: str) -> list[Entity]:
    u, c = f"{uniq}user", f"{uniq}client"
    return [
        Entity.of(user=u),
        Entity.of(client_id=c),
        Entity.of(user=u, client_id=c),
        Entity.of(ip="192.0.2.17"),
    ]


DEFAULT_SHAPES = [
    Entity.of(user=None),
    Entity.of(client_id=None),
    Entity.of(user=None, client_id=None),
    Entity.of(ip=None),
]


def test_every_named_entity_shape_round_trips(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    for entity in _shapes(uniq):
        key = "connection_creation_rate" if entity.types == ("ip",) else "producer_byte_rate"
        assert _set(admin, entity, **{key: 4096.0}).outcome is AlterOutcome.APPLIED
        _wait_for(admin, entity, {key: 4096.0})
        assert _set(admin, entity, **{key: None}).outcome is AlterOutcome.APPLIED
        _wait_for(admin, entity, None)


def test_all_six_default_shapes_round_trip_with_null_names(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    shapes = [
        *DEFAULT_SHAPES,
        Entity.of(user=f"{uniq}u", client_id=None),
        Entity.of(user=None, client_id=f"{uniq}c"),
    ]
    assert len({e.shape for e in shapes}) == 6
    try:
        for entity in shapes:
            key = "connection_creation_rate" if entity.types == ("ip",) else "consumer_byte_rate"
            assert _set(admin, entity, **{key: 777.0}).outcome is AlterOutcome.APPLIED
        for entity in shapes:
            key = "connection_creation_rate" if entity.types == ("ip",) else "consumer_byte_rate"
            _wait_for(admin, entity, {key: 777.0})
        # The default user is not the user literally named "<default>".
        assert _describe_one(admin, Entity.of(user="<default>")) != {"consumer_byte_rate": 777.0}
    finally:
        for entity in shapes:
            key = "connection_creation_rate" if entity.types == ("ip",) else "consumer_byte_rate"
            _set(admin, entity, **{key: None})
    for entity in shapes:
        _wait_for(admin, entity, None)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("producer_byte_rate", 1048576.0),
        ("consumer_byte_rate", 2097152.0),
        ("request_percentage", 12.5),
        ("controller_mutation_rate", 0.5),
    ],
)
def test_each_client_quota_key_round_trips(admin, uniq, key: str, value: float) -> None:  # type: ignore[no-untyped-def]
    entity = Entity.of(user=f"{uniq}keys", client_id=f"{uniq}app")
    assert _set(admin, entity, **{key: value}).outcome is AlterOutcome.APPLIED
    _wait_for(admin, entity, {key: value})
    _set(admin, entity, **{key: None})


def test_connection_creation_rate_round_trips_on_ip(admin) -> None:  # type: ignore[no-untyped-def]
    entity = Entity.of(ip="192.0.2.33")
    assert _set(admin, entity, connection_creation_rate=15.0).outcome is AlterOutcome.APPLIED
    _wait_for(admin, entity, {"connection_creation_rate": 15.0})
    _set(admin, entity, connection_creation_rate=None)
    _wait_for(admin, entity, None)


def test_validate_only_writes_nothing(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    entity = Entity.of(user=f"{uniq}dry")
    results = admin.alter_client_quotas(
        [QuotaAlteration(entity, {"producer_byte_rate": 1000.0})], validate_only=True
    )
    assert results[entity].outcome is AlterOutcome.APPLIED
    barrier(admin)
    assert _describe_one(admin, entity) is None


def test_invalid_and_valid_entity_in_one_request_are_independent(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    good = Entity.of(user=f"{uniq}good")
    bad = Entity.of(user=f"{uniq}bad")
    results = admin.alter_client_quotas(
        [
            QuotaAlteration(bad, {"producer_byte_rate": 10.5}),
            QuotaAlteration(good, {"producer_byte_rate": 2048.0}),
        ],
        validate_only=False,
    )
    assert results[good].outcome is AlterOutcome.APPLIED
    assert results[bad].outcome is AlterOutcome.FAILED
    assert results[bad].error is not None and results[bad].error.code == 42
    _wait_for(admin, good, {"producer_byte_rate": 2048.0})
    barrier(admin)
    assert _describe_one(admin, bad) is None
    _set(admin, good, producer_byte_rate=None)


def test_unknown_key_is_rejected(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    error = _error_of(admin, Entity.of(user=f"{uniq}x"), bogus_rate=5.0)
    assert error.code == 42
    assert "Invalid configuration key bogus_rate" in (error.broker_message or "")


@pytest.mark.parametrize(
    ("entity", "key"),
    [
        (Entity.of(user="key-type-user"), "connection_creation_rate"),
        (Entity.of(ip="192.0.2.40"), "producer_byte_rate"),
        (Entity.of(ip="192.0.2.40"), "request_percentage"),
    ],
)
def test_key_not_valid_for_entity_type_is_rejected(admin, entity: Entity, key: str) -> None:  # type: ignore[no-untyped-def]
    error = _error_of(admin, entity, **{key: 5.0})
    assert error.code == 42
    assert f"Invalid configuration key {key}" in (error.broker_message or "")


@pytest.mark.parametrize(
    ("entity", "key"),
    [
        (Entity.of(user="frac"), "producer_byte_rate"),
        (Entity.of(client_id="frac"), "consumer_byte_rate"),
        (Entity.of(ip="192.0.2.41"), "connection_creation_rate"),
    ],
)
def test_fractional_long_and_int_values_are_rejected(admin, entity: Entity, key: str) -> None:  # type: ignore[no-untyped-def]
    error = _error_of(admin, entity, **{key: 1024.5})
    assert error.code == 42
    assert "cannot be a fractional value" in (error.broker_message or "")


def test_fractional_double_values_are_accepted(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    entity = Entity.of(user=f"{uniq}dbl")
    result = admin.alter_client_quotas(
        [QuotaAlteration(entity, {"request_percentage": 33.3, "controller_mutation_rate": 0.25})],
        validate_only=True,
    )[entity]
    assert result.outcome is AlterOutcome.APPLIED


@pytest.mark.parametrize("value", [0.0, -1.0, -1048576.0])
@pytest.mark.parametrize("key", ["producer_byte_rate", "request_percentage"])
def test_zero_and_negative_values_are_rejected(admin, key: str, value: float) -> None:  # type: ignore[no-untyped-def]
    error = _error_of(admin, Entity.of(user="nonpositive"), **{key: value})
    assert error.code == 42
    assert "must be greater than 0" in (error.broker_message or "")


def test_int_value_above_integer_max_is_rejected(admin) -> None:  # type: ignore[no-untyped-def]
    error = _error_of(admin, Entity.of(ip="192.0.2.42"), connection_creation_rate=float(2**31))
    assert error.code == 42
    assert "too large" in (error.broker_message or "")


def test_ip_combined_with_user_is_rejected(admin) -> None:  # type: ignore[no-untyped-def]
    entity = Entity.of(user="mixed", ip="192.0.2.43")
    error = _error_of(admin, entity, connection_creation_rate=5.0)
    assert error.code == 42, error


def test_ip_with_cidr_is_rejected(admin) -> None:  # type: ignore[no-untyped-def]
    error = _error_of(admin, Entity.of(ip="192.0.2.0/24"), connection_creation_rate=5.0)
    assert error.code == 42, error


def test_empty_name_is_rejected(admin) -> None:  # type: ignore[no-untyped-def]
    error = _error_of(admin, Entity.of(user=""), producer_byte_rate=1024.0)
    assert error.code == 42
    assert "Empty" in (error.broker_message or ""), error


@pytest.mark.parametrize(
    "name", ["with space", "ünïcødé-ユーザー", "100%", "<default>", "a/b:c=d,e"]
)
def test_unusual_names_round_trip_unchanged(admin, uniq, name: str) -> None:  # type: ignore[no-untyped-def]
    full = name if name == "<default>" else f"{uniq}{name}"
    entity = Entity.of(user=full)
    assert _set(admin, entity, producer_byte_rate=3000.0).outcome is AlterOutcome.APPLIED
    eventually(
        lambda: admin.describe_client_quotas([FilterComponent.exact("user", full)], strict=True),
        lambda got: got.get(entity, {}).get("producer_byte_rate") == 3000.0,
    )
    if name == "<default>":
        # The literal name is an ordinary entity: the default user is untouched.
        assert _describe_one(admin, Entity.of(user=None)) != {"producer_byte_rate": 3000.0}
    _set(admin, entity, producer_byte_rate=None)
    eventually(
        lambda: _describe_one(admin, entity) or {}, lambda got: "producer_byte_rate" not in got
    )


def test_ipv6_spellings_are_two_entities(admin) -> None:  # type: ignore[no-untyped-def]
    short, long = Entity.of(ip="::1"), Entity.of(ip="0:0:0:0:0:0:0:1")
    try:
        _set(admin, short, connection_creation_rate=1000.0)
        _set(admin, long, connection_creation_rate=2000.0)
        _wait_for(admin, short, {"connection_creation_rate": 1000.0})
        _wait_for(admin, long, {"connection_creation_rate": 2000.0})
    finally:
        _set(admin, short, connection_creation_rate=None)
        _set(admin, long, connection_creation_rate=None)


class TestDescribeFilters:
    """Exact / default / any match types, with and without strict."""

    @pytest.fixture
    def population(self, admin, uniq):  # type: ignore[no-untyped-def]
        u, c = f"{uniq}fu", f"{uniq}fc"
        entities = {
            Entity.of(user=u): 1001.0,
            Entity.of(user=u, client_id=c): 1002.0,
            Entity.of(user=u, client_id=None): 1003.0,
            Entity.of(client_id=c): 1004.0,
        }
        admin.alter_client_quotas(
            [QuotaAlteration(e, {"producer_byte_rate": v}) for e, v in entities.items()],
            validate_only=False,
        )
        for e, v in entities.items():
            _wait_for(admin, e, {"producer_byte_rate": v})
        yield u, c, entities
        admin.alter_client_quotas(
            [QuotaAlteration(e, {"producer_byte_rate": None}) for e in entities],
            validate_only=False,
        )

    def test_exact_user_strict_returns_only_the_user_entity(self, admin, population) -> None:  # type: ignore[no-untyped-def]
        u, _, _ = population
        got = admin.describe_client_quotas([FilterComponent.exact("user", u)], strict=True)
        assert got == {Entity.of(user=u): {"producer_byte_rate": 1001.0}}

    def test_exact_user_not_strict_includes_user_client_id_entities(
        self, admin, population
    ) -> None:  # type: ignore[no-untyped-def]
        u, c, _ = population
        got = admin.describe_client_quotas([FilterComponent.exact("user", u)], strict=False)
        assert set(got) == {
            Entity.of(user=u),
            Entity.of(user=u, client_id=c),
            Entity.of(user=u, client_id=None),
        }

    def test_default_client_id_matches_only_the_default(self, admin, population) -> None:  # type: ignore[no-untyped-def]
        u, _, _ = population
        got = admin.describe_client_quotas(
            [FilterComponent.exact("user", u), FilterComponent.default("client-id")], strict=True
        )
        assert got == {Entity.of(user=u, client_id=None): {"producer_byte_rate": 1003.0}}

    def test_any_client_id_includes_named_and_default(self, admin, population) -> None:  # type: ignore[no-untyped-def]
        u, c, _ = population
        got = admin.describe_client_quotas(
            [FilterComponent.exact("user", u), FilterComponent.any("client-id")], strict=True
        )
        assert set(got) == {Entity.of(user=u, client_id=c), Entity.of(user=u, client_id=None)}

    def test_any_user_strict_excludes_two_part_entities(self, admin, population) -> None:  # type: ignore[no-untyped-def]
        u, _c, _ = population
        got = admin.describe_client_quotas([FilterComponent.any("user")], strict=True)
        assert Entity.of(user=u) in got
        assert all(e.types == ("user",) for e in got)

    def test_empty_filter_not_strict_is_everything_and_strict_is_nothing(
        self, admin, population
    ) -> None:  # type: ignore[no-untyped-def]
        _, _, entities = population
        everything = admin.describe_client_quotas([], strict=False)
        assert set(entities) <= set(everything)
        assert admin.describe_client_quotas([], strict=True) == {}

    def test_match_string_with_any_is_rejected(self, admin) -> None:  # type: ignore[no-untyped-def]
        from quotaform.cluster.wire.types import MatchType
        from quotaform.errors import BrokerError

        with pytest.raises(BrokerError) as info:
            admin.describe_client_quotas(
                [FilterComponent("user", MatchType.ANY, "x")], strict=False
            )
        assert info.value.code == 42

    def test_ip_filter_mixed_with_user_is_rejected(self, admin) -> None:  # type: ignore[no-untyped-def]
        from quotaform.errors import BrokerError

        with pytest.raises(BrokerError) as info:
            admin.describe_client_quotas(
                [FilterComponent.any("user"), FilterComponent.any("ip")], strict=False
            )
        assert info.value.code == 42


def test_removing_the_last_key_makes_the_entity_disappear(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    entity = Entity.of(user=f"{uniq}gone")
    _set(admin, entity, producer_byte_rate=100.0, consumer_byte_rate=200.0)
    _wait_for(admin, entity, {"producer_byte_rate": 100.0, "consumer_byte_rate": 200.0})
    _set(admin, entity, producer_byte_rate=None)
    _wait_for(admin, entity, {"consumer_byte_rate": 200.0})
    _set(admin, entity, consumer_byte_rate=None)
    _wait_for(admin, entity, None)
    # Removing a key that is not set is accepted and writes nothing.
    assert _set(admin, entity, consumer_byte_rate=None).outcome is AlterOutcome.APPLIED
    barrier(admin)
    assert _describe_one(admin, entity) is None


def test_over_10000_records_in_one_raw_request_is_a_policy_violation(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    entry = AlterClientQuotasRequest.EntryData
    request = AlterClientQuotasRequest(
        entries=[
            entry(
                entity=[entry.EntityData(entity_type="user", entity_name=f"{uniq}{i}")],
                ops=[entry.OpData(key="producer_byte_rate", value=1000.0, remove=False)],
            )
            for i in range(10_001)
        ],
        validate_only=True,
    )

    async def send():  # type: ignore[no-untyped-def]
        return await admin._manager.send(request)

    response = admin._manager.run(send)
    codes = {e.error_code for e in response.entries}
    assert codes == {44}


def test_our_batching_keeps_10001_entities_under_the_limit(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    alterations = [
        QuotaAlteration(Entity.of(user=f"{uniq}{i}"), {"producer_byte_rate": 1000.0})
        for i in range(10_001)
    ]
    before = admin.rpc_counts.get("AlterClientQuotas", 0)
    results = admin.alter_client_quotas(alterations, validate_only=True)
    assert admin.rpc_counts["AlterClientQuotas"] - before == 2
    assert len(results) == 10_001
    assert {r.outcome for r in results.values()} == {AlterOutcome.APPLIED}


def test_results_are_matched_by_entity_not_position(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    # The broker answers in its own order (it groups entries by entity);
    # build a request whose order differs from any natural sort and check
    # every entity still gets its own error text.
    entities = [Entity.of(user=f"{uniq}{i:02d}") for i in range(20)]
    alterations = [
        QuotaAlteration(e, {"producer_byte_rate": 1000.5 if i % 3 == 0 else 1000.0})
        for i, e in enumerate(reversed(entities))
    ]
    results = admin.alter_client_quotas(alterations, validate_only=True)
    for i, e in enumerate(reversed(entities)):
        expect = AlterOutcome.FAILED if i % 3 == 0 else AlterOutcome.APPLIED
        assert results[e].outcome is expect, (e, results[e])


def _raw_alter(admin, entries: list, *, validate_only: bool):  # type: ignore[no-untyped-def,type-arg]
    """An AlterClientQuotas request sent as is (bypassing our layer's checks)."""
    request = AlterClientQuotasRequest(entries=entries, validate_only=validate_only)

    async def send():  # type: ignore[no-untyped-def]
        return await admin._manager.send(request)

    return admin._manager.run(send)


def _raw_entry(etype: str, name: str | None, key: str, value: float):  # type: ignore[no-untyped-def]
    entry = AlterClientQuotasRequest.EntryData
    return entry(
        entity=[entry.EntityData(entity_type=etype, entity_name=name)],
        ops=[entry.OpData(key=key, value=value, remove=False)],
    )


def test_a_duplicate_entity_gets_one_error_yet_its_first_occurrence_applies(admin, uniq) -> None:  # type: ignore[no-untyped-def]
    # Why the wire layer refuses duplicates before sending.
    name = f"{uniq}dup"
    response = _raw_alter(
        admin,
        [
            _raw_entry("user", name, "producer_byte_rate", 1000.0),
            _raw_entry("user", name, "consumer_byte_rate", 2000.0),
        ],
        validate_only=False,
    )
    assert [(e.error_code, "duplicate" in (e.error_message or "")) for e in response.entries] == [
        (42, True)
    ]
    entity = Entity.of(user=name)
    _wait_for(admin, entity, {"producer_byte_rate": 1000.0})
    _set(admin, entity, producer_byte_rate=None)


@pytest.mark.parametrize(
    ("key", "value", "accepted"),
    [
        ("producer_byte_rate", float("nan"), True),
        ("request_percentage", float("nan"), True),
        ("request_percentage", float("inf"), True),
        ("producer_byte_rate", float("inf"), False),
    ],
)
def test_nan_and_infinity_are_not_reliably_rejected(
    admin, key: str, value: float, accepted: bool
) -> None:  # type: ignore[no-untyped-def]
    # Why manifests refuse NaN and Inf client-side.
    response = _raw_alter(admin, [_raw_entry("user", "nan-check", key, value)], validate_only=True)
    assert (response.entries[0].error_code == 0) is accepted, response.entries[0]


def test_ip_names_are_resolved_by_the_controller(admin) -> None:  # type: ignore[no-untyped-def]
    # Why manifests accept only literal addresses: the controller does DNS.
    ok = _raw_alter(
        admin, [_raw_entry("ip", "localhost", "connection_creation_rate", 5.0)], validate_only=True
    )
    assert ok.entries[0].error_code == 0
    bad = _raw_alter(
        admin,
        [_raw_entry("ip", "kafka.example.invalid", "connection_creation_rate", 5.0)],
        validate_only=True,
    )
    assert bad.entries[0].error_code == 42
    assert "not a valid IP or resolvable host" in (bad.entries[0].error_message or "")


def test_unknown_entity_type_in_a_filter_is_unsupported_version(admin) -> None:  # type: ignore[no-untyped-def]
    from quotaform.errors import BrokerError

    with pytest.raises(BrokerError) as info:
        admin.describe_client_quotas([FilterComponent.any("bogus")], strict=False)
    assert info.value.code == 35
