"""The manifests' storage policy (``spec.storagePolicy``, the Strimzi
proposal's shape) and the durations it is written with."""

from __future__ import annotations

import re
from typing import Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from quotaform.kafka.units import parse_quota_value, render_raw
from quotaform.manifest.model_base import CONFIG, EntitySpec, reject_null
from quotaform.plan.state import SourceLocation
from quotaform.plan.storage_types import Limit, LimitType, OnUnknown, StoragePolicy

__all__ = ["LimitSpec", "StoragePolicySpec", "parse_duration"]


_DURATION_RE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, None: 1.0}
_NUMBER = r"[0-9]+(?:\.[0-9]+)?"
# ISO-8601 as java.time.Duration reads it (Strimzi's settings): days, then
# after T hours, minutes, seconds; no years or months (not a fixed length).
_ISO_DURATION_RE = re.compile(
    rf"^P(?:(?P<d>{_NUMBER})D)?(?:T(?=[0-9])(?:(?P<h>{_NUMBER})H)?(?:(?P<m>{_NUMBER})M)?"
    rf"(?:(?P<s>{_NUMBER})S)?)?$",
    re.IGNORECASE,
)
_ISO_UNITS = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
_DURATION_EXAMPLES = "30s, 5m, 1h, or ISO-8601 PT30S, PT5M, PT1H30M"


def _iso_duration(text: str) -> float:
    match = _ISO_DURATION_RE.match(text)
    parts = {} if match is None else {u: v for u, v in match.groupdict().items() if v}
    if not parts:
        raise ValueError(
            f"{render_raw(text)} is not an ISO-8601 duration: after P give days (P1D), "
            "after T hours, minutes or seconds, each a number before its unit "
            "(PT30S, PT5M, PT1H30M)"
        )
    return sum(float(v) * _ISO_UNITS[u] for u, v in parts.items())


def parse_duration(value: object) -> float:
    """Seconds from ``30``, ``"30s"``, ``"5m"``, ``"1h"``, ``"1.5d"``,
    ``"500ms"``, or ISO-8601 (``"PT30S"``, ``"PT5M"``, ``"PT1H30M"``,
    ``"P1D"``; Strimzi's spelling, any case).

    Raises:
        ValueError: anything else, or not above 0.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(
            f"expected a duration such as {_DURATION_EXAMPLES}, got {render_raw(value)}"
        )
    if isinstance(value, str) and value.strip()[:1] in ("P", "p"):
        seconds = _iso_duration(value.strip())
    elif isinstance(value, str):
        match = _DURATION_RE.match(value)
        if match is None:
            raise ValueError(
                f"{render_raw(value)} is not a duration (examples: {_DURATION_EXAMPLES})"
            )
        seconds = float(match.group(1)) * _DURATION_UNITS[match.group(2)]
    else:
        seconds = float(value)
    if not seconds > 0 or seconds != seconds or seconds == float("inf"):
        raise ValueError(f"a duration must be above 0, got {render_raw(value)}")
    return seconds


class LimitSpec(BaseModel):
    """A soft or hard storage limit (the Strimzi proposal's Limit Definition):
    ConsumedBytes (breached when a volume's consumed bytes exceed the level;
    the proposal's text calls it ConsumedSpace, also accepted), MinFreeBytes
    (breached when free bytes drop below the level), MinFreePercentage
    (breached when the free share of capacity drops below the level)."""

    model_config = CONFIG

    type: str = Field(
        description="ConsumedBytes (alias ConsumedSpace), MinFreeBytes or MinFreePercentage.",
        json_schema_extra={
            "enum": ["ConsumedBytes", "ConsumedSpace", "MinFreeBytes", "MinFreePercentage"]
        },
    )
    level: float | int | str = Field(
        description="Bytes for ConsumedBytes and MinFreeBytes (50GiB, 1TB, 1073741824); "
        'a percentage of capacity for MinFreePercentage, written "10%" or as a number '
        "1..100 meaning percent (10). A bare number below 1 (Strimzi's ratio spelling, "
        '0.1) is refused as ambiguous: write "10%" (or "0.5%" for half a percent).'
    )

    @field_validator("type", mode="after")
    @classmethod
    def _known_type(cls, value: str) -> str:
        try:
            return LimitType.parse(value).value
        except ValueError:
            raise ValueError(
                f"{render_raw(value)} is not a limit type: ConsumedBytes, MinFreeBytes or "
                "MinFreePercentage"
            ) from None

    @field_validator("level", mode="after")
    @classmethod
    def _check_level(cls, value: float | str, info: ValidationInfo) -> float | str:
        # A field validator (not a model one) so an error names the level's
        # own line; the type is validated first (field order) and, when it
        # is bad, reported alone.
        if "type" in info.data:
            _level(LimitType.parse(info.data["type"]), value)
        return value

    def to_limit(self) -> Limit:
        """The :class:`~quotaform.plan.storage.Limit` (level in bytes or %).

        Raises:
            ValueError: a level that is not a size (bytes types) or not within
                0..100 (MinFreePercentage).
        """
        kind = LimitType.parse(self.type)
        return Limit(kind, _level(kind, self.level))


def _level(kind: LimitType, value: object) -> float:
    """A limit's level: bytes, or percent for MinFreePercentage (:func:`_parse_percent`)."""
    if kind is LimitType.MIN_FREE_PERCENTAGE:
        level = _parse_percent(value, example="10%")
        if not 0 < level < 100:
            raise ValueError(f"a MinFreePercentage level is within 0..100, got {level:g}")
        return level
    try:
        return parse_quota_value("producer_byte_rate", value)
    except ValueError as exc:
        raise ValueError(str(exc).replace("producer_byte_rate", f"{kind.value} level")) from None


def _parse_percent(value: object, *, example: str) -> float:
    """Percent from ``"10%"``, ``"0.5%"`` or a number 1..100 meaning percent
    (``10``): the one rule for every percentage of ``storagePolicy``.

    A number below 1 without ``%`` is refused: Strimzi's settings are ratios
    (``0.1`` = 10 %), so it cannot be told from a small percentage.

    Raises:
        ValueError: not a number or percentage, not above 0, or ambiguous;
            ``example`` (``"10%"``) is the spelling the message suggests.
    """
    marked = isinstance(value, str) and value.strip().endswith("%")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(f"expected a percentage such as {example}, got {render_raw(value)}")
    percent = parse_quota_value("request_percentage", value)
    if not marked and percent < 1:
        written = f"{percent * 100:g}%"
        raise ValueError(
            f"{render_raw(value)} is ambiguous: Strimzi writes a ratio (0..1) where "
            f'quotaform reads percent; write "{written}" (or {percent * 100:g}) for '
            f'{percent * 100:g} %, or "{percent:g}%" for {percent:g} %'
        )
    return percent


class StoragePolicySpec(BaseModel):
    """Storage-aware producer quotas: scale the declared producer_byte_rate of
    the entities it applies to by a factor from cluster-wide volume usage
    (the Strimzi volume-usage policy, run from outside the broker). Per volume:
    factor 1 while the soft limit complies, the share of the soft-to-hard
    distance that remains between them, PAUSE at or past the hard limit; the
    most restrictive volume of the cluster wins."""

    model_config = CONFIG

    soft: LimitSpec = Field(description="Where throttling starts.")
    hard: LimitSpec = Field(
        description="Where produce is paused (pauseRate). May equal soft (the released "
        "Strimzi plug-in's single limit: OPEN, then PAUSE); never before it."
    )
    stale_after: float | int | str = Field(
        default="5m",
        alias="staleAfter",
        description="A broker whose latest snapshot is older than this is unknown "
        "(30s, 5m, 1h, or ISO-8601 as Strimzi writes it: PT30S, PT5M, PT1H30M; default 5m).",
    )
    on_unknown: Literal["PAUSE", "OPEN"] = Field(
        default="PAUSE",
        alias="onUnknown",
        description="What a broker or volume that cannot report does: PAUSE (the "
        "fail-safe, default) or OPEN (judge the brokers that reported).",
    )
    applies_to: list[EntitySpec] | None = Field(
        default=None,
        alias="appliesTo",
        description="The declared entities whose producer_byte_rate is scaled "
        "(default: every declared entity with one).",
    )
    exempt: list[EntitySpec] | None = Field(
        default=None,
        description="Entities never scaled (platform services, the snapshot publisher).",
    )
    pause_rate: float | int | str = Field(
        default=1024,
        alias="pauseRate",
        description="The producer_byte_rate written under PAUSE (the broker rejects 0); "
        "bytes/s, default 1KiB. Never above an entity's declared value.",
    )
    hysteresis: float | int | str = Field(
        default="5%",
        description='The factor\'s step in percent, written "5%" or as a number 1..50 '
        "meaning percent (5); a bare number below 1 (0.05) is refused as ambiguous, as "
        "for MinFreePercentage levels. Factors are rounded down to multiples of it and "
        "quotas are rewritten only when the state changes or the factor moves by more "
        "than one step. Above 0, at most 50%.",
    )

    _no_null = field_validator(
        "stale_after", "applies_to", "exempt", "pause_rate", "hysteresis", mode="before"
    )(reject_null)

    @field_validator("stale_after", mode="after")
    @classmethod
    def _duration(cls, value: object) -> object:
        parse_duration(value)
        return value

    @field_validator("pause_rate", mode="after")
    @classmethod
    def _rate(cls, value: object) -> object:
        parse_quota_value("producer_byte_rate", value)
        return value

    @field_validator("hysteresis", mode="after")
    @classmethod
    def _step(cls, value: object) -> object:
        _parse_step(value)
        return value

    @model_validator(mode="after")
    def _ordered(self) -> StoragePolicySpec:
        soft, hard = self.soft.to_limit(), self.hard.to_limit()
        # Equal levels are allowed: the released Strimzi plug-in has one
        # limit, written as soft = hard; the volume goes from OPEN to PAUSE.
        if soft.type is hard.type:
            inverted = (
                soft.level > hard.level
                if soft.type is LimitType.CONSUMED_BYTES
                else soft.level < hard.level
            )
            if inverted:
                raise ValueError(
                    f"the soft limit ({soft}) must be reached before the hard limit ({hard}) "
                    "or with it: "
                    + (
                        "for ConsumedBytes the soft level is the smaller or equal"
                        if soft.type is LimitType.CONSUMED_BYTES
                        else f"for {soft.type.value} the soft level is the larger or equal"
                    )
                )
        return self

    def to_policy(self, source: SourceLocation | None = None) -> StoragePolicy:
        """The :class:`~quotaform.plan.storage.StoragePolicy`."""
        return StoragePolicy(
            soft=self.soft.to_limit(),
            hard=self.hard.to_limit(),
            stale_after_s=parse_duration(self.stale_after),
            on_unknown=OnUnknown(self.on_unknown),
            applies_to=None
            if self.applies_to is None
            else tuple(e.to_entity() for e in self.applies_to),
            exempt=tuple(e.to_entity() for e in self.exempt or ()),
            pause_rate=parse_quota_value("producer_byte_rate", self.pause_rate),
            step=_parse_step(self.hysteresis),
            source=source,
        )


def _parse_step(value: object) -> float:
    """The hysteresis step as a share (``"5%"`` or ``5`` -> 0.05)."""
    step = _parse_percent(value, example="5%") / 100.0
    if not 0 < step <= 0.5:
        raise ValueError(f"hysteresis must be above 0 and at most 50%, got {render_raw(value)}")
    return step


