"""pydantic's validation errors as quotaform's problems: every error of a
document, each with its file, line, field path and a message to act on.

The one translator for every file quotaform validates with pydantic (the
manifests, the cluster profiles file, volume snapshot records, saved plan
files), so all of them report alike, ``path:line: field: message``, and
report every error at once rather than the first. The caller brings what it
knows of its file: a :data:`Locator` from a field path to its line and to
the path as its readers write it, and the :class:`Wording` its readers need.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from quotaform.errors import ManifestProblem
from quotaform.kafka.entity import escape_unprintable
from quotaform.kafka.units import render_raw
from quotaform.plan.differences import path_text

__all__ = ["SCHEMA_WORDS", "Loc", "Locator", "Wording", "suggest", "validation_problems"]

Loc = tuple[int | str, ...]
"""A field path: mapping keys and sequence indexes, as pydantic's ``loc``."""

Locator = Callable[[Loc], tuple[int | None, str]]
"""A field path -> ``(1-based line or None, the path as the file's readers
write it)``, e.g. :meth:`quotaform.inputs.yamlsource.Lines.locate`."""


@dataclass(frozen=True, slots=True)
class Wording:
    """How :func:`validation_problems` words each error.

    Attributes:
        readable: quotaform's words for the common errors ("required field
            is missing", "expected a string, got 7", "unknown field ...:
            allowed: ..."), for files people write; ``False`` keeps
            pydantic's own, for files programs write, whose JSON Schemas
            speak the same language.
        show_input: end a message with the value given (``got ...``);
            ``False`` where a value may be a secret.
        fields: the field names allowed in the mapping at a location (for
            an unknown field: "did you mean", "allowed: ..."); ``None`` when
            not known.
        special: the caller's own message for an error, tried first
            (``None`` from it: the usual words).
    """

    readable: bool = True
    show_input: bool = True
    fields: Callable[[Loc], Sequence[str] | None] | None = None
    special: Callable[[Loc, Mapping[str, Any]], str | None] | None = None


#: pydantic's words with the value given: saved plans, volume snapshot records.
SCHEMA_WORDS = Wording(readable=False)


def _unlocated(loc: Loc) -> tuple[int | None, str]:
    return None, path_text(loc)


def validation_problems(
    exc: ValidationError,
    path: str,
    *,
    locate: Locator = _unlocated,
    at: Loc = (),
    wording: Wording = SCHEMA_WORDS,
    skip: Callable[[Loc], bool] | None = None,
) -> list[ManifestProblem]:
    """One problem per error of ``exc``, in pydantic's order (the order of
    the fields in the document's model).

    Args:
        exc: what validating one document (or one part of it) raised.
        path: the file (or record) the document came from.
        locate: the line and printed path of a field; by default no line
            and the path as :func:`~quotaform.plan.differences.path_text`
            writes it.
        at: where the validated part sits in its document (prefixed to
            every error's location), e.g. ``("spec", "quotas", 3)``.
        wording: the words (:class:`Wording`).
        skip: locations whose errors the caller reports otherwise.
    """
    problems = []
    for error in exc.errors(include_url=False):
        loc: Loc = (*at, *error["loc"])
        if skip is not None and skip(loc):
            continue
        line, field = locate(loc)
        problems.append(ManifestProblem(path, line, field, _message(error, loc, wording)))
    return problems


_EXPECTED = {
    "string_type": "a string",
    "bool_type": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _message(error: Mapping[str, Any], loc: Loc, wording: Wording) -> str:
    if wording.special is not None:
        special = wording.special(loc, error)
        if special is not None:
            return special
    kind = error["type"]
    given = error.get("input")
    # A missing field's input is the mapping that lacks it: not worth quoting.
    shown = wording.show_input and kind != "missing"
    if not wording.readable:
        return f"{error['msg']} (got {render_raw(given)})" if shown else str(error["msg"])
    ctx = error.get("ctx") or {}
    got = f", got {render_raw(given)}" if shown else ""
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return _unknown_field(loc, wording)
    if kind == "literal_error":
        return f"expected {ctx.get('expected')}{got}"
    if kind in ("too_short", "string_too_short"):
        return "must not be empty"
    expected = _EXPECTED.get(kind)
    if expected is not None:
        return f"expected {expected}{got}"
    return f"{error['msg']} (got {render_raw(given)})" if shown else str(error["msg"])


def _unknown_field(loc: Loc, wording: Wording) -> str:
    name = str(loc[-1]) if loc else ""
    allowed = list((wording.fields(loc[:-1]) if wording.fields else None) or ())
    # The name is in the field path already; quoted again where values may show.
    quoted = f" {escape_unprintable(repr(name))}" if wording.show_input else ""
    if not allowed:
        return f"unknown field{quoted}"
    return f"unknown field{quoted}: {suggest(name, allowed)}allowed: {', '.join(allowed)}"


def suggest(word: str, choices: Sequence[str]) -> str:
    """``"did you mean X? "`` for the closest of ``choices``, else ``""``."""
    close = difflib.get_close_matches(word, choices, n=1)
    return f"did you mean {close[0]}? " if close else ""
