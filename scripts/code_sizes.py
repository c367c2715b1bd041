"""Function and module sizes of a source tree, for the rules of
docs/architecture.md: no function over 100 lines (over 80 only with a reason
in its docstring), no module over 800 lines.

    python scripts/code_sizes.py [ROOT] [--functions-over N] [--modules-over N]

A function's length is its ``def`` line to its last line, decorators left
out, nested functions counted in their parent (as a reader meets them).
"""

from __future__ import annotations

import argparse
import ast
from pathlib import Path

#: How a docstring gives the reason a function is over 80 lines.
REASON = "Over 80 lines"


def function_facts(root: Path) -> list[tuple[int, str, bool]]:
    """``(lines, "path:qualified.name", reasoned)`` of every function and
    method, longest first; ``reasoned``: its docstring says why it is long
    (:data:`REASON`, words wrapped or not)."""
    out: list[tuple[int, str, bool]] = []
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))

        def visit(node: ast.AST, prefix: str, path: Path = path) -> None:
            for child in ast.iter_child_nodes(node):
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    assert child.end_lineno is not None
                    size = child.end_lineno - child.lineno + 1
                    doc = " ".join((ast.get_docstring(child) or "").split())
                    out.append((size, f"{path}:{prefix}{child.name}", REASON in doc))
                elif isinstance(child, ast.ClassDef):
                    visit(child, f"{prefix}{child.name}.")

        visit(tree, "")
    return sorted(out, reverse=True)


def module_sizes(root: Path) -> list[tuple[int, str]]:
    """``(lines, path)`` of every module."""
    sizes = [(len(p.read_text(encoding="utf-8").splitlines()), str(p)) for p in root.rglob("*.py")]
    return sorted(sizes, reverse=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path("quotaform"))
    parser.add_argument("--functions-over", type=int, default=80)
    parser.add_argument("--modules-over", type=int, default=800)
    args = parser.parse_args()
    functions = function_facts(args.root)
    long = [(n, f, why) for n, f, why in functions if n > args.functions_over]
    over_100 = sum(1 for n, _, _ in functions if n > 100)
    over_120 = sum(1 for n, _, _ in functions if n > 120)
    unreasoned = sum(1 for _, _, why in long if not why)
    print(
        f"functions over {args.functions_over} lines: {len(long)} "
        f"(over 100: {over_100}, over 120: {over_120}; without a reason: {unreasoned})"
    )
    for n, name, why in long:
        print(f"  {n:5d}  {name}{'' if why else '  (no reason in its docstring)'}")
    big = [(n, m) for n, m in module_sizes(args.root) if n > args.modules_over]
    print(f"modules over {args.modules_over} lines: {len(big)}")
    for n, name in big:
        print(f"  {n:5d}  {name}")


if __name__ == "__main__":
    main()
