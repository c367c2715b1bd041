"""Tests share helpers through one helpers module per tier
(tests/unit/builders.py, tests/integration/helpers.py) and fixtures through
pytest, never by importing another test module or a conftest: a test
module's helpers are its own. (The integration tests' manifest builder:
tests/integration/test_manifest_builder.py.)"""

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


def test_fixtures_come_through_pytest_not_imports() -> None:
    found = [
        f"{path.relative_to(TESTS)}: {module}"
        for path in sorted(TESTS.rglob("*.py"))
        for module in _imported_modules(path)
        if module.rpartition(".")[2] == "conftest"
    ]
    assert found == []


def test_unit_tests_use_no_helpers_of_another_tier() -> None:
    found = [
        f"{path.relative_to(TESTS)}: {module}"
        for path in sorted((TESTS / "unit").rglob("*.py"))
        for module in _imported_modules(path)
        if module.startswith(("tests.integration", "tests.spark"))
    ]
    assert found == []
