"""quotaform.kafka.units: parsing and formatting quota values."""

from __future__ import annotations

import math
import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quotaform.kafka.keys import INT_MAX, LONG_MAX, QUOTA_KEYS
from quotaform.kafka.units import (
    QuotaValueError,
    format_quota_value,
    parse_quota_value,
    value_pattern,
)

BYTE_KEYS = ("producer_byte_rate", "consumer_byte_rate")
DOUBLE_KEYS = ("request_percentage", "controller_mutation_rate")


@pytest.mark.parametrize(
    ("key", "raw", "expected"),
    [
        ("producer_byte_rate", 1048576, 1048576.0),
        ("producer_byte_rate", "1048576", 1048576.0),
        ("producer_byte_rate", "10MiB", 10 * 1024**2),
        ("producer_byte_rate", "512KiB", 512 * 1024),
        ("producer_byte_rate", "1GiB", 1024**3),
        ("producer_byte_rate", "2TiB", 2 * 1024**4),
        ("producer_byte_rate", "1PiB", 1024**5),
        ("producer_byte_rate", "1.5KiB", 1536),
        ("producer_byte_rate", "0.5MiB", 512 * 1024),
        ("producer_byte_rate", ".25KiB", 256),
        ("producer_byte_rate", "1.5MB", 1_500_000),
        ("producer_byte_rate", "100kB", 100_000),
        ("producer_byte_rate", "100KB", 100_000),
        ("producer_byte_rate", "3GB", 3_000_000_000),
        ("producer_byte_rate", "1TB", 10**12),
        ("producer_byte_rate", "2048B", 2048),
        # One grammar: unit names in any case, always bytes; spaces and /s optional.
        ("producer_byte_rate", "10mb", 10_000_000),
        ("producer_byte_rate", "10Mb", 10_000_000),
        ("producer_byte_rate", "10 mb/s", 10_000_000),
        ("producer_byte_rate", "512kib", 512 * 1024),
        ("producer_byte_rate", "1.5GIB", 1.5 * 1024**3),
        ("producer_byte_rate", "2048b", 2048),
        ("consumer_byte_rate", "10MB/S", 10_000_000),
        ("consumer_byte_rate", "10MiB/s", 10 * 1024**2),
        ("consumer_byte_rate", " 10 MiB / s ", 10 * 1024**2),
        ("consumer_byte_rate", "10 MiB", 10 * 1024**2),
        ("consumer_byte_rate", 1e7, 10_000_000),  # YAML 1e7 is a whole float
        ("consumer_byte_rate", LONG_MAX, float(LONG_MAX)),
        ("request_percentage", 150, 150.0),
        ("request_percentage", 12.5, 12.5),
        ("request_percentage", "150%", 150.0),
        ("request_percentage", " 12.5 % ", 12.5),
        ("request_percentage", "25", 25.0),
        ("request_percentage", 1000, 1000.0),  # more than 100%: several threads
        ("controller_mutation_rate", 2.5, 2.5),
        ("controller_mutation_rate", "0.001", 0.001),
        ("controller_mutation_rate", 5, 5.0),
        ("connection_creation_rate", 20, 20.0),
        ("connection_creation_rate", "100", 100.0),
        ("connection_creation_rate", 20.0, 20.0),
        ("connection_creation_rate", INT_MAX, float(INT_MAX)),
    ],
)
def test_parse_accepts(key: str, raw: object, expected: float) -> None:
    value = parse_quota_value(key, raw)
    assert value == expected
    assert type(value) is float


@pytest.mark.parametrize(
    ("key", "raw", "message"),
    [
        (
            "producer_byte_rate",
            "10MiBs",
            '"10MiBs" is not a byte rate (examples: 1048576, 512KiB, 10MiB, 1.5MB)',
        ),
        (
            "producer_byte_rate",
            "10Mbit",
            '"10Mbit" is not a byte rate (examples: 1048576, 512KiB, 10MiB, 1.5MB)',
        ),
        (
            "producer_byte_rate",
            "10 MB/sec",
            '"10 MB/sec" is not a byte rate (examples: 1048576, 512KiB, 10MiB, 1.5MB)',
        ),
        (
            "producer_byte_rate",
            "MiB",
            '"MiB" is not a byte rate (examples: 1048576, 512KiB, 10MiB, 1.5MB)',
        ),
        (
            "producer_byte_rate",
            "1.0001KB",
            '"1.0001KB" is 1000.1 bytes/s: not a whole number of bytes/s',
        ),
        ("producer_byte_rate", 10.5, "10.5 is 10.5 bytes/s: not a whole number of bytes/s"),
        ("producer_byte_rate", "0.1B", '"0.1B" is 0.1 bytes/s: not a whole number of bytes/s'),
        ("producer_byte_rate", True, "true is a boolean, not a number"),
        ("producer_byte_rate", None, "null is not a number"),
        ("producer_byte_rate", [1], "[1] is not a number"),
        ("producer_byte_rate", 0, "0 must be greater than 0"),
        ("producer_byte_rate", "-1MiB", '"-1MiB" must be greater than 0'),
        (
            "producer_byte_rate",
            "8EiB",
            '"8EiB" is not a byte rate (examples: 1048576, 512KiB, 10MiB, 1.5MB)',
        ),
        (
            "consumer_byte_rate",
            "16384PiB",
            '"16384PiB" is too large: at most 9223372036854775807 bytes/s (Long.MAX_VALUE)',
        ),
        (
            "request_percentage",
            "150 percent",
            '"150 percent" is not a percentage (examples: 150, 12.5, "25%")',
        ),
        ("request_percentage", False, "false is a boolean, not a number"),
        ("request_percentage", -5, "-5 must be greater than 0"),
        ("request_percentage", float("nan"), "nan is not a finite number"),
        ("request_percentage", float("inf"), "inf is not a finite number"),
        ("request_percentage", "1e999", '"1e999" is too large for a float64'),
        ("controller_mutation_rate", "fast", '"fast" is not a number (examples: 2.5, 10)'),
        ("controller_mutation_rate", "2.5%", '"2.5%" is not a number (examples: 2.5, 10)'),
        ("controller_mutation_rate", 0.0, "0.0 must be greater than 0"),
        (
            "connection_creation_rate",
            2.5,
            "2.5 must be a whole number of connections/s (Kafka rejects fractions)",
        ),
        (
            "connection_creation_rate",
            INT_MAX + 1,
            "2147483648 is too large: at most 2147483647 connections/s (Integer.MAX_VALUE)",
        ),
        ("connection_creation_rate", "ten", '"ten" is not a number (examples: 20, 100)'),
        (
            "producer_rate",
            1,
            "unknown quota key 'producer_rate' (Kafka: \"Invalid configuration key "
            'producer_rate"); known keys: connection_creation_rate, consumer_byte_rate, '
            "controller_mutation_rate, producer_byte_rate, request_percentage",
        ),
    ],
)
def test_parse_rejects(key: str, raw: object, message: str) -> None:
    with pytest.raises(QuotaValueError) as caught:
        parse_quota_value(key, raw)
    assert str(caught.value) == message
    assert isinstance(caught.value, ValueError)
    assert caught.value.key == key
    assert caught.value.raw is raw


def test_long_max_compares_like_the_controller() -> None:
    # Long.MAX_VALUE arrives at the controller as the double 2^63, which it
    # accepts; anything that rounds above it is refused.
    assert parse_quota_value("producer_byte_rate", "8192PiB") == float(2**63)
    with pytest.raises(QuotaValueError, match="too large"):
        parse_quota_value("producer_byte_rate", 2**63 + 2**11)


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        ("producer_byte_rate", 10485760.0, "10MiB"),
        ("producer_byte_rate", 1536.0, "1.5KiB"),
        ("producer_byte_rate", 1310720.0, "1.25MiB"),
        ("producer_byte_rate", 1024.0, "1KiB"),
        ("producer_byte_rate", 1024.0**3 * 3, "3GiB"),
        ("producer_byte_rate", 1024.0**5 * 8192, "8192PiB"),
        ("producer_byte_rate", 1_000_000.0, "1MB"),
        ("producer_byte_rate", 1_500_000.0, "1.5MB"),
        ("producer_byte_rate", 1500.0, "1.5kB"),
        ("producer_byte_rate", 1000.0, "1kB"),
        ("consumer_byte_rate", 1_234_567.0, "1234567"),
        ("consumer_byte_rate", 1025.0, "1025"),
        ("consumer_byte_rate", 999.0, "999"),
        ("consumer_byte_rate", 512.0, "512"),
        ("consumer_byte_rate", 10.5, "10.5"),
        ("request_percentage", 150.0, "150%"),
        ("request_percentage", 12.5, "12.5%"),
        ("request_percentage", 1 / 3, "0.3333333333333333%"),
        ("controller_mutation_rate", 2.5, "2.5"),
        ("controller_mutation_rate", 5.0, "5"),
        ("controller_mutation_rate", 1e-05, "1e-05"),
        ("connection_creation_rate", 20.0, "20"),
        ("some_future_key", 1048576.0, "1048576"),
        ("producer_byte_rate", math.inf, "inf"),
        ("request_percentage", math.nan, "nan"),
    ],
)
def test_format(key: str, value: float, expected: str) -> None:
    assert format_quota_value(key, value) == expected


def _round_trips(key: str, value: float) -> None:
    text = format_quota_value(key, value)
    assert parse_quota_value(key, text) == value, text


@given(st.integers(min_value=1, max_value=LONG_MAX))
def test_byte_rates_round_trip(value: int) -> None:
    for key in BYTE_KEYS:
        _round_trips(key, float(value))


@given(
    st.integers(min_value=1, max_value=2**20).flatmap(
        lambda n: st.sampled_from([n * 1024, n * 1024**2, n * 1000, n * 1000**2, n * 10_240])
    )
)
def test_round_numbers_round_trip_through_units(value: int) -> None:
    text = format_quota_value("producer_byte_rate", float(value))
    assert parse_quota_value("producer_byte_rate", text) == value
    if value >= 1024 and value % 1024 == 0:
        assert text.endswith("iB"), text


@given(st.floats(min_value=0, exclude_min=True, allow_nan=False, allow_infinity=False))
def test_doubles_round_trip(value: float) -> None:
    for key in DOUBLE_KEYS:
        _round_trips(key, value)


@given(st.integers(min_value=1, max_value=INT_MAX))
def test_connection_rates_round_trip(value: int) -> None:
    _round_trips("connection_creation_rate", float(value))


def test_every_known_key_is_covered() -> None:
    assert set(QUOTA_KEYS) == {*BYTE_KEYS, *DOUBLE_KEYS, "connection_creation_rate"}


@pytest.mark.parametrize(
    "raw",
    [
        "10mb",
        "10MB",
        "10Mb",
        "10 MiB / s",
        "10mib/S",
        "1.5 gib",
        ".5KiB",
        "2048b",
        "100",
        "10MiBs",
        "10Mbit",
        "10 MB/sec",
        "MiB",
        "10 M",
        "1e3KiB",
        "10 /s",
        "ten",
    ],
)
def test_schema_pattern_accepts_exactly_what_the_parser_reads(raw: str) -> None:
    # One grammar: the JSON Schema pattern editors use and the loader agree.
    try:
        parse_quota_value("producer_byte_rate", raw)
        parsed = True
    except QuotaValueError:
        parsed = False
    assert bool(re.match(value_pattern("producer_byte_rate"), raw)) is parsed


def test_the_value_cache_never_hides_an_error_or_mixes_types() -> None:
    # parse_quota_value caches by (key, raw, type): a bad value fails every
    # time, and True is never read as the cached 1 (nor 1.0 as 1).
    for _ in range(3):
        with pytest.raises(QuotaValueError, match="not a byte rate"):
            parse_quota_value("producer_byte_rate", "lots")
    assert parse_quota_value("controller_mutation_rate", 1) == 1.0
    with pytest.raises(QuotaValueError, match="boolean"):
        parse_quota_value("controller_mutation_rate", True)
    assert parse_quota_value("request_percentage", 12.5) == 12.5
    assert format_quota_value("request_percentage", 12.5) == "12.5%"
    assert format_quota_value("producer_byte_rate", 1536.0) == "1.5KiB"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (53901000704, "50.2GiB"),
        (53687091200, "50GiB"),
        (270553174016, "252GiB"),
        (1069548, "1.02MiB"),
        (271661, "265KiB"),
        (1024, "1KiB"),
        (512, "512B"),
        (0, "0B"),
    ],
)
def test_format_bytes_reads_in_the_manifests_units(value: float, text: str) -> None:
    from quotaform.kafka.units import format_bytes

    assert format_bytes(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(300, "5m"), (1201, "20m01s"), (3661, "1h01m01s"), (30, "30s"), (0.5, "0.5s"), (7200, "2h")],
)
def test_format_duration_reads_as_a_manifest_writes_it(seconds: float, text: str) -> None:
    from quotaform.kafka.units import format_duration

    assert format_duration(seconds) == text


def test_format_measured_by_the_keys_unit() -> None:
    from quotaform.kafka.units import format_measured

    assert format_measured("producer_byte_rate", 1069548) == "1.02MiB"
    assert format_measured("request_percentage", 12.3456) == "12.3%"
    assert format_measured("connection_creation_rate", 3.14159) == "3.14"
