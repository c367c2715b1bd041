"""Which files make up a manifest set: the one rule, shared by the loader and
by ``import`` (which must edit a file of the set)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from quotaform.errors import ManifestProblem

__all__ = ["MANIFEST_SUFFIXES", "find_manifest_files", "is_member"]

#: File suffixes picked up when a directory is given.
MANIFEST_SUFFIXES = (".yaml", ".yml")


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def find_manifest_files(paths: Sequence[str | Path], problems: list[ManifestProblem]) -> list[Path]:
    """Files to read, in order: given files as they are; directories expanded
    recursively to ``*.yaml`` / ``*.yml`` sorted by relative path, skipping
    hidden files and directories (editor droppings, ``.git``). A file reached
    twice is read once. A missing path or a directory without manifests
    becomes a problem in ``problems``."""
    found: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            members = sorted(
                (
                    p
                    for p in path.rglob("*")
                    if p.suffix in MANIFEST_SUFFIXES and p.is_file() and not _hidden(p, path)
                ),
                key=lambda p: p.relative_to(path).as_posix(),
            )
            if not members:
                problems.append(
                    ManifestProblem(str(path), None, "(file)", "no *.yaml or *.yml files found")
                )
        elif path.exists():
            members = [path]
        else:
            problems.append(ManifestProblem(str(path), None, "(file)", "no such file or directory"))
            continue
        for member in members:
            key = member.resolve()
            if key not in seen:
                seen.add(key)
                found.append(member)
    return found


def is_member(target: Path, paths: Sequence[str | Path]) -> bool:
    """Whether loading ``paths`` reads ``target`` (:func:`find_manifest_files`'s rules)."""
    resolved = target.resolve()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            try:
                relative = target.absolute().relative_to(path.absolute())
            except ValueError:
                continue
            if resolved.suffix in MANIFEST_SUFFIXES and not any(
                part.startswith(".") for part in relative.parts
            ):
                return True
        elif path.resolve() == resolved:
            return True
    return False
