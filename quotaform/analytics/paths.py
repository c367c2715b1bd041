"""Where analytics data lives: a local path, or a Hadoop URI Spark reads and writes.

``--usage`` and ``--out`` take either. A local path (``usage/``,
``/data/out``) is a :class:`~pathlib.Path`, read by either engine and
written with the local file system. A URI with a scheme (``file:///data``,
``hdfs://nn:8020/usage``, ``s3a://bucket/out``) stays text (a ``Path`` would
fold ``//``) and is only ever touched through Spark (its readers and writers,
and for the reports Hadoop's ``FileSystem``): no local file-system call is
made on it, so ``--engine auto`` picks Spark for it and ``--engine python``
refuses it.
"""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["DataPath", "child", "data_path", "is_uri", "name_of"]

#: A local path, or a Hadoop-compatible URI (``scheme://...``) as text.
DataPath = Path | str

#: ``scheme://`` (RFC 3986 scheme; ``file:/x`` with one slash is a URI too).
_URI = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")


def data_path(text: str | Path) -> DataPath:
    """``text`` as a :data:`DataPath`: a URI stays text, anything else is a
    ``Path``. A one-letter scheme is a Windows drive, not a URI."""
    if isinstance(text, Path):
        return text
    if _URI.match(text) and not re.match(r"^[A-Za-z]:[\\/]", text):
        return text
    return Path(text)


def is_uri(where: DataPath) -> bool:
    """True for a Hadoop URI (text), False for a local path."""
    return isinstance(where, str)


def child(base: DataPath, name: str) -> DataPath:
    """``base/name``, keeping a URI a URI: ``s3a://b/out`` + ``report.md``."""
    if isinstance(base, Path):
        return base / name
    return f"{base.rstrip('/')}/{name}"


def name_of(where: DataPath) -> str:
    """The last component: ``usage.json`` of ``s3a://b/x/usage.json``."""
    if isinstance(where, Path):
        return where.name
    return where.rstrip("/").rsplit("/", 1)[-1]
