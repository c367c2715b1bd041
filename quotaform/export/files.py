"""Writing files safely: new files never overwrite by accident, replaced
files change atomically and keep their permission bits."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from quotaform.errors import ExportError

__all__ = ["replace_file", "write_new_file"]


def write_new_file(path: Path, text: str, *, force: bool) -> None:
    """Write ``text`` to ``path``, which must not exist unless ``force``.

    Raises:
        ExportError: ``path`` exists and ``force`` is false, or cannot be written.
    """
    if not force:
        try:
            with path.open("x", encoding="utf-8", newline="") as out:
                out.write(text)
        except FileExistsError:
            raise ExportError(f"{path} already exists: pass --force to overwrite it") from None
        except OSError as exc:
            raise ExportError(f"{path}: cannot write: {exc.strerror}") from None
        return
    replace_file(path, text)


def replace_file(path: Path, text: str) -> None:
    """Replace ``path`` with ``text`` atomically (a temporary file renamed over
    it), keeping its permission bits.

    Raises:
        ExportError: the file cannot be written.
    """
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
        try:
            with os.fdopen(fd, "w", encoding="utf-8", newline="") as out:
                out.write(text)
            if path.exists():
                os.chmod(tmp, path.stat().st_mode & 0o7777)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise ExportError(f"{path}: cannot write: {exc.strerror}") from None
