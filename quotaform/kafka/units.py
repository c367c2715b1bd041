"""Quota values as people write them and as Kafka stores them.

Kafka carries every quota value as a float64 (``AlterClientQuotas`` /
``DescribeClientQuotas``). Manifests may write them with units:

==========================  ===============  =========================================
quota key                   unit             accepted input
==========================  ===============  =========================================
producer_byte_rate          bytes/s          ``1048576``, ``"512KiB"``, ``"10MiB/s"``,
consumer_byte_rate                           ``"1.5MB"``, ``"100kB"``
request_percentage          % of one thread  ``150``, ``12.5``, ``"150%"``
controller_mutation_rate    mutations/s      ``2.5``, ``"2.5"``
connection_creation_rate    connections/s    ``20``, ``"20"`` (whole numbers only)
==========================  ===============  =========================================

The one grammar of a byte rate: a number (``10``, ``1.5``, ``.25``), optional
spaces, an optional unit, optional spaces, an optional ``/s`` (``10MiB/s``,
``10 MiB / s``). Units: decimal SI ``kB`` = 1000, ``MB`` = 10^6, ``GB`` =
10^9, ``TB`` = 10^12, ``PB`` = 10^15; binary ``KiB`` = 1024, ``MiB`` =
1024^2, ``GiB``, ``TiB``, ``PiB``; ``B`` = 1. Unit names are
case-insensitive and always bytes (``10mb`` = ``10MB`` = ``10Mb`` =
10,000,000 bytes/s): Kafka's byte-rate quotas have no bit units. Plans show
every value normalised (:func:`format_quota_value`: ``10MB``), so a reviewer
sees what a manifest's spelling meant. Percentages: a number with an optional
``%`` (``150``, ``"25 %"``). Surrounding spaces are ignored everywhere.

The value rules mirror the controller's ``ClientQuotaControlManager.validateQuotaKeyValue``:
the key must be known (``QuotaConfig``), the value greater than 0, LONG / INT
keys take whole numbers no larger than Long.MAX_VALUE / Integer.MAX_VALUE.
NaN and infinities are rejected here because the controller does not reliably
reject them. YAML booleans are not numbers.
"""

from __future__ import annotations

import functools
import json
import math
import re
from collections.abc import Mapping
from decimal import Decimal, InvalidOperation
from types import MappingProxyType

from quotaform.kafka.keys import QUOTA_KEYS, KeySpec, ValueType

__all__ = [
    "BINARY_UNITS",
    "BYTE_UNITS",
    "DECIMAL_UNITS",
    "FORMAT_DECIMALS",
    "FORMAT_UNITS",
    "FORMAT_UNITS_FROM",
    "MAX_VALUE_TEXT",
    "READABLE_EPSILON",
    "READABLE_FINE_BELOW",
    "READABLE_FINE_STEPS",
    "READABLE_STEPS_PER_UNIT",
    "UNIT_SUFFIX",
    "QuotaValueError",
    "byte_unit",
    "format_bytes",
    "format_duration",
    "format_measured",
    "format_quota_value",
    "format_readable",
    "java_double_text",
    "parse_byte_size",
    "parse_quota_value",
    "readable_quota",
    "render_raw",
    "same_quotas",
    "same_value",
    "value_pattern",
]

#: Byte-rate units in their canonical spelling and their size in bytes (all
#: exact). Matched case-insensitively (:func:`byte_unit`).
BYTE_UNITS: dict[str, int] = {
    "B": 1,
    "kB": 1000,
    "MB": 1000**2,
    "GB": 1000**3,
    "TB": 1000**4,
    "PB": 1000**5,
    "KiB": 1024,
    "MiB": 1024**2,
    "GiB": 1024**3,
    "TiB": 1024**4,
    "PiB": 1024**5,
}

_UNIT_BY_FOLDED = {name.casefold(): size for name, size in BYTE_UNITS.items()}


def byte_unit(name: str) -> int | None:
    """The size in bytes of byte-rate unit ``name`` in any case (``"mib"`` ->
    1048576), ``None`` when it is not a unit."""
    return _UNIT_BY_FOLDED.get(name.casefold())


def parse_byte_size(text: str) -> int:
    """A size in bytes as people write it: ``64GiB``, ``500MB``, ``1048576``
    (the units of :data:`BYTE_UNITS`, any case), rounded down to whole bytes.

    Raises:
        ValueError: not a positive size.
    """
    m = _BYTE_RATE_RE.match(text.strip()) if len(text) <= MAX_VALUE_TEXT else None
    size = None if m is None else (1 if m.group("unit") is None else byte_unit(m.group("unit")))
    if m is None or size is None or Decimal(m.group("num")) <= 0:
        raise ValueError(f"{text!r} is not a size (examples: 64GiB, 500MB, 1048576)")
    return int(Decimal(m.group("num")) * size)


#: The binary byte units, largest first: :func:`format_quota_value` tries them
#: first, :func:`readable_quota` rounds to steps of them.
BINARY_UNITS: tuple[tuple[str, int], ...] = (
    ("PiB", 1024**5),
    ("TiB", 1024**4),
    ("GiB", 1024**3),
    ("MiB", 1024**2),
    ("KiB", 1024),
)
#: The decimal SI byte units, largest first.
DECIMAL_UNITS: tuple[tuple[str, int], ...] = (
    ("PB", 1000**5),
    ("TB", 1000**4),
    ("GB", 1000**3),
    ("MB", 1000**2),
    ("kB", 1000),
)
#: The units :func:`format_quota_value` tries for a byte rate, in order (the
#: first in which the value reads exactly with at most
#: :data:`FORMAT_DECIMALS` decimals wins).
FORMAT_UNITS: tuple[tuple[str, int], ...] = (*BINARY_UNITS, *DECIMAL_UNITS)
#: Byte rates below this many bytes/s are written as plain numbers (``512``).
FORMAT_UNITS_FROM = 1000
#: The most decimals a byte rate is written with in a unit (``1.25MiB``).
FORMAT_DECIMALS = 2
#: What follows a value written in a unit other than bytes/s (``150%``); none
#: for the units not listed.
UNIT_SUFFIX: Mapping[str, str] = MappingProxyType({"%": "%"})

#: :func:`readable_quota` for bytes/s: below this many of the largest binary
#: unit a value reaches, steps of a quarter of it (``1.5MiB``); from there,
#: whole units (``12MiB``).
READABLE_FINE_BELOW = 10
#: Steps per binary unit below :data:`READABLE_FINE_BELOW` (quarters).
READABLE_FINE_STEPS = 4
#: :func:`readable_quota` for every unit, and for bytes/s below 1 KiB: steps
#: per one of the unit (whole bytes/s, %, connections/s; tenths of mutations/s).
READABLE_STEPS_PER_UNIT: Mapping[str, int] = MappingProxyType(
    {"bytes/s": 1, "%": 1, "mutations/s": 10, "connections/s": 1}
)
#: Slack before rounding up, so a value one float rounding above a step (a
#: product of a step and a headroom of 1.0) stays on it.
READABLE_EPSILON = 1e-9

# The grammar of value strings, shared by the parser and the JSON Schema
# patterns (which admit only what validates; the parser also reads a sign, to
# say "must be greater than 0" rather than "not a number").
_UNSIGNED = r"([0-9]+(\.[0-9]*)?|\.[0-9]+)"
_EXPONENT = r"([eE][+-]?[0-9]+)?"
_PER_SECOND = r"(/\s*[sS])?"
_NUMBER = rf"[+-]?{_UNSIGNED}"
_BYTE_RATE_RE = re.compile(rf"^\s*(?P<num>{_NUMBER})\s*(?P<unit>[A-Za-z]+)?\s*{_PER_SECOND}\s*$")
_PERCENT_RE = re.compile(rf"^\s*(?P<num>{_NUMBER}{_EXPONENT})\s*%?\s*$")
_PLAIN_RE = re.compile(rf"^\s*(?P<num>{_NUMBER}{_EXPONENT})\s*$")

_BYTE_RATE_EXAMPLES = "examples: 1048576, 512KiB, 10MiB, 1.5MB"
_JAVA_MAX_NAME = {ValueType.LONG: "Long.MAX_VALUE", ValueType.INT: "Integer.MAX_VALUE"}


class QuotaValueError(ValueError):
    """A quota key or value Kafka would reject, or text that is not a value.

    Attributes:
        key: the quota key being parsed.
        raw: the input as given (``str``, ``int``, ``float``, or anything YAML produced).
    """

    def __init__(self, key: str, raw: object, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.raw = raw


#: Longest value text quotaform reads as a number (a float64 written out in
#: digits has at most 309); longer text is refused before any arithmetic.
MAX_VALUE_TEXT = 400
_EXCERPT = 40


def render_raw(raw: object) -> str:
    """``raw`` as it would read in YAML/JSON: ``"10MiBs"``, ``true``, ``null``,
    ``12``. Long values are cut to an excerpt with their length, so a message
    never quotes megabytes: ``"9999...9999" (52428800 characters)``."""
    if isinstance(raw, str) and len(raw) > MAX_VALUE_TEXT:
        head = json.dumps(raw[:_EXCERPT], ensure_ascii=False)[:-1]
        return f'{head}..." ({len(raw)} characters)'
    if isinstance(raw, bool | type(None) | str):
        return json.dumps(raw, ensure_ascii=False)
    if isinstance(raw, int | float):
        return repr(raw)
    text = json.dumps(raw, ensure_ascii=False, default=str)
    return text if len(text) <= 60 else text[:57] + "..."


def _spec(key: str, raw: object) -> KeySpec:
    spec = QUOTA_KEYS.get(key)
    if spec is None:
        known = ", ".join(sorted(QUOTA_KEYS))
        raise QuotaValueError(
            key,
            raw,
            f'unknown quota key {key!r} (Kafka: "Invalid configuration key {key}"); '
            f"known keys: {known}",
        )
    return spec


def _to_decimal(spec: KeySpec, raw: object) -> Decimal:
    """The exact value written, before range checks."""
    key = spec.key
    if isinstance(raw, bool):
        # bool is an int subclass; YAML `true` is never meant as 1.
        raise QuotaValueError(key, raw, f"{render_raw(raw)} is a boolean, not a number")
    if isinstance(raw, int):
        return Decimal(raw)
    if isinstance(raw, float):
        if not math.isfinite(raw):
            raise QuotaValueError(key, raw, f"{raw!r} is not a finite number")
        return Decimal(raw)
    if not isinstance(raw, str):
        raise QuotaValueError(key, raw, f"{render_raw(raw)} is not a number")
    if len(raw) > MAX_VALUE_TEXT:
        stripped = raw.strip()
        what = (
            f"a number of {len(stripped)} digits"
            if stripped.isdigit()
            else f"{len(raw)} characters long"
        )
        raise QuotaValueError(
            key, raw, f"{render_raw(raw)} is {what}: too long to be a quota value"
        )

    if spec.unit == "bytes/s":
        m = _BYTE_RATE_RE.match(raw)
        unit = m.group("unit") if m else None
        size = 1 if unit is None else byte_unit(unit)
        if m is None or size is None:
            raise QuotaValueError(
                key, raw, f"{render_raw(raw)} is not a byte rate ({_BYTE_RATE_EXAMPLES})"
            )
        return Decimal(m.group("num")) * size
    if spec.unit == "%":
        m = _PERCENT_RE.match(raw)
        if m is None:
            raise QuotaValueError(
                key, raw, f'{render_raw(raw)} is not a percentage (examples: 150, 12.5, "25%")'
            )
        return Decimal(m.group("num"))
    m = _PLAIN_RE.match(raw)
    if m is None:
        example = "20, 100" if spec.value_type is ValueType.INT else "2.5, 10"
        raise QuotaValueError(key, raw, f"{render_raw(raw)} is not a number (examples: {example})")
    return Decimal(m.group("num"))


def parse_quota_value(key: str, raw: object) -> float:
    """Parse one manifest value into the float64 Kafka stores.

    Args:
        key: a quota key from :data:`quotaform.kafka.keys.QUOTA_KEYS`.
        raw: an ``int`` / ``float`` as YAML loads it, or a string: a byte rate with
            an optional unit (any case) and ``/s`` suffix (``"10MiB"``, ``"1.5 MB/s"``,
            ``"10mb"``) for
            ``producer_byte_rate`` / ``consumer_byte_rate`` (bytes/s); a number with
            an optional ``%`` for ``request_percentage`` (``"150%"`` is 1.5 I/O +
            network threads); a plain number for ``controller_mutation_rate``
            (mutations/s) and ``connection_creation_rate`` (connections/s).

    Returns:
        The value as a float, e.g. ``parse_quota_value("producer_byte_rate", "10MiB")
        == 10485760.0``.

    Raises:
        QuotaValueError: (a ``ValueError``) unknown key; not a number / byte rate /
            percentage (booleans included); NaN or infinite; not greater than 0;
            a fractional value for a LONG / INT key (byte rates must be a whole
            number of bytes/s after units are applied); larger than
            Long.MAX_VALUE / Integer.MAX_VALUE (compared as float64, like the
            controller). The rules are those of
            ``ClientQuotaControlManager.validateQuotaKeyValue`` (KIP-546), made
            stricter where the controller tolerates nonsense (NaN, +Inf, 1e-6
            fractional slack).
    """
    # Manifests repeat a few values thousands of times; errors are not cached.
    if type(raw) in (str, int, float):
        return _parse_cached(key, raw)
    return _parse(key, raw)


def _parse(key: str, raw: object) -> float:
    spec = _spec(key, raw)
    try:
        exact = _to_decimal(spec, raw)
    except InvalidOperation as exc:  # pragma: no cover - the regexes admit only decimals
        raise QuotaValueError(key, raw, f"{render_raw(raw)} is not a number") from exc

    if exact <= 0:
        raise QuotaValueError(key, raw, f"{render_raw(raw)} must be greater than 0")
    max_value = spec.max_value
    if max_value is not None:
        if exact != exact.to_integral_value():
            shown = render_raw(raw)
            if spec.unit == "bytes/s":
                msg = f"{shown} is {exact.normalize():f} bytes/s: not a whole number of bytes/s"
            else:
                msg = f"{shown} must be a whole number of {spec.unit} (Kafka rejects fractions)"
            raise QuotaValueError(key, raw, msg)
        # Compared as float64, as the controller does (Java promotes the long):
        # Long.MAX_VALUE itself arrives as 2^63 and is accepted there.
        if float(exact) > float(max_value):
            raise QuotaValueError(
                key,
                raw,
                f"{render_raw(raw)} is too large: at most {max_value} {spec.unit} "
                f"({_JAVA_MAX_NAME[spec.value_type]})",
            )
    value = float(exact)
    if not math.isfinite(value):
        raise QuotaValueError(key, raw, f"{render_raw(raw)} is too large for a float64")
    return value


_parse_cached = functools.lru_cache(maxsize=1 << 16, typed=True)(_parse)


def _plain_number(value: float) -> str:
    # Whole floats print without ".0"; others use repr, the shortest text that
    # parses back to the same float.
    if value.is_integer():
        return str(int(value))
    return repr(value)


_SCALE = 10**FORMAT_DECIMALS


def _exact_in_unit(value: int, size: int) -> str | None:
    """``value / size`` with at most :data:`FORMAT_DECIMALS` decimals, when
    that is exact and >= 1."""
    if value < size or (value * _SCALE) % size:
        return None
    scaled = value * _SCALE // size
    whole, frac = divmod(scaled, _SCALE)
    if frac == 0:
        return str(whole)
    return f"{whole}.{frac:0{FORMAT_DECIMALS}d}".rstrip("0")


@functools.lru_cache(maxsize=1 << 16, typed=True)
def format_quota_value(key: str, value: float) -> str:
    """A readable form of a stored quota value that parses back to ``value``.

    Rules (deterministic, and ``parse_quota_value(key, format_quota_value(key, v)) == v``
    for every valid ``v``):

    * byte rates (bytes/s) below 1000, fractional or not: the plain number
      (``512``).
    * other whole byte rates: the largest binary unit in which the value is exact
      with at most two decimals (``10485760`` -> ``10MiB``, ``1536`` ->
      ``1.5KiB``, ``1310720`` -> ``1.25MiB``), else the largest decimal SI unit
      under the same rule (``1000000`` -> ``1MB``, ``1500`` -> ``1.5kB``), else
      the plain number of bytes (``1234567``). No thousands separators, so the
      text can be pasted back into a manifest.
    * ``request_percentage``: the number with ``%`` (``150%``, ``12.5%``).
    * everything else: the plain number (``2.5``, ``20``).

    Plain numbers print whole floats without ``.0`` and others with Python's
    shortest round-tripping ``repr``. Keys unknown to quotaform (a newer broker's)
    are formatted as plain numbers; NaN and infinities as ``nan`` / ``inf``.
    """
    if not math.isfinite(value):
        return repr(value)
    spec = QUOTA_KEYS.get(key)
    if spec is None:
        return _plain_number(value)
    if spec.unit == "bytes/s" and value.is_integer() and value >= FORMAT_UNITS_FROM:
        whole = int(value)
        for name, size in FORMAT_UNITS:
            shown = _exact_in_unit(whole, size)
            if shown is not None:
                return f"{shown}{name}"
        return str(whole)
    return _plain_number(value) + UNIT_SUFFIX.get(spec.unit, "")


def readable_quota(key: str, value: float) -> float:
    """``value`` (in ``key``'s unit) rounded UP to a number a person writes in
    a manifest, for a recommended quota:

    * bytes/s: quarter steps of the largest binary unit it reaches below 10 of
      it (``1.3MiB`` -> ``1.5MiB``), whole units from 10 (``12.2MiB`` ->
      ``13MiB``), whole bytes below 1 KiB (``700.2`` -> ``701``);
    * ``request_percentage`` (%) and ``connection_creation_rate``
      (connections/s): whole numbers; ``controller_mutation_rate``
      (mutations/s): tenths.

    Never below ``value`` (less :data:`READABLE_EPSILON` of a step); at least
    the smallest step (1, or 0.1 mutations/s). The tables
    (:data:`BINARY_UNITS`, :data:`READABLE_FINE_BELOW`,
    :data:`READABLE_FINE_STEPS`, :data:`READABLE_STEPS_PER_UNIT`) are read by
    the Spark engine too.

    Raises:
        KeyError: ``key`` is not a quota key.
        ValueError: ``value`` is NaN (OverflowError: infinite).
    """
    unit = QUOTA_KEYS[key].unit
    if unit == "bytes/s":
        for _, size in BINARY_UNITS:
            if value >= size:
                fine = value < READABLE_FINE_BELOW * size
                step = size / READABLE_FINE_STEPS if fine else size
                return float(math.ceil(value / step - READABLE_EPSILON) * step)
    per = READABLE_STEPS_PER_UNIT[unit]
    return max(1 / per, math.ceil(value * per - READABLE_EPSILON) / per)


def java_double_text(value: float) -> str:
    """A quota value as Kafka's own tools print it (Java ``Double.toString``,
    e.g. ``kafka-configs --describe``): ``1048576.0``, ``12.5``, ``2.097152E7``
    (scientific from 10^7 and below 10^-3), ``NaN``, ``Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    if 1e-3 <= abs(value) < 1e7:
        text = repr(value)  # never scientific in this range; shortest, like Java 19+
        return text if "." in text else text + ".0"
    sign, digits, exponent = Decimal(repr(value)).normalize().as_tuple()
    assert isinstance(exponent, int)
    shown = "".join(map(str, digits))
    mantissa = shown[0] + "." + (shown[1:] or "0")
    return f"{'-' if sign else ''}{mantissa}E{len(digits) - 1 + exponent}"


def value_pattern(key: str) -> str:
    """The JSON Schema ``pattern`` of a value string for ``key``: exactly the
    strings :func:`parse_quota_value` can accept (before range checks).

    Raises:
        KeyError: ``key`` is not in :data:`~quotaform.kafka.keys.QUOTA_KEYS`.
    """
    spec = QUOTA_KEYS[key]
    if spec.unit == "bytes/s":
        # JSON Schema (ECMA-262) patterns have no case-insensitive flag.
        units = "|".join(_any_case(name) for name in BYTE_UNITS)
        return rf"^\s*{_UNSIGNED}\s*({units})?\s*{_PER_SECOND}\s*$"
    if spec.unit == "%":
        return rf"^\s*{_UNSIGNED}{_EXPONENT}\s*%?\s*$"
    if spec.value_type is ValueType.INT:
        return r"^\s*\+?[0-9]+\s*$"
    return rf"^\s*{_UNSIGNED}{_EXPONENT}\s*$"


def _any_case(name: str) -> str:
    return "".join(f"[{c.upper()}{c.lower()}]" if c.isalpha() else c for c in name)


def same_value(a: float, b: float) -> bool:
    """Whether two quota values are the same to Kafka: values travel as float64,
    so ``1048576`` (a YAML int) and ``1048576.0`` (from the wire) are equal.
    The one equality every comparison of quota values uses."""
    return float(a) == float(b)


def same_quotas(a: Mapping[str, float], b: Mapping[str, float]) -> bool:
    """Whether two ``{quota key: quota value}`` maps set the same keys to the
    same values (:func:`same_value`)."""
    return a.keys() == b.keys() and all(same_value(a[k], b[k]) for k in a)


def _significant(value: float, digits: int = 3) -> str:
    """``value`` with ``digits`` significant digits (at least the whole
    part), trailing zeros dropped: ``1.0199`` -> ``1.02``, ``265.3`` ->
    ``265``, ``50.0`` -> ``50``."""
    if value == 0:
        return "0"
    whole_digits = len(str(int(abs(value)))) if abs(value) >= 1 else 1
    decimals = max(0, digits - whole_digits)
    text = f"{value:.{decimals}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def format_bytes(value: float) -> str:
    """Bytes (or bytes/s) for people, in the manifests' binary units with
    three significant digits: ``53901000704`` -> ``50.2GiB``,
    ``53687091200`` -> ``50GiB``, ``1069548`` -> ``1.02MiB``, ``512`` ->
    ``512B``. Approximate: exact numbers belong in JSON (and a quota value
    that must parse back is :func:`format_quota_value`'s)."""
    if not math.isfinite(value):
        return repr(value)
    for name, size in BINARY_UNITS:
        if abs(value) >= size:
            return f"{_significant(value / size)}{name}"
    return f"{_significant(value)}B"


def format_readable(key: str, value: float) -> str:
    """A quota value for people: :func:`format_quota_value`'s exact text when
    it reads in the manifests' units (``2MiB``, ``512``, ``150%``), else
    :func:`format_measured`'s three significant digits (``1363148`` ->
    ``1.3MiB``). For values quotaform computes (a storage scaling: 2MiB x
    0.65), shown to a person, never pasted back (exact numbers are in JSON)."""
    exact = format_quota_value(key, value)
    spec = QUOTA_KEYS.get(key)
    bytes_rate = spec is not None and spec.unit == "bytes/s"
    if bytes_rate and exact.isdigit() and value >= FORMAT_UNITS_FROM:
        return format_measured(key, value)
    return exact


def format_measured(key: str, value: float) -> str:
    """A measured rate of quota key ``key`` for people (usage, p99, max):
    bytes/s keys in binary units (:func:`format_bytes`), ``request_percentage``
    with ``%``, others plain, three significant digits."""
    spec = QUOTA_KEYS.get(key)
    if spec is not None and spec.unit == "bytes/s":
        return format_bytes(value)
    if not math.isfinite(value):
        return repr(value)
    return _significant(value) + (UNIT_SUFFIX.get(spec.unit, "") if spec is not None else "")


_DURATION_PARTS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))


def format_duration(seconds: float) -> str:
    """A duration as the manifests write one, whole seconds: ``300`` ->
    ``5m``, ``1201`` -> ``20m01s``, ``3661`` -> ``1h01m01s``, ``30`` -> ``30s``;
    under a second ``0.5s``."""
    if not math.isfinite(seconds):
        return repr(seconds)
    if abs(seconds) < 1:
        return f"{_significant(seconds, 2)}s"
    left = round(abs(seconds))
    parts: list[str] = []
    for name, size in _DURATION_PARTS:
        count, left = divmod(left, size)
        if count or (parts and left):
            parts.append(f"{count:02d}{name}" if parts else f"{count}{name}")
    return ("-" if seconds < 0 else "") + "".join(parts)
