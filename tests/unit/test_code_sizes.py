"""The size rules of docs/architecture.md (issue 34), held by
``scripts/code_sizes.py`` over ``quotaform/``: no function over 100 lines,
none over 80 without the reason in its docstring ("Over 80 lines: ..."),
no module over 800 lines."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("code_sizes", ROOT / "scripts" / "code_sizes.py")
assert _spec is not None and _spec.loader is not None
code_sizes = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(code_sizes)


def test_no_function_over_100_lines_and_none_over_80_without_a_reason() -> None:
    functions = code_sizes.function_facts(ROOT / "quotaform")
    assert len(functions) > 1000  # the whole package was read
    assert [(n, f) for n, f, _ in functions if n > 100] == []
    assert [(n, f) for n, f, why in functions if n > 80 and not why] == []


def test_no_module_over_800_lines() -> None:
    modules = code_sizes.module_sizes(ROOT / "quotaform")
    assert len(modules) > 150
    assert [(n, m) for n, m in modules if n > 800] == []


def test_a_long_function_without_its_reason_is_found(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(85))
    (tmp_path / "m.py").write_text(
        f'def long():\n    """No reason."""\n{body}\n\n'
        f'def explained():\n    """Why: (Over 80\n    lines: a table.)"""\n{body}\n',
        encoding="utf-8",
    )
    facts = {name.split(":")[-1]: (n, why) for n, name, why in code_sizes.function_facts(tmp_path)}
    assert facts == {"long": (87, False), "explained": (88, True)}
