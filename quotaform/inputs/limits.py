"""The bounds every input is read within, one row per kind of input.

A bound is checked before or while parsing, never by catching
``RecursionError`` or ``MemoryError`` afterwards: sizes before reading (and
again while reading: a file may grow), nesting depth by a scan of the bytes
before a JSON parser sees them or by counting a YAML parser's events, number
length by the parser's number hook. ``docs/manifests.md`` ("Limits") and
``docs/analytics.md`` ("Inputs and their limits") print this table.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from types import MappingProxyType

from quotaform.kafka.units import MAX_VALUE_TEXT

__all__ = [
    "GIB",
    "KIB",
    "LIMITS",
    "MAX_DEPTH",
    "MAX_KEYS",
    "MAX_LINE_BYTES",
    "MAX_NUMBER_CHARS",
    "MIB",
    "Limits",
    "limits_for",
    "size_text",
]

KIB = 1024
MIB = 1024 * KIB
GIB = 1024 * MIB

#: Deepest nesting of mappings and lists read anywhere. quotaform's own
#: documents nest at most 7 deep (a saved plan's key changes); 64 leaves room
#: for any reasonable hand-written YAML while a parser, a validator or
#: ``json.dumps`` of the value stays far from Python's recursion limit.
MAX_DEPTH = 64
#: Longest number read, in characters: the bound quota values have
#: (a float64 written out in digits has at most 309).
MAX_NUMBER_CHARS = MAX_VALUE_TEXT
#: Longest line of a line-oriented input (JSON Lines, CSV, properties): a
#: usage row is about 200 bytes.
MAX_LINE_BYTES = 1 * MIB
#: Most keys in one mapping: quotaform's documents need a few hundred at most
#: (a profiles file's clusters); a million took 20 s and 1.9 GB to refuse
#: one problem at a time.
MAX_KEYS = 10_000


@dataclass(frozen=True, slots=True)
class Limits:
    """The bounds of one kind of input.

    Attributes:
        kind: what the input is, in the words of error messages
            (``"manifest"``, ``"saved plan"``, ``"usage file"``).
        max_bytes: the largest input read, in bytes.
        max_depth: the deepest nesting of mappings and lists.
        max_number_chars: the longest number, in characters.
        max_line_bytes: the longest line of a line-oriented input, in bytes.
        overridden_by: the option that raises ``max_bytes`` (``None``: fixed),
            named in the refusal.
        secret: the input may hold a secret: refusals never quote a byte of it.
    """

    kind: str
    max_bytes: int
    max_depth: int = MAX_DEPTH
    max_number_chars: int = MAX_NUMBER_CHARS
    max_line_bytes: int = MAX_LINE_BYTES
    overridden_by: str | None = None
    secret: bool = False

    def with_max_bytes(self, max_bytes: int | None) -> Limits:
        """These limits with ``max_bytes`` replaced (``None``: unchanged)."""
        return self if max_bytes is None else replace(self, max_bytes=max_bytes)

    def size_text(self) -> str:
        """``max_bytes`` as a reader writes it (``64 MiB``)."""
        return size_text(self.max_bytes)


def size_text(n: int) -> str:
    """``n`` bytes in the largest binary unit that divides it (``64 MiB``)."""
    for unit, size in (("GiB", GIB), ("MiB", MIB), ("KiB", KIB)):
        if n >= size and n % size == 0:
            return f"{n // size} {unit}"
    return f"{n} bytes"


#: The limits of every kind of input, by name.
LIMITS: MappingProxyType[str, Limits] = MappingProxyType(
    {
        # 100,000 quota entries take about 10 MiB of YAML.
        "manifest": Limits("manifest", 64 * MIB),
        # A plan of 100,000 entities is about 40 MiB.
        "plan": Limits("saved plan", 256 * MIB),
        "profiles": Limits("cluster profiles file", 16 * MIB, secret=True),
        "command-config": Limits("--command-config file", 1 * MIB, secret=True),
        "prometheus-config": Limits("--prometheus-config file", 1 * MIB, secret=True),
        # a password or token file: one line
        "secret": Limits("secret file", 64 * KIB, secret=True),
        # one JSON line per entity: 100,000 entities are about 20 MiB
        "snapshot": Limits("quota snapshot", 1 * GIB),
        "volumes": Limits("volume snapshot", 64 * MIB),
        "volume-record": Limits("volume snapshot record", 1 * MIB),
        "lock-record": Limits("apply lock record", 64 * KIB),
        # Usage is streamed, never held whole: the bound is a guard against a
        # wrong path (a disk image), raised with --max-usage-size.
        "usage": Limits("usage file", 64 * GIB, overridden_by="--max-usage-size"),
        "prometheus-answer": Limits(
            "Prometheus answer", 2 * GIB, overridden_by="--max-usage-size"
        ),
        "prometheus-error": Limits("Prometheus error answer", 64 * KIB),
        "exporter-answer": Limits("exporter answer", 64 * MIB),
        "exporter-rules": Limits("exporter rules file", 16 * MIB),
        "state": Limits("state file", 16 * MIB),
    }
)


def limits_for(kind: str, *, max_bytes: int | None = None) -> Limits:
    """The :data:`LIMITS` of ``kind``, with ``max_bytes`` overriding the size
    bound where given.

    Raises:
        KeyError: an unknown kind (a programming error).
    """
    return LIMITS[kind].with_max_bytes(max_bytes)
