"""Which files make up a manifest set: the one rule, shared by the loader and
by ``import`` (which must edit a file of the set)."""

from __future__ import annotations

import errno
import logging
from collections.abc import Sequence
from pathlib import Path

from quotaform.errors import ManifestProblem
from quotaform.inputs.files import special_kind

_log = logging.getLogger(__name__)

__all__ = [
    "MANIFEST_SUFFIXES",
    "PROFILES_FILE",
    "find_manifest_files",
    "is_member",
]

#: File suffixes picked up when a directory is given.
MANIFEST_SUFFIXES = (".yaml", ".yml")

#: The cluster profiles file's default name (:mod:`quotaform.cluster.profiles`):
#: it may sit beside the manifests and is never read as one.
PROFILES_FILE = "quotaform.clusters.yaml"


def _hidden(path: Path, root: Path) -> bool:
    return any(part.startswith(".") for part in path.relative_to(root).parts)


def _special(path: Path) -> str | None:
    """:func:`special_kind` of an existing ``path``, ``None`` when it is missing."""
    try:
        return special_kind(path.stat().st_mode)
    except OSError as exc:
        return "a symbolic link loop" if exc.errno == errno.ELOOP else None


def find_manifest_files(
    paths: Sequence[str | Path],
    problems: list[ManifestProblem],
    warnings: list[ManifestProblem] | None = None,
) -> list[Path]:
    """Files to read, in order: given files as they are; directories expanded
    recursively to ``*.yaml`` / ``*.yml`` sorted by relative path, skipping
    hidden files and directories (editor droppings, ``.git``) and the cluster
    profiles file (:data:`PROFILES_FILE`, which is not a manifest; naming it
    directly is a problem). A file reached twice is read once.

    Only regular files are read: a given path that is a FIFO, socket or
    device is a problem; one found in a directory is skipped with a warning
    (``warnings``). A missing path or a directory without manifests is a
    problem in ``problems``."""
    found: list[Path] = []
    seen: set[Path] = set()
    for given in paths:
        path = Path(given)
        if path.is_dir():
            members = []
            for p in sorted(path.rglob("*"), key=lambda p: p.relative_to(path).as_posix()):
                if p.suffix not in MANIFEST_SUFFIXES or _hidden(p, path):
                    continue
                if p.name == PROFILES_FILE:
                    _log.info("%s: the cluster profiles file, not read as a manifest", p)
                    continue
                if p.is_file():
                    members.append(p)
                elif (kind := _special(p)) is not None and warnings is not None:
                    warnings.append(
                        ManifestProblem(
                            str(p), None, "(file)", f"not a regular file ({kind}): skipped"
                        )
                    )
            if not members:
                problems.append(
                    ManifestProblem(str(path), None, "(file)", "no *.yaml or *.yml files found")
                )
        elif path.is_file() and path.name == PROFILES_FILE:
            problems.append(
                ManifestProblem(
                    str(path),
                    None,
                    "(file)",
                    "this is the cluster profiles file, not a manifest: give it with "
                    "--config (it is found on its own in the current directory or beside "
                    "the manifests)",
                )
            )
            continue
        elif path.is_file():
            members = [path]
        elif (kind := _special(path)) is not None:
            problems.append(
                ManifestProblem(str(path), None, "(file)", f"not a regular file ({kind}): not read")
            )
            continue
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
            if (
                resolved.suffix in MANIFEST_SUFFIXES
                and resolved.name != PROFILES_FILE
                and not any(part.startswith(".") for part in relative.parts)
            ):
                return True
        elif path.resolve() == resolved:
            return True
    return False
