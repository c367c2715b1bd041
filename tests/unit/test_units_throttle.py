"""Kafka's unit, throttle and naming rules written once in quotaform.kafka:
the conformance cases (tests/conformance/units_throttle_cases.yaml) through
the Python engine, the tables every engine reads, and MBean names parsed
back. The same cases run through the Spark engine in
tests/spark/test_spark_units_throttle.py."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quotaform.analytics import engine, model
from quotaform.kafka.entity import CLIENT_ID, SHAPES, USER, Entity
from quotaform.kafka.impact import (
    STEADY_RULES,
    demand_cut,
    fetch_cap,
    first_throttle_ms,
    request_size,
    share_over,
    steady_throttle_ms,
    throughput_after,
)
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.metrics import (
    mbean_name,
    parse_object_name,
    sanitize_user,
    unsanitize_user,
)
from quotaform.kafka.resolution import (
    GROUP_CHANGES,
    GROUP_MERGES,
    GROUP_SAME,
    GROUP_SPLITS,
    OWN_LEVELS,
    TAGS_BY_MASK,
    MetricTags,
    QuotaIndex,
    group_change,
    own_entity,
)
from quotaform.kafka.throttle import (
    DEFAULT_QUOTA_WINDOW_S,
    QUOTA_WINDOW_NUM,
    QUOTA_WINDOW_SIZE_S,
    THROTTLE_CAP_MS,
    THROTTLE_RULES,
    java_round,
    throttle_cap_ms,
    throttle_time_ms,
)
from quotaform.kafka.units import (
    READABLE_STEPS_PER_UNIT,
    UNIT_SUFFIX,
    format_quota_value,
    parse_quota_value,
    readable_quota,
)

from ..conformance.units_cases import (
    FormatCase,
    ReadableCase,
    SteadyCase,
    ThrottleCase,
    UserTagCase,
    load_units_throttle_cases,
)

CASES = load_units_throttle_cases()


# ----------------------------------------------------------------- the file covers the rules


def test_the_conformance_file_covers_every_unit_key_cap_and_edge() -> None:
    for section in (CASES.readable, CASES.format, CASES.throttle):
        assert {c.key for c in section} == set(QUOTA_KEYS)
    assert {QUOTA_KEYS[c.key].unit for c in CASES.readable} == set(READABLE_STEPS_PER_UNIT)
    throttle = CASES.throttle
    for key, rule in THROTTLE_RULES.items():
        over = [c for c in throttle if c.key == key and c.quota and c.observed > c.quota]
        raw = [java_round((c.observed - c.quota) / c.quota * c.window_s * 1000) for c in over]
        if rule.capped:  # a case held at the cap and one under it
            assert any(r > THROTTLE_CAP_MS for r in raw), key
            assert any(0 < r < THROTTLE_CAP_MS for r in raw), key
        else:  # a case the cap would have changed
            assert any(r > THROTTLE_CAP_MS for r in raw), key
    assert any(c.quota is None for c in throttle)  # unlimited
    assert any(c.quota is not None and c.observed == c.quota for c in throttle)  # O == T
    assert any(c.quota == 0 for c in throttle)
    assert any(c.window_s != DEFAULT_QUOTA_WINDOW_S for c in throttle)
    assert {c.sanitized for c in CASES.user_tags} == {True, False}
    assert any(c.tag == "" for c in CASES.user_tags)


# ----------------------------------------------------------------- the cases, Python engine


@pytest.mark.parametrize("case", CASES.readable, ids=lambda c: c.name)
def test_readable_case(case: ReadableCase) -> None:
    got = readable_quota(case.key, case.value)
    assert got == case.readable
    assert got >= case.value or got == pytest.approx(case.value, rel=1e-9)
    assert format_quota_value(case.key, got) == case.text
    assert parse_quota_value(case.key, case.text) == got  # a recommendation reads back


@pytest.mark.parametrize("case", CASES.format, ids=lambda c: c.name)
def test_format_case(case: FormatCase) -> None:
    assert format_quota_value(case.key, case.value) == case.text


@pytest.mark.parametrize("case", CASES.throttle, ids=lambda c: c.name)
def test_throttle_case(case: ThrottleCase) -> None:
    got = throttle_time_ms(case.key, case.observed, case.quota, window_s=case.window_s)
    assert got == case.throttle_ms
    # The analytics' name for the same function.
    assert model.predicted_throttle_ms(
        case.key, case.observed, case.quota, window_s=case.window_s
    ) == (case.throttle_ms)


@pytest.mark.parametrize("case", CASES.user_tags, ids=lambda c: repr(c.tag))
def test_user_tag_case(case: UserTagCase) -> None:
    assert unsanitize_user(case.tag) == case.user
    assert engine.group_tags(case.tag, "app", None).user == case.user
    if case.sanitized:
        assert sanitize_user(case.user) == case.tag


def test_the_readable_cases_through_the_engines_recommend() -> None:
    util = [
        {"cluster": "c", "broker": "1", "user": "", "client_id": f"app-{i}",
         "ip": "192.0.2.1" if "ip" in QUOTA_KEYS[c.key].entity_types else None,
         "quota_key": c.key, "quota_value": None, "p99": c.value, "censored": False,
         "brokers_observed": 1, "cluster_p99": c.value}
        for i, c in enumerate(CASES.readable)
    ]  # fmt: skip
    got = {r["client_id"]: r for r in engine.recommend(util, headroom=1.0)}
    for i, case in enumerate(CASES.readable):
        row = got[f"app-{i}"]
        assert (row["recommended"], row["recommended_text"]) == (case.readable, case.text), case


def _impact_rows(
    case: ThrottleCase, typical: float | None = None
) -> tuple[dict[str, object], dict[Entity, dict[str, float]]]:
    """A group of ``case.key`` unlimited before, whose own entity sets
    ``case.quota`` after; its p99 ``case.observed``, its p50 ``typical``
    (``None``: the same)."""
    is_ip = "ip" in QUOTA_KEYS[case.key].entity_types
    entity = Entity.of(ip="192.0.2.1") if is_ip else Entity.of(user="u", client_id="app")
    row = {
        "cluster": "c", "broker": "1", "user": "" if is_ip else "u",
        "client_id": "" if is_ip else "app", "ip": "192.0.2.1" if is_ip else None,
        "quota_key": case.key, "quota_value": None, "level": None, "entity": None,
        "p50": case.observed if typical is None else typical,
        "p99": case.observed, "censored": False, "brokers_observed": 1,
        "cluster_p99": case.observed,
    }  # fmt: skip
    return row, {entity: {case.key: case.quota}} if case.quota is not None else {}


def test_the_throttle_cases_through_the_engines_impact() -> None:
    for case in CASES.throttle:
        if not case.quota:  # unlimited after too: no change, no row
            continue
        row, after = _impact_rows(case)
        (changed,) = engine.impact([row], {"c": QuotaIndex(after)}, window_s=case.window_s)
        if not STEADY_RULES[case.key].token_bucket:  # the bucket's first throttle is S / T
            assert changed["first_throttle_ms"] == case.throttle_ms, case.name
        # Any demand over the quota runs behind and is throttled S / T in the end.
        assert changed["newly_throttled"] is (case.observed > case.quota)


@pytest.mark.parametrize("case", CASES.steady, ids=lambda c: c.name)
def test_steady_case(case: SteadyCase) -> None:
    size, source = request_size(
        case.key, case.quota, given=case.request_bytes, window_s=case.window_s
    )
    assert (size, source) == (case.size, case.source)
    assert (
        throughput_after(
            case.key, case.observed, case.quota, size, window_s=case.window_s, typical=case.typical
        )
        == case.throughput
    )
    assert demand_cut(case.observed, case.quota) == pytest.approx(case.cut, rel=1e-12)
    assert (
        steady_throttle_ms(case.key, case.observed, case.quota, size, window_s=case.window_s)
        == case.throttle_ms
    )
    assert (
        first_throttle_ms(case.key, case.observed, case.quota, size, window_s=case.window_s)
        == case.first_ms
    )


def test_the_steady_cases_through_the_engines_impact() -> None:
    for case in CASES.steady:
        if case.quota is None:  # unlimited after too: no change, no row
            continue
        row, after = _impact_rows(
            ThrottleCase(case.name, case.key, case.observed, case.quota, case.window_s, 0.0),
            case.typical,
        )
        given = {case.key: case.request_bytes} if case.request_bytes is not None else {}
        (changed,) = engine.impact(
            [row], {"c": QuotaIndex(after)}, window_s=case.window_s, request_sizes=given
        )
        got = {k: changed[k] for k in ("predicted_throttle_ms", "first_throttle_ms",
               "throughput_after", "request_bytes", "request_bytes_source")}  # fmt: skip
        assert got == {
            "predicted_throttle_ms": case.throttle_ms,
            "first_throttle_ms": case.first_ms,
            "throughput_after": case.throughput,
            "request_bytes": case.size,
            "request_bytes_source": case.source,
        }, case.name
        assert changed["demand_cut"] == pytest.approx(case.cut, rel=1e-12), case.name


def test_one_steady_rule_per_key() -> None:
    assert tuple(STEADY_RULES) == tuple(QUOTA_KEYS)
    assert {k for k, r in STEADY_RULES.items() if r.fetch_capped} == {"consumer_byte_rate"}
    assert {k for k, r in STEADY_RULES.items() if r.token_bucket} == {"controller_mutation_rate"}
    assert {k for k, r in STEADY_RULES.items() if r.whole_requests} == {"consumer_byte_rate"}
    assert STEADY_RULES["producer_byte_rate"].default_size == 16384  # batch.size
    assert STEADY_RULES["consumer_byte_rate"].default_size == 1048576  # max.partition.fetch.bytes
    assert fetch_cap(100.0) == 1000.0  # T x (11 - 1) x 1 s


def test_share_over_interpolates_the_quantiles() -> None:
    points = ((0.5, 10.0), (0.95, 20.0), (0.99, 30.0), (1.0, 40.0))
    assert share_over(40.0, points) == 0.0
    assert share_over(50.0, points) == 0.0
    assert share_over(35.0, points) == pytest.approx(0.005)
    assert share_over(20.0, points) == pytest.approx(0.05)
    assert share_over(5.0, points) == 0.5  # below the median: at least half
    assert share_over(5.0, ((0.5, None), (1.0, 2.0))) is None


# ----------------------------------------------------------------- the tables


def test_one_throttle_rule_per_key_and_the_brokers_window() -> None:
    assert tuple(THROTTLE_RULES) == tuple(QUOTA_KEYS)
    assert {k for k, r in THROTTLE_RULES.items() if r.capped} == {
        "request_percentage",
        "connection_creation_rate",
    }
    assert throttle_cap_ms("producer_byte_rate") is None
    assert throttle_cap_ms("request_percentage") == THROTTLE_CAP_MS == 1000.0
    assert DEFAULT_QUOTA_WINDOW_S == QUOTA_WINDOW_NUM * QUOTA_WINDOW_SIZE_S == 11.0
    assert model.DEFAULT_WINDOW_S == DEFAULT_QUOTA_WINDOW_S
    assert model.DEFAULT_HEADROOM == 1.2
    with pytest.raises(KeyError):
        throttle_time_ms("bytes_in", 2.0, 1.0)


def test_java_round_is_half_up() -> None:
    assert [java_round(x) for x in (2.5, 3.5, -2.5, 0.49999999999999994, 2.4)] == [
        3.0,
        4.0,
        -2.0,
        0.0,
        2.0,
    ]


def test_every_unit_has_a_rounding_and_a_suffix_rule() -> None:
    assert {s.unit for s in QUOTA_KEYS.values()} == set(READABLE_STEPS_PER_UNIT)
    assert set(UNIT_SUFFIX) <= set(READABLE_STEPS_PER_UNIT)
    assert model.readable_quota is readable_quota


def test_the_step1_table_covers_every_single_kind_mask() -> None:
    client_shapes = [s for s in SHAPES if "ip" not in s]
    assert set(TAGS_BY_MASK) == {frozenset(), *(frozenset({s}) for s in client_shapes)}
    # A mask of one shape tags with exactly that shape's types (mask 0 as client-id only).
    for mask, types in TAGS_BY_MASK.items():
        assert types == (next(iter(mask)) if mask else (CLIENT_ID,))


def test_group_change_table_and_function() -> None:
    assert len(GROUP_CHANGES) == 16
    alice_app = MetricTags(user="alice", client_id="app")
    assert group_change(alice_app, alice_app, split=False) == GROUP_SAME
    assert group_change(alice_app, alice_app, split=True) == GROUP_SPLITS
    assert group_change(alice_app, MetricTags("alice", None), split=False) == GROUP_SPLITS
    assert group_change(alice_app, MetricTags("alice", ""), split=False) == GROUP_MERGES
    ip = MetricTags(user="", client_id="", ip="192.0.2.1")
    assert group_change(ip, ip, split=False) == GROUP_SAME


def test_own_entity_keeps_the_groups_tags() -> None:
    assert set(OWN_LEVELS) == {(True, True), (True, False), (False, True), (False, False)}
    assert own_entity(MetricTags("alice", "app")) == Entity.of(user="alice", client_id="app")
    assert own_entity(MetricTags("alice", "")) == Entity.of(user="alice")
    assert own_entity(MetricTags("", "app")) == Entity.of(client_id="app")
    assert own_entity(MetricTags("", "", "192.0.2.1")) == Entity.of(ip="192.0.2.1")
    with pytest.raises(ValueError):
        own_entity(MetricTags("alice", None))
    for (has_user, has_client), level in OWN_LEVELS.items():
        if has_user or has_client:
            assert set(level.tag_types) == {
                t for t, has in ((USER, has_user), (CLIENT_ID, has_client)) if has
            }


# ----------------------------------------------------------------- MBean names read back


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kafka.server:type=Produce", ("kafka.server", {"type": "Produce"})),
        (
            'kafka.server:type=Fetch,user=CN%3Da,client-id="app:1,x\\*y"',
            ("kafka.server", {"type": "Fetch", "user": "CN%3Da", "client-id": "app:1,x*y"}),
        ),
        (
            'kafka.server:type=socket-server-metrics,ip="2001:db8:0:0:0:0:0:10"',
            ("kafka.server", {"type": "socket-server-metrics", "ip": "2001:db8:0:0:0:0:0:10"}),
        ),
    ],
)
def test_parse_object_name(name: str, expected: tuple[str, dict[str, str]]) -> None:
    assert parse_object_name(name) == expected


@pytest.mark.parametrize(
    "bad", ["no-domain", "kafka.server:type", 'kafka.server:client-id="open', 'd:k="a\\']
)
def test_parse_object_name_refuses_what_is_not_a_name(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_object_name(bad)


_NAMES = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


@given(user=_NAMES | st.just(""), client_id=_NAMES | st.just(""))
def test_parse_object_name_inverts_mbean_name(user: str, client_id: str) -> None:
    for key in ("producer_byte_rate", "request_percentage"):
        name = mbean_name(key, MetricTags(user=user, client_id=client_id))
        assert name is not None
        domain, props = parse_object_name(name)
        assert domain == "kafka.server"
        assert props.pop("type") == QUOTA_KEYS[key].sensor
        assert unsanitize_user(props.pop(USER, "")) == user
        assert props.pop(CLIENT_ID, "") == client_id
        assert props == {}
