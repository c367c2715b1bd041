"""What differs between two nested documents, path by path, for messages.

Used where quotaform refuses a document because it does not say what it
should (a saved plan whose ``key_changes`` do not follow from its
``before``/``after``; a saved plan that does not lead to what the manifests
declare): the refusal lists each differing path with both values, e.g.
``changes[3].key_changes[0].after: 1048576000 != 2097152``.

deepdiff walks the documents; numbers are compared with
:func:`quotaform.kafka.units.same_value`, the one value-equality of quota
values (``650`` and ``6.5E2`` are equal, as they are to Kafka). Not on a hot
path: callers find *whether* something differs with plain comparisons and
ask this module only to word what does.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from quotaform.kafka.entity import escape_unprintable
from quotaform.kafka.units import same_value

__all__ = ["differences", "path_text"]


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@functools.cache
def _same_quota_value() -> Any:
    """A deepdiff operator: numbers are equal when Kafka would take them as
    the same float64. deepdiff (which loads numpy) is imported here, on the
    error path only: ``plan`` imports this module and must not pay for it."""
    from deepdiff.operator import BaseOperator

    class SameQuotaValue(BaseOperator):
        def match(self, level: Any) -> bool:
            return _number(level.t1) and _number(level.t2)

        def give_up_diffing(self, level: Any, diff_instance: Any) -> bool:
            return same_value(level.t1, level.t2)

    return SameQuotaValue()


def _text(value: object) -> str:
    from deepdiff.helper import NotPresent

    if isinstance(value, NotPresent):
        return "(absent)"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e16:
        return str(int(value))
    if isinstance(value, str):
        return escape_unprintable(repr(value))
    text = escape_unprintable(repr(value))
    return text if len(text) <= 80 else text[:77] + "..."


def path_text(parts: Sequence[object], root: str = "") -> str:
    """A field path as quotaform prints it: ``changes[3].key_changes[0].after``
    from ``["changes", 3, "key_changes", 0, "after"]``, after ``root``;
    unprintable characters escaped."""
    out = root
    for part in parts:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = escape_unprintable(str(part))
            out += f".{name}" if out else name
    return out or "(document)"


def differences(found: Any, expected: Any, *, root: str = "", limit: int = 10) -> list[str]:
    """Every path where ``found`` differs from ``expected`` (plain JSON-like
    data: dicts, lists, strings, numbers, None), as
    ``path: found != expected`` lines sorted by path, at most ``limit``
    (then one ``... and N more`` line). ``root`` prefixes every path
    (``changes[3]``). Absent values read ``(absent)``; numbers compare by
    :func:`~quotaform.kafka.units.same_value`. Empty when nothing differs."""
    from deepdiff import DeepDiff

    diff = DeepDiff(
        found,
        expected,
        custom_operators=[_same_quota_value()],
        view="tree",
        verbose_level=2,
    )
    levels = sorted(
        (level for report in diff.tree.values() for level in report),
        key=lambda level: [
            (isinstance(p, str), p if isinstance(p, str) else int(p))
            for p in level.path(output_format="list")
        ],
    )
    lines = [
        f"{path_text(level.path(output_format='list'), root)}: "
        f"{_text(level.t1)} != {_text(level.t2)}"
        for level in levels
    ]
    shown = lines[:limit]
    if len(lines) > limit:
        shown.append(f"... and {len(lines) - limit} more")
    return shown
