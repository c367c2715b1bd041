"""Property test of the manifest loader under generated, mutated and damaged input.

Every case must end in a loaded state or in a :class:`ManifestError` whose
every problem names the file (and a line or a field); never another
exception, never unbounded time or memory. Hypothesis generates valid
manifests, mutates their structure (wrong types, unknown fields, hostile
strings, huge numbers, removed fields) and damages their text (inserted,
deleted and replaced characters, YAML syntax, aliases, control characters,
truncation).

``QUOTAFORM_FUZZ_EXAMPLES`` sets the number of cases (CI runs the default;
``scripts/fuzz-manifests`` runs a long series and prints the statistics).
"""

from __future__ import annotations

import json
import os
import time
import tracemalloc
from collections.abc import Iterator
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from ruamel.yaml import YAML
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.errors import ManifestError
from quotaform.kafka.entity import SHAPE_NAMES
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.manifest import load_manifests

#: 500 cases per property in CI (about 25 s for both on 2 cores); scripts/fuzz-manifests runs
#: the long series.
EXAMPLES = int(os.environ.get("QUOTAFORM_FUZZ_EXAMPLES", "500"))
#: Where to write the figures of a run (cases, slowest case, peak memory), if set.
REPORT = os.environ.get("QUOTAFORM_FUZZ_REPORT")
STATS: dict[str, Any] = {"cases": 0, "loaded": 0, "refused": 0, "slowest_s": 0.0, "peak_bytes": 0}
#: Hang and blow-up guards per case, not performance targets.
SECONDS_PER_CASE = 2.0
BYTES_PER_CASE = 64 * 1024 * 1024

_NAMES = st.one_of(
    st.sampled_from(["svc-a", "svc-b", "ANONYMOUS", "<default>", "a b", "ü-é", "x*y", "[/]"]),
    st.text(min_size=1, max_size=12),
)
_IPS = st.sampled_from(["192.0.2.10", "198.51.100.7", "2001:db8::1", "::ffff:192.0.2.1"])
_VALUES = st.one_of(
    st.integers(min_value=1, max_value=2**40),
    st.floats(min_value=0.1, max_value=1e6, allow_nan=False),
    st.sampled_from(["10MiB", "1.5MB", "150%", "512KiB/s", " 2 ", "1e3", "0", "-5", "NaN"]),
)
_HOSTILE = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.just("9" * 5000),
    st.just("[red]x[/red]"),
    st.just("\x1b[31m\u202e"),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
    st.text(max_size=30),
)


@st.composite
def _entity(draw: st.DrawFn) -> dict[str, Any]:
    shape = draw(st.sampled_from(list(SHAPE_NAMES.values())))
    part = {"user": _NAMES, "client-id": _NAMES, "ip": _IPS}
    return {t: {"default": True} if draw(st.booleans()) else draw(part[t]) for t in shape}


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    """A manifest document as plain data, valid as generated."""
    quotas = []
    for _ in range(draw(st.integers(0, 6))):
        entity = draw(_entity())
        types = set(entity)
        keys = [k for k, s in QUOTA_KEYS.items() if types <= s.entity_types]
        chosen = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=3, unique=True))
        quotas.append({"entity": entity, "values": {k: draw(_VALUES) for k in chosen}})
    return {
        "apiVersion": "quotaform.io/v1",
        "kind": "ClientQuotas",
        "metadata": {"cluster": draw(st.sampled_from(["c", "prod-eu"]))},
        "spec": {
            "scope": [{"shape": s} for s in SHAPE_NAMES],
            "allowDeletes": draw(st.booleans()),
            "quotas": quotas,
        },
    }


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(node, dict):
        for k, v in node.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            found += _paths(v, (*prefix, i))
    return found


@st.composite
def mutated(draw: st.DrawFn) -> dict[str, Any]:
    """A generated manifest with a few subtrees replaced, removed or added to."""
    doc = draw(manifests())
    for _ in range(draw(st.integers(0, 3))):
        path = draw(st.sampled_from(_paths(doc)))
        if not path:
            continue
        parent = doc
        for part in path[:-1]:
            parent = parent[part]
        action = draw(st.sampled_from(["replace", "remove", "add"]))
        if action == "replace":
            parent[path[-1]] = draw(_HOSTILE)
        elif action == "remove" and isinstance(parent, dict):
            del parent[path[-1]]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(_HOSTILE)
    return doc


def _dump(doc: Any) -> str:
    out = StringIO()
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = None
    yaml.dump(doc, out)
    return out.getvalue()


_DAMAGE = st.sampled_from(
    [
        "\x00",
        "\x1b",
        "*",
        "&a ",
        "*a",
        "[",
        "]",
        "{",
        "}",
        ":",
        "- ",
        "\n",
        "\t",
        "'",
        '"',
        "#",
        "%YAML 1.1\n",
        "---\n",
        "!!python/object ",
        "<<: ",
        "\u202e",
        "9" * 400,
    ]
)


@st.composite
def damaged(draw: st.DrawFn) -> str:
    """The text of a mutated manifest with characters inserted, deleted or
    replaced, or cut short."""
    text = _dump(draw(mutated()))
    for _ in range(draw(st.integers(0, 4))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["insert", "delete", "replace", "truncate"]))
        if action == "insert":
            text = text[:at] + draw(_DAMAGE) + text[at:]
        elif action == "delete":
            text = text[:at] + text[at + draw(st.integers(1, 20)) :]
        elif action == "replace":
            text = text[:at] + draw(_DAMAGE) + text[at + 1 :]
        else:
            text = text[:at]
    return text


def _check_case(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    tracemalloc.start()
    start = time.perf_counter()
    STATS["cases"] += 1
    try:
        load_manifests([path])
        STATS["loaded"] += 1
    except ManifestError as exc:
        STATS["refused"] += 1
        assert exc.problems, "an error lists its problems"
        for problem in exc.problems:
            assert problem.path == str(path), problem
            assert problem.line is not None or problem.field, problem
            assert "\n" not in problem.message, problem
    finally:
        elapsed = time.perf_counter() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    STATS["slowest_s"] = max(STATS["slowest_s"], elapsed)
    STATS["peak_bytes"] = max(STATS["peak_bytes"], peak)
    assert elapsed < SECONDS_PER_CASE, f"{elapsed:.2f} s"
    assert peak < BYTES_PER_CASE, f"{peak} bytes"


@pytest.fixture(scope="module", autouse=True)
def _report() -> Iterator[None]:
    yield
    if REPORT:
        Path(REPORT).write_text(json.dumps(STATS, indent=2) + "\n", encoding="utf-8")


_SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,  # the per-case bound above is the guard
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(text=damaged())
def test_damaged_manifests_load_or_fail_cleanly(tmp_path: Path, text: str) -> None:
    _check_case(tmp_path, text)


@_SETTINGS
@given(doc=mutated())
def test_mutated_manifests_load_or_fail_cleanly(tmp_path: Path, doc: dict[str, Any]) -> None:
    _check_case(tmp_path, _dump(doc))


@settings(
    max_examples=max(EXAMPLES // 10, 50),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(text=damaged())
def test_the_cli_never_shows_a_traceback(tmp_path: Path, text: str) -> None:
    path = tmp_path / "fuzz.yaml"
    path.write_text(text, encoding="utf-8")
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code in (0, 1), result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert "\x1b" not in result.output and "\x00" not in result.output
