"""Load ``units_throttle_cases.yaml``: readable units, value formatting, the
throttle formula and its caps, and user-tag decoding, as data both analytics
engines are checked against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

CASES_FILE = Path(__file__).with_name("units_throttle_cases.yaml")


@dataclass(frozen=True)
class ReadableCase:
    """``readable_quota(key, value) == readable``, written ``text``."""

    name: str
    key: str
    value: float
    readable: float
    text: str


@dataclass(frozen=True)
class FormatCase:
    """``format_quota_value(key, value) == text``."""

    name: str
    key: str
    value: float
    text: str


@dataclass(frozen=True)
class ThrottleCase:
    """The throttle time of a group measured at ``observed`` under ``quota``
    (``None``: unlimited) over ``window_s`` seconds: ``throttle_ms``."""

    name: str
    key: str
    observed: float
    quota: float | None
    window_s: float
    throttle_ms: float


@dataclass(frozen=True)
class SteadyCase:
    """What a group wanting ``observed`` gets under ``quota`` with requests
    of ``request_bytes`` (``None``: the key's default): ``throughput`` (what
    its clients measure; ``typical``, the group's p50, ``None``: ``observed``),
    ``cut``, the steady ``throttle_ms``, ``first_ms``, the S used and its source."""

    name: str
    key: str
    observed: float
    quota: float | None
    request_bytes: float | None
    window_s: float
    throughput: float
    cut: float
    throttle_ms: float
    first_ms: float
    size: float
    source: str
    typical: float | None = None


@dataclass(frozen=True)
class UserTagCase:
    """``unsanitize_user(tag) == user``; ``sanitized``: ``sanitize_user(user) == tag``."""

    tag: str
    user: str
    sanitized: bool


@dataclass(frozen=True)
class UnitsThrottleCases:
    """Every section of the file, in order."""

    readable: list[ReadableCase]
    format: list[FormatCase]
    throttle: list[ThrottleCase]
    steady: list[SteadyCase]
    user_tags: list[UserTagCase]


def _float(raw: Any) -> float:
    # YAML ints (9223372036854775807) become the float64 Kafka carries.
    return float(raw)


def load_units_throttle_cases() -> UnitsThrottleCases:
    """Every case of the file."""
    data = YAML(typ="safe").load(CASES_FILE.read_text(encoding="utf-8"))
    return UnitsThrottleCases(
        readable=[
            ReadableCase(
                c["name"], c["key"], _float(c["value"]), _float(c["readable"]), str(c["text"])
            )
            for c in data["readable"]
        ],
        format=[
            FormatCase(c["name"], c["key"], _float(c["value"]), str(c["text"]))
            for c in data["format"]
        ],
        throttle=[
            ThrottleCase(
                c["name"],
                c["key"],
                _float(c["observed"]),
                None if c["quota"] is None else _float(c["quota"]),
                _float(c["window_s"]),
                _float(c["throttle_ms"]),
            )
            for c in data["throttle"]
        ],
        steady=[
            SteadyCase(
                c["name"],
                c["key"],
                _float(c["observed"]),
                None if c["quota"] is None else _float(c["quota"]),
                None if c["request_bytes"] is None else _float(c["request_bytes"]),
                _float(c["window_s"]),
                _float(c["throughput"]),
                _float(c["cut"]),
                _float(c["throttle_ms"]),
                _float(c["first_ms"]),
                _float(c["size"]),
                str(c["source"]),
                None if c.get("typical") is None else _float(c["typical"]),
            )
            for c in data["steady"]
        ],
        user_tags=[
            UserTagCase(str(c["tag"]), str(c["user"]), bool(c["sanitized"]))
            for c in data["user_tags"]
        ],
    )
