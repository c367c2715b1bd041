"""YAML sources with line numbers: read documents as plain data plus their node
trees, and locate a field path in a node tree.

Shared by the manifest loader and the cluster profiles file, so both report
problems as ``path:line: field: message`` the same way.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

__all__ = ["Loc", "compose_documents", "describe_yaml_error", "locate"]

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
            after yielding the documents before the error.
    """
    try:
        documents = list(_compose(text, pure=False))
    except YAMLError:
        yield from _compose(text, pure=True)
        return
    yield from documents


def _compose(text: str, *, pure: bool) -> Iterator[tuple[Any, Node]]:
    yaml = YAML(typ="safe", pure=pure)
    for node in yaml.compose_all(text):
        if node is None or (isinstance(node, ScalarNode) and str(node.tag).endswith(":null")):
            continue
        yield yaml.constructor.construct_document(node), node


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
        path += (
            f"[{part}]" if in_seq and isinstance(part, int) else (f".{part}" if path else str(part))
        )
        found = _child(node, part) if node is not None else None
        if found is None:
            node = None
            continue
        line = found.start_mark.line
        node = found.value_node if isinstance(found, _KeyAt) else found
    return (line + 1 if line is not None else None), path or "(document)"


def describe_yaml_error(exc: YAMLError) -> tuple[int | None, str]:
    """``(1-based line or None, message)`` for a YAML syntax error."""
    if not isinstance(exc, MarkedYAMLError):
        return None, f"invalid YAML: {exc}"
    mark = exc.problem_mark or exc.context_mark
    message = f"invalid YAML: {exc.problem or exc.context}"
    if exc.problem and exc.context:
        context_line = f" at line {exc.context_mark.line + 1}" if exc.context_mark else ""
        message += f" ({exc.context}{context_line})"
    return (mark.line + 1 if mark else None), message
