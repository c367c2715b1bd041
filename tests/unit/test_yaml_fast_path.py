"""The fast YAML reader (libyaml events -> plain data, no node tree) against
the node-tree reader it replaces on the hot path: the same documents, the
same values, the same errors and the same line for every field, on the
examples, on hand-picked edge cases and on generated text."""

from __future__ import annotations

import io
import os
import sys
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import ruamel.yaml
import ruamel.yaml.main
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from ruamel.yaml.resolver import VersionedResolver

from quotaform.errors import ManifestError
from quotaform.inputs import yamlsource
from quotaform.inputs.yamlsource import (
    TESTED_RUAMEL,
    Loc,
    compose_documents,
    fast_path_supported,
    locate,
    read_documents,
)
from quotaform.manifest import load_manifests
from quotaform.manifest.documents import read_set
from tests.unit.builders import data_paths

ROOT = Path(__file__).resolve().parents[2]

EDGE_CASES = [
    "a: 1\nb: [1, 2.5, true, null, ~, '', x]\n"
    "c: {d: 0x1F, e: 1_000, f: 0o17, g: 017, h: 2026-01-01, i: .inf, j: -.5e3}\n",
    "---\n---\nk: ! 12\n",  # empty document, non-specific tag
    "- 1\n- two\n",
    "a: &x 1\nb: *x\n",  # anchor and alias: refused by the slow path
    "a: 1\na: 2\n",  # duplicate key
    "{ip: 2001:db8::10}\n",  # libyaml refuses; YAML 1.2 reads it
    "x: !!str 12\n",
    "? [a]\n: 1\n",  # a collection as a key
    "<<: {a: 1}\n",  # merge key
    "1: x\n",
    "null: 1\n",
    "'a': 1\n\"b\": 2\n",
    "a:\n  - b:\n    - c\n",
    "",
    "a: [1\n",  # syntax error
    "a: \x07\n",  # a control character
    "x: " + "9" * 5000 + "\n",  # an over-long integer stays text
    "%YAML 1.1\n---\na: yes\n",
    "a: 1\n...\n---\nb: 2\n",
    "spec:\n  quotas:\n    - entity: {user: a}\n      values: {producer_byte_rate: 1MiB}\n"
    "    -\n    - entity: {user: b}\n",
    "key with spaces: 'v'\n\"é\": ü\n",
]


def _outcome(reader: Any, text: str) -> tuple[str, Any]:
    try:
        return "ok", list(reader(text))
    except Exception as exc:  # the same exception, whatever it is
        return "error", (type(exc), str(exc))


def assert_same_reading(text: str) -> None:
    """read_documents(text) == compose_documents(text): values, errors, lines."""
    fast_kind, fast = _outcome(read_documents, text)
    slow_kind, slow = _outcome(compose_documents, text)
    assert fast_kind == slow_kind, (text, fast, slow)
    if fast_kind == "error":
        assert fast == slow
        return
    assert [plain for plain, _ in fast] == [plain for plain, _ in slow]
    for (plain, lines), (_, node) in zip(fast, slow, strict=True):
        extra: list[Loc] = [("spec", "nope"), ("spec", "quotas", 999), ("metadata", "x", "y")]
        for loc in [*data_paths(plain), *extra]:
            assert lines.locate(loc) == locate(node, loc), (text, loc)


@pytest.mark.parametrize("text", EDGE_CASES)
def test_edge_cases_read_the_same(text: str) -> None:
    assert_same_reading(text)


def test_every_example_and_fixture_reads_the_same() -> None:
    files = sorted({*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/**/*.yaml")})
    assert len(files) > 10
    for file in files:
        assert_same_reading(file.read_text(encoding="utf-8"))


_SCALARS = st.one_of(
    st.sampled_from(
        [
            "yes",
            "no",
            "on",
            "0o17",
            "017",
            "0x1f",
            "1_000",
            "1e3",
            ".inf",
            "~",
            "null",
            "",
            "2026-11-23",
            "12:30",
            "10MiB",
            "150%",
            "<default>",
            "a: b",
            "- x",
            "#",
            "*x",
            "&y",
        ]
    ),
    st.text(max_size=8),
    st.integers(),
    st.floats(allow_nan=False),
    st.booleans(),
    st.none(),
)
_DATA = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(min_size=1, max_size=6), inner, max_size=4),
    ),
    max_leaves=20,
)
_DAMAGE = st.sampled_from(
    ["", "&a ", "*a", "!!str ", "<<: ", "? ", "- ", ": ", "\t", "'", "{", "]"]
)


@settings(
    max_examples=int(os.environ.get("QUOTAFORM_YAML_EXAMPLES", "300")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    data=st.lists(_DATA, min_size=1, max_size=3),
    flow=st.booleans(),
    damage=_DAMAGE,
    where=st.floats(min_value=0, max_value=1),
)
def test_generated_text_reads_the_same(
    data: list[Any], flow: bool, damage: str, where: float
) -> None:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = flow
    out = io.StringIO()
    yaml.dump_all(data, out)
    text = out.getvalue()
    at = int(where * len(text))
    assert_same_reading(text[:at] + damage + text[at:])


def test_manifests_load_without_a_node_tree(tmp_path: Path) -> None:
    # The fast path is the one taken for ordinary manifests (the memory and
    # time figures of benchmarks/README.md depend on it), and a problem deep
    # inside an entry still names its line, found by composing on demand.
    problems: list[Any] = []
    docs = read_set([ROOT / "examples" / "manifests"], problems)
    assert docs and not problems
    assert all(doc.lines._node is None for doc in docs)
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\nspec:\n"
        "  scope: [{shape: user}]\n  quotas:\n"
        "    - entity: {user: a}\n      values: {producer_byte_rate: 1MiB}\n"
        "    - entity: {user: b}\n      values:\n        consumer_byte_rate: 1MiB\n"
        "        producer_byte_rate: lots\n",
        encoding="utf-8",
    )
    with pytest.raises(ManifestError) as caught:
        load_manifests([bad])
    (problem,) = caught.value.problems
    assert (problem.line, problem.field) == (12, "spec.quotas[1].values.producer_byte_rate")


# ----------------------------------------------------------------- the guard


def test_the_pinned_ruamel_yaml_is_the_tested_one() -> None:
    low, high = TESTED_RUAMEL
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    pinned = [d for d in project["dependencies"] if d.startswith("ruamel.yaml>")]
    assert pinned == [f"ruamel.yaml>={'.'.join(map(str, low))},<{'.'.join(map(str, high))}"]
    assert low <= tuple(ruamel.yaml.version_info[:3]) < high  # this environment
    assert fast_path_supported() and yamlsource._FAST_PATH


@pytest.mark.parametrize("version", [(0, 18, 16), (0, 19, 0), (0, 20, 0), (1, 0, 0)])
def test_an_untested_ruamel_yaml_turns_the_fast_path_off(
    monkeypatch: pytest.MonkeyPatch, version: tuple[int, ...]
) -> None:
    monkeypatch.setattr(ruamel.yaml, "version_info", version)
    assert not fast_path_supported()


def _no_libyaml(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ruamel.yaml.main, "CParser", None)  # ruamel.yaml.clib not installed


def _no_versioned_table(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(VersionedResolver, "versioned_resolver")


def _no_constructor_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delattr(YAML, "get_constructor_parser")


def _no_tag_module(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ruamel.yaml.tag", None)  # import raises ImportError


@pytest.mark.parametrize(
    "remove", [_no_libyaml, _no_versioned_table, _no_constructor_parser, _no_tag_module]
)
def test_missing_internals_turn_the_fast_path_off(
    monkeypatch: pytest.MonkeyPatch, remove: Callable[[pytest.MonkeyPatch], None]
) -> None:
    remove(monkeypatch)
    assert not fast_path_supported()


def _reading(text: str) -> tuple[str, Any]:
    """Everything a reader of ``text`` gets: values and the line of every
    field, or the error (its type and message)."""
    kind, documents = _outcome(read_documents, text)
    if kind == "error":
        return kind, documents
    extra: list[Loc] = [("spec", "nope"), ("spec", "quotas", 999), ("metadata", "x", "y")]
    return kind, [
        (plain, [lines.locate(loc) for loc in [*data_paths(plain), *extra]])
        for plain, lines in documents
    ]


def _load_problems(path: Path) -> str:
    with pytest.raises(ManifestError) as caught:
        load_manifests([path])
    return str(caught.value)


def test_without_the_fast_path_ruamel_reads_the_same_only_slower(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    files = sorted({*ROOT.glob("examples/**/*.yaml"), *ROOT.glob("tests/**/*.yaml")})
    texts = [*EDGE_CASES, *(f.read_text(encoding="utf-8") for f in files)]
    # A %YAML 1.1 directive is the one difference: libyaml's path reads 1.2
    # whatever the directive says, ruamel's own parser follows it.
    texts = [t for t in texts if not t.startswith("%YAML 1.1")]
    bad = sorted((ROOT / "tests" / "unit" / "fixtures" / "manifests" / "bad").rglob("*.yaml"))
    fast = [_reading(t) for t in texts]
    fast_problems = [_load_problems(path) for path in bad]

    def no_fast_reader(text: str) -> Any:
        raise AssertionError("the fast path ran")

    composed: list[bool] = []
    compose = yamlsource._compose

    def pure_only(text: str, *, pure: bool) -> Any:
        composed.append(pure)
        return compose(text, pure=pure)

    monkeypatch.setattr(yamlsource, "_FAST_PATH", False)
    monkeypatch.setattr(yamlsource, "_read_fast", no_fast_reader)
    monkeypatch.setattr(yamlsource, "_compose", pure_only)
    assert [_reading(t) for t in texts] == fast
    assert [_load_problems(path) for path in bad] == fast_problems
    assert composed and all(composed)  # ruamel's pure-Python parser, never libyaml


def test_without_the_fast_path_a_yaml_1_1_directive_is_followed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = "%YAML 1.1\n---\na: yes\n"
    assert [plain for plain, _ in read_documents(text)] == [{"a": "yes"}]
    monkeypatch.setattr(yamlsource, "_FAST_PATH", False)
    assert [plain for plain, _ in read_documents(text)] == [{"a": True}]
