"""Tests share helpers through helper modules (tests/unit/builders.py,
tests/integration/helpers.py, the conftest files), never by importing
another test module: a test module's helpers are its own."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
        elif isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
    return names


def test_no_test_module_imports_another() -> None:
    found = [
        f"{path.relative_to(TESTS)}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in _imported_modules(path)
        if module.rpartition(".")[2].startswith("test_")
    ]
    assert found == []
