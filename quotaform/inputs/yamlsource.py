"""YAML sources with line numbers: read documents as plain data plus their node
trees, and locate a field path in a node tree.

Every YAML quotaform reads comes through here (manifests, the cluster
profiles file, Prometheus' HTTP client configuration), so all report
problems as ``path:line: field: message`` the same way. The text itself is
read by :mod:`quotaform.inputs.files` (size, UTF-8, NUL).

Hostile input stays bounded: aliases (``*name``) are refused, since manifests
never need them and a few nested ones expand into billions of nodes; nesting
deeper than :data:`~quotaform.inputs.limits.MAX_DEPTH` is refused by counting
the parser's events (:class:`DepthRefused`) before anything recursive sees
it (ruamel's composer and constructor recurse per level, and a 100,000-deep
value took 22 GB); integers too long to be a quota value are kept as their
text, for the value parser to refuse with its field path (Python refuses to
convert more than 4,300 digits).

The fast path (libyaml's events straight to plain data, :func:`read_documents`)
and libyaml's composer (:func:`compose_documents`) use ruamel.yaml internals,
so they run only on the ruamel.yaml releases they are tested with
(:data:`TESTED_RUAMEL`, pinned alike in pyproject.toml) that still have those
internals (:func:`fast_path_supported`); on any other, ruamel's own pure-Python
reader reads everything: the same documents, values, lines and messages
(a ``%YAML 1.1`` directive aside: :func:`compose_documents`), only slower.
"""

from __future__ import annotations

import gc
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from sys import intern
from typing import TYPE_CHECKING, Any

import ruamel.yaml
from ruamel.yaml import YAML
from ruamel.yaml.composer import ReusedAnchorWarning
from ruamel.yaml.constructor import SafeConstructor
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.events import (
    AliasEvent,
    DocumentEndEvent,
    DocumentStartEvent,
    MappingEndEvent,
    MappingStartEvent,
    ScalarEvent,
    SequenceEndEvent,
    SequenceStartEvent,
    StreamEndEvent,
    StreamStartEvent,
)
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode
from ruamel.yaml.reader import ReaderError
from ruamel.yaml.resolver import VersionedResolver

from quotaform.inputs.limits import MAX_DEPTH, MAX_KEYS
from quotaform.kafka.entity import escape_unprintable

if TYPE_CHECKING:
    from ruamel.yaml.tag import Tag

__all__ = [
    "MAX_NUMBER_DIGITS",
    "TESTED_RUAMEL",
    "AliasRefused",
    "DepthRefused",
    "KeysRefused",
    "Lines",
    "Loc",
    "check_structure",
    "compose_documents",
    "describe_yaml_error",
    "fast_path_supported",
    "gc_paused",
    "locate",
    "read_documents",
]

#: Longer integers are not converted (no quota value has more digits).
MAX_NUMBER_DIGITS = 400

#: ``(lowest, first not)`` ruamel.yaml version the fast path is tested with;
#: pyproject.toml pins the same range.
TESTED_RUAMEL = ((0, 19, 1), (0, 20))


def fast_path_supported() -> bool:
    """Whether the installed ruamel.yaml is one the fast path is tested with
    (:data:`TESTED_RUAMEL`) and has the internals it uses: libyaml's parser
    (ruamel.yaml.clib) with its event calls, the resolver's per-version
    table of implicit tags and its lazy patterns, tags built from a suffix,
    the safe constructor's table, and :meth:`YAML.get_constructor_parser`."""
    version = tuple(getattr(ruamel.yaml, "version_info", ())[:3])
    low, high = TESTED_RUAMEL
    if not low <= version < high:
        return False
    try:
        from ruamel.yaml.main import CParser
        from ruamel.yaml.tag import Tag
        from ruamel.yaml.util import LazyEval

        tag = Tag(suffix="tag:yaml.org,2002:str")
        lazy = LazyEval(str, "tag:yaml.org,2002:str").lazy_self()
    except (ImportError, TypeError, AttributeError):
        return False
    return (
        CParser is not None
        and all(callable(getattr(CParser, name, None)) for name in ("get_event", "dispose"))
        and callable(getattr(YAML, "get_constructor_parser", None))
        and isinstance(getattr(VersionedResolver, "versioned_resolver", None), property)
        and all(
            hasattr(VersionedResolver, f"DEFAULT_{kind}_TAG")
            for kind in ("SCALAR", "SEQUENCE", "MAPPING")
        )
        and isinstance(getattr(SafeConstructor, "yaml_constructors", None), dict)
        and tag.suffix == lazy == "tag:yaml.org,2002:str"
    )


#: Decided once per process (:func:`fast_path_supported`).
_FAST_PATH = fast_path_supported()


class AliasRefused(YAMLError):
    """The text uses a YAML alias; ``line`` is 1-based."""

    def __init__(self, line: int, name: str) -> None:
        super().__init__(f"alias *{name}")
        self.line = line
        self.name = name


class DepthRefused(YAMLError):
    """The text nests mappings and sequences deeper than ``limit``; ``line``
    (1-based) is where the first collection past the limit opens. Found by
    counting the parser's events, before anything is composed or constructed
    (ruamel's composer and constructor recurse per level)."""

    def __init__(self, line: int, limit: int) -> None:
        super().__init__(f"nested more than {limit} deep")
        self.line = line
        self.limit = limit


class KeysRefused(YAMLError):
    """A mapping of the text holds more than ``limit`` keys; ``line``
    (1-based) is where the first key past the limit is written."""

    def __init__(self, line: int, limit: int) -> None:
        super().__init__(f"a mapping of more than {limit} keys")
        self.line = line
        self.limit = limit


class _Constructor(SafeConstructor):
    """The safe constructor, keeping over-long integers as their text."""

    def construct_yaml_int(self, node: Any) -> Any:
        text = str(node.value)
        if len(text) > MAX_NUMBER_DIGITS:
            return text
        return super().construct_yaml_int(node)


_Constructor.add_constructor("tag:yaml.org,2002:int", _Constructor.construct_yaml_int)


class _CResolver(VersionedResolver):
    """ruamel's YAML 1.2 resolver for libyaml's composer, without its per-scalar
    overhead: its implicit-resolver table (the same rules, read from ruamel)
    is fetched once instead of once per scalar (ruamel looks for the
    document's ``%YAML`` version each time, which the C composer never sets,
    through an ``AttributeError``), and each tag is one shared
    :class:`~ruamel.yaml.tag.Tag`, so :func:`_fast_plain` recognises the
    common tags by identity (:func:`read_documents`). Path resolvers (unused
    by the safe loader) are not supported."""

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if kind is ScalarNode and implicit[0]:
            table = _C_TABLE or self._table()
            for tag, match in table.get(value[:1], table[None]):
                if match(value):
                    return tag
        if kind is ScalarNode:
            return self.DEFAULT_SCALAR_TAG
        if kind is SequenceNode:
            return self.DEFAULT_SEQUENCE_TAG
        return self.DEFAULT_MAPPING_TAG

    def _table(self) -> dict[str | None, tuple[tuple[Tag, Any], ...]]:
        """First character -> ``(tag, regexp match)`` in ruamel's order (the
        resolvers of any first character appended); ``None``: any other."""
        from ruamel.yaml.tag import Tag
        from ruamel.yaml.util import LazyEval

        rules = self.versioned_resolver
        anywhere = [(t, r) for t, r in rules.get(None, ())]

        def compiled(tag: str, regexp: Any) -> tuple[Tag, Any]:
            pattern = regexp.lazy_self() if isinstance(regexp, LazyEval) else regexp
            return _TAGS.setdefault(tag, Tag(suffix=tag)), pattern.match

        for first, pairs in rules.items():
            if first is not None:
                _C_TABLE[first] = tuple(compiled(t, r) for t, r in (*pairs, *anywhere))
        _C_TABLE[None] = tuple(compiled(t, r) for t, r in anywhere)
        return _C_TABLE


#: One Tag per implicitly resolved tag name (int, float, bool, null, ...).
_TAGS: dict[str, Tag] = {}
#: :meth:`_CResolver._table`, filled on first use (YAML 1.2: the C composer
#: always resolves as 1.2).
_C_TABLE: dict[str | None, tuple[tuple[Tag, Any], ...]] = {}


def check_structure(text: str, *, max_depth: int = MAX_DEPTH) -> None:
    """Refuse ``text`` before another YAML loader (ruamel's round-trip
    loader, which recurses per level) reads it: the checks of
    :func:`compose_documents`.

    Raises:
        AliasRefused, DepthRefused: as :func:`compose_documents`.
    """
    _prescan(text, max_depth)


def _prescan(text: str, max_depth: int) -> None:
    """Raise :class:`AliasRefused` at the first alias and :class:`DepthRefused`
    where the nesting passes ``max_depth``, before a syntax error; syntax
    errors are left to the composer to report. The events come from libyaml
    where the fast path may use it; if libyaml stops early (it reads YAML
    1.1, which refuses some YAML 1.2), ruamel's own parser scans again: its
    verdict is the one that stands. Both parsers keep their state in lists,
    never on the call stack."""
    if _scan_events(text, max_depth, pure=not _FAST_PATH) and _FAST_PATH:
        _scan_events(text, max_depth, pure=True)


def _scan_events(text: str, max_depth: int, *, pure: bool) -> bool:
    """One event scan (:func:`_prescan`); whether the parser stopped at a
    syntax error."""
    # Per open collection: the nodes a mapping has held so far (keys and
    # values), None for a sequence.
    open_: list[int | None] = []
    try:
        for event in YAML(typ="safe", pure=pure).parse(text):
            kind = type(event)
            if kind is MappingEndEvent or kind is SequenceEndEvent:
                open_.pop()
                continue
            if kind is AliasEvent:
                raise AliasRefused(event.start_mark.line + 1, str(event.anchor))
            if kind is not ScalarEvent and kind is not MappingStartEvent and (
                kind is not SequenceStartEvent
            ):
                continue
            if open_ and open_[-1] is not None:
                open_[-1] += 1
                if open_[-1] > 2 * MAX_KEYS:
                    raise KeysRefused(event.start_mark.line + 1, MAX_KEYS)
            if kind is not ScalarEvent:
                if len(open_) >= max_depth:
                    raise DepthRefused(event.start_mark.line + 1, max_depth)
                open_.append(0 if kind is MappingStartEvent else None)
    except (AliasRefused, DepthRefused, KeysRefused):
        raise
    except YAMLError:
        return True
    return False


Loc = tuple[int | str, ...]
"""A field path: mapping keys and sequence indexes, as pydantic's ``loc``."""


def compose_documents(text: str, *, max_depth: int = MAX_DEPTH) -> Iterator[tuple[Any, Node]]:
    """``(plain data, node)`` of each non-empty YAML document in ``text``.

    The node tree's marks give line numbers; ruamel's safe constructor turns
    the same nodes into plain Python (YAML 1.2 types, duplicate keys refused).
    libyaml (ruamel.yaml.clib) composes first because it is about seven times
    faster (benchmarks/README.md); it is a YAML 1.1 parser, though, and refuses
    some valid YAML 1.2 (``{ip: 2001:db8::10}``), so on any error the text is
    read again with ruamel's own YAML 1.2 parser, whose verdict (and message)
    stands. On a ruamel.yaml the libyaml path is not tested with
    (:func:`fast_path_supported`), ruamel's parser reads every text; it
    follows a ``%YAML 1.1`` directive, which the libyaml path reads as 1.2.

    Raises:
        YAMLError: from ruamel's parser (see :func:`describe_yaml_error`),
            after yielding the documents before the error; :class:`AliasRefused`
            before any document when the text uses an alias,
            :class:`DepthRefused` when it nests deeper than ``max_depth``.
    """
    _prescan(text, max_depth)
    documents, error = _compose(text, pure=not _FAST_PATH)
    if error is not None and _FAST_PATH:
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
    if not pure:
        yaml.Resolver = _CResolver
    documents: list[tuple[Any, Node]] = []
    with warnings.catch_warnings(), gc_paused():
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
    if isinstance(exc, KeysRefused):
        return exc.line, (
            f"a mapping of more than {exc.limit:,} keys (the limit for YAML quotaform "
            "reads): refused"
        )
    if isinstance(exc, DepthRefused):
        return exc.line, (
            f"nested too deeply: mappings and lists more than {exc.limit} levels deep "
            "(the limit for YAML quotaform reads): refused"
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


# ------------------------------------------------------- the fast path


class _Composed:
    """A text's node trees, composed once when a document of it first needs
    a line the fast path did not keep (every document of the text shares it)."""

    def __init__(self, text: str) -> None:
        self._text: str | None = text
        self._nodes: list[Node] | None = None

    def nodes(self) -> list[Node]:
        if self._nodes is None:
            assert self._text is not None
            self._nodes = [node for _, node in compose_documents(self._text)]
            self._text = None
        return self._nodes


class Lines:
    """Line numbers of one document read by :func:`read_documents`.

    The fast path keeps only the lines every load needs (the document's
    top-level and second-level keys, and each item of a second-level
    sequence such as ``spec.quotas``): reading 100,000 entries with their
    node trees took 5.6 s and 600 MiB, without them 1.9 s and 133 MiB
    (peak RSS of the whole process). Any other
    location (a problem deep inside an entry) is found by composing the text
    again with node marks, once per text, when first asked."""

    def __init__(
        self,
        source: _Composed | None,
        index: int,
        keys: dict[Loc, int] | None = None,
        items: dict[Loc, list[int]] | None = None,
        node: Node | None = None,
    ) -> None:
        self._source = source  # the text's node trees, shared by its documents
        self._index = index  # the document's position among the non-empty ones
        self._keys = keys or {}
        self._items = items or {}
        self._node = node

    @classmethod
    def of_node(cls, node: Node) -> Lines:
        """Lines read from an already composed node tree."""
        return cls(None, 0, node=node)

    @property
    def node(self) -> Node:
        """The document's node tree (composed on first use)."""
        if self._node is None:
            assert self._source is not None
            self._node = self._source.nodes()[self._index]
        return self._node

    def locate(self, loc: Loc) -> tuple[int | None, str]:
        """``(1-based line, field path)`` of ``loc`` (:func:`locate`)."""
        if self._node is None:
            line = self._keys.get(loc)
            if line is None and loc and isinstance(loc[-1], int):
                items = self._items.get(loc[:-1])
                if items is not None and 0 <= loc[-1] < len(items):
                    line = items[loc[-1]]
            if line is not None:
                return line + 1, _path_text(loc)
        return locate(self.node, loc)


def _path_text(loc: Loc) -> str:
    """The field path of ``loc`` as :func:`locate` writes it, for locations
    whose integer parts are all sequence indexes (those :class:`Lines` keeps)."""
    path = ""
    for part in loc:
        if isinstance(part, int):
            path += f"[{part}]"
        else:
            shown = escape_unprintable(part)
            path += f".{shown}" if path else shown
    return path or "(document)"


class _Slow(Exception):
    """The fast reader met something it leaves to :func:`compose_documents`."""


def read_documents(text: str, *, max_depth: int = MAX_DEPTH) -> Iterator[tuple[Any, Lines]]:
    """``(plain data, lines)`` of each non-empty YAML document in ``text``:
    the same documents, values and errors as :func:`compose_documents`.

    The fast path builds plain data straight from libyaml's event stream
    (no node tree), with ruamel's YAML 1.2 resolver table and ruamel's
    constructor for every non-string scalar, with Python's cyclic garbage
    collector paused (its collections over the growing data made reading
    100,000 entries about twice as slow). Anything beyond plain
    mappings of string keys, sequences and untagged scalars (tags, anchors,
    aliases, merge keys, duplicate or non-string keys) and any parse error
    sends the whole text to :func:`compose_documents`, whose verdict and
    messages stand.

    The fast path is taken only where :func:`fast_path_supported`. Its
    depth bound is checked as it reads (a :class:`DepthRefused` stands: the
    slower readers would refuse the same text).

    Raises:
        YAMLError: as :func:`compose_documents`.
    """
    fast = None
    if _FAST_PATH:
        try:
            with gc_paused():
                fast = _read_fast(text, max_depth)
        except (DepthRefused, KeysRefused):
            raise
        except (_Slow, YAMLError):
            fast = None
    if fast is not None:
        yield from fast
        return
    for plain, node in compose_documents(text, max_depth=max_depth):
        yield plain, Lines.of_node(node)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector within the block (reference
    counting still frees everything that is not a cycle); nests."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _read_fast(text: str, max_depth: int) -> list[tuple[Any, Lines]]:
    """libyaml's events into data and line numbers in one loop. (Over 80
    lines: the loop is the manifests' hot path, its state kept in locals
    rather than spread over calls.)"""
    yaml = YAML(typ="safe", pure=False)
    yaml.Constructor, yaml.Resolver = _Constructor, _CResolver
    table = _C_TABLE or yaml.resolver._table()
    constructor = yaml.constructor
    constructors = constructor.yaml_constructors
    anywhere = table[None]
    documents: list[tuple[Any, Lines]] = []
    source = _Composed(text)
    # Each open container: [container, its loc, pending key (mappings), key line]
    stack: list[list[Any]] = []
    keys: dict[Loc, int] = {}
    items: dict[Loc, list[int]] = {}
    root: Any = _NOTHING
    # ruamel's YAML.parse() wraps each event in two more Python calls; the
    # parser's own get_event is called directly (a third of the read time).
    _, parser = yaml.get_constructor_parser(text)
    get_event = parser.get_event
    try:
        while True:
            event = get_event()
            kind = type(event)
            if kind is ScalarEvent:
                if event.anchor is not None or event.tag is not None:
                    raise _Slow
                value = event.value
                if event.implicit[0]:
                    for tag, match in table.get(value[:1], anywhere):
                        if match(value):
                            construct = constructors.get(tag.suffix)
                            if construct is None:
                                raise _Slow  # a merge key (<<)
                            value = construct(
                                constructor,
                                ScalarNode(tag, value, event.start_mark, event.end_mark),
                            )
                            break
                line = event.start_mark.line
                if not stack:
                    root = value
                    keys[()] = line
                    continue
                top = stack[-1]
                container = top[0]
                if type(container) is dict and top[2] is _NOTHING:
                    if type(value) is not str or value in container:
                        raise _Slow  # a non-string or repeated key: ruamel decides
                    if len(container) >= MAX_KEYS:
                        raise KeysRefused(line + 1, MAX_KEYS)
                    top[2], top[3] = intern(value), line  # one string per distinct key
                    continue
                _add(top, value, line, keys, items)
            elif kind is MappingStartEvent or kind is SequenceStartEvent:
                if event.anchor is not None or event.tag is not None:
                    raise _Slow
                new: Any = {} if kind is MappingStartEvent else []
                line = event.start_mark.line
                if stack:
                    top = stack[-1]
                    if type(top[0]) is dict and top[2] is _NOTHING:
                        raise _Slow  # a collection as a key
                    loc = (*top[1], top[2] if type(top[0]) is dict else len(top[0]))
                    _add(top, new, line, keys, items)
                else:
                    root, loc = new, ()
                    keys[()] = line
                if kind is SequenceStartEvent and len(loc) <= 2:
                    items[loc] = []
                if len(stack) >= max_depth:
                    raise DepthRefused(line + 1, max_depth)
                stack.append([new, loc, _NOTHING, 0])
            elif kind is MappingEndEvent or kind is SequenceEndEvent:
                stack.pop()
            elif kind is DocumentStartEvent:
                root, keys, items = _NOTHING, {}, {}
            elif kind is DocumentEndEvent:
                if root is not _NOTHING and root is not None:
                    documents.append((root, Lines(source, len(documents), keys, items)))
            elif kind is StreamEndEvent:
                break
            elif kind is not StreamStartEvent:
                raise _Slow  # an alias
    finally:
        parser.dispose()
    return documents


_NOTHING: Any = object()


def _add(
    top: list[Any], value: Any, line: int, keys: dict[Loc, int], items: dict[Loc, list[int]]
) -> None:
    """Put ``value`` (written at 0-based ``line``) into the open container ``top``,
    recording the lines :class:`Lines` keeps."""
    container, loc = top[0], top[1]
    if type(container) is dict:
        key = top[2]
        container[key] = value
        if len(loc) <= 1:
            keys[(*loc, key)] = top[3]
        top[2] = _NOTHING
    else:
        lines = items.get(loc)
        if lines is not None:
            lines.append(line)
        container.append(value)
