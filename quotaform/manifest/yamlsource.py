"""YAML sources with line numbers: read documents as plain data plus their node
trees, and locate a field path in a node tree.

Shared by the manifest loader and the cluster profiles file, so both report
problems as ``path:line: field: message`` the same way.

Hostile input stays bounded: aliases (``*name``) are refused, since manifests
never need them and a few nested ones expand into billions of nodes; integers
too long to be a quota value are kept as their text, for the value parser to
refuse with its field path (Python refuses to convert more than 4,300 digits).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.composer import ReusedAnchorWarning
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import AliasEvent
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError

from quotaform.kafka.entity import escape_unprintable

__all__ = [
    "MAX_NUMBER_DIGITS",
    "AliasRefused",
    "Loc",
    "compose_documents",
    "describe_yaml_error",
    "locate",
]

#: Longer integers are not converted (no quota value has more digits).
MAX_NUMBER_DIGITS = 400


class AliasRefused(YAMLError):
    """The text uses a YAML alias; ``line`` is 1-based."""

    def __init__(self, line: int, name: str) -> None:
        super().__init__(f"alias *{name}")
        self.line = line
        self.name = name


class _Constructor(SafeConstructor):
    """The safe constructor, keeping over-long integers as their text."""

    def construct_yaml_int(self, node: Any) -> Any:
        text = str(node.value)
        if len(text) > MAX_NUMBER_DIGITS:
            return text
        return super().construct_yaml_int(node)


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)


def _refuse_aliases(text: str) -> None:
    """Raise :class:`AliasRefused` at the first alias before a syntax error.
    Only a text with ``*`` can hold one, so the event scan runs only then;
    syntax errors are left to the composer to report."""
    if "*" not in text:
        return
    try:
        for event in YAML(typ="safe", pure=True).parse(text):
            if isinstance(event, AliasEvent):
                raise AliasRefused(event.start_mark.line + 1, str(event.anchor))
    except AliasRefused:
        raise
    except YAMLError:
        return


Loc = tuple[int | str, ...]
"""A field path: mapping keys and sequence indexes, as pydantic's ``loc``."""


def compose_documents(text: str) -> Iterator[tuple[Any, Node]]:
    """``(plain data, node)`` of each non-empty YAML document in ``text``.

    The node tree's marks give line numbers; ruamel's safe constructor turns
    the same nodes into plain Python (YAML 1.2 types, duplicate keys refused).
    libyaml (ruamel.yaml.clib) composes first because it is about seven times
    faster (benchmarks/README.md); it is a YAML 1.1 parser, though, and refuses
    some valid YAML 1.2 (``{ip: 2001:db8::10}``), so on any error the text is
    read again with ruamel's own YAML 1.2 parser, whose verdict (and message)
    stands.

    Raises:
        YAMLError: from ruamel's parser (see :func:`describe_yaml_error`),
            after yielding the documents before the error; :class:`AliasRefused`
            before any document when the text uses an alias.
    """
    _refuse_aliases(text)
    documents, error = _compose(text, pure=False)
    if error is not None:
        documents, error = _compose(text, pure=True)
    yield from documents
    if error is not None:
        raise error


def _compose(text: str, *, pure: bool) -> tuple[list[tuple[Any, Node]], YAMLError | None]:
    """The documents before the first error, and that error (``None``: none).
    ruamel's warnings (a reused anchor) quote the raw text, control characters
    included; they are not errors and are not printed."""
    yaml = YAML(typ="safe", pure=pure)
    yaml.Constructor = _Constructor
    documents: list[tuple[Any, Node]] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ReusedAnchorWarning)
        try:
            for node in yaml.compose_all(text):
                if node is None or (
                    isinstance(node, ScalarNode) and str(node.tag).endswith(":null")
                ):
                    continue
                documents.append((yaml.constructor.construct_document(node), node))
        except YAMLError as exc:
            return documents, exc
    return documents, None


def _child(node: Node, part: int | str) -> Node | _KeyAt | None:
    """The node under ``part`` (a mapping key or a sequence index), if present."""
    if isinstance(node, MappingNode):
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value == str(part):
                return _KeyAt(key, value)
    elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
        item: Node = node.value[part]
        return item
    return None


class _KeyAt:
    """A mapping value reached through its key: located at the key's line
    (where a reader looks for the field), descending into the value."""

    def __init__(self, key: Node, value: Node) -> None:
        self.start_mark = key.start_mark
        self.value_node = value


def locate(root: Node, loc: Loc) -> tuple[int | None, str]:
    """``(1-based line, field path)`` of a location in one document.

    Follows ``loc`` down the node tree as far as it exists; a missing key (a
    required field left out) points at the mapping that should hold it.
    """
    node: Node | None = root
    line: int | None = root.start_mark.line
    path = ""
    for part in loc:
        in_seq = isinstance(node, SequenceNode)
        # A key is shown as written, but never with a raw newline or control
        # character (a problem is one line).
        shown = part if isinstance(part, int) else escape_unprintable(str(part))
        path += (
            f"[{shown}]"
            if in_seq and isinstance(part, int)
            else (f".{shown}" if path else str(shown))
        )
        found = _child(node, part) if node is not None else None
        if found is None:
            node = None
            continue
        line = found.start_mark.line
        node = found.value_node if isinstance(found, _KeyAt) else found
    return (line + 1 if line is not None else None), path or "(document)"


def describe_yaml_error(exc: YAMLError, text: str | None = None) -> tuple[int | None, str]:
    """``(1-based line or None, message)`` for a YAML error; ``text`` (the
    document's text) turns a reader error's character position into a line."""
    if isinstance(exc, AliasRefused):
        return exc.line, (
            f"YAML aliases are not allowed in manifests (*{exc.name}): write the value out"
        )
    if isinstance(exc, ReaderError):
        line = text.count("\n", 0, exc.position) + 1 if text is not None else None
        char = exc.character
        shown = f"#x{ord(char):04x}" if isinstance(char, str) else repr(char)
        return line, f"invalid YAML: character {shown} is not allowed ({exc.reason})"
    if not isinstance(exc, MarkedYAMLError):
        return None, f"invalid YAML: {exc}"
    mark = exc.problem_mark or exc.context_mark
    message = f"invalid YAML: {exc.problem or exc.context}"
    if exc.problem and exc.context:
        context_line = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
        message += f" ({exc.context}{context_line})"
    return (mark.line + 1 if mark else None), message
