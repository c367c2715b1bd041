"""Files in, within bounds: regular files only, opened without blocking, at
most a kind's size, text decoded as UTF-8 with the place of a bad byte named.

Every refusal is an :class:`~quotaform.errors.InputError`: one line naming the
file (unprintable characters escaped), the line or byte offset where there
is one, and the limit passed.
"""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path
from typing import BinaryIO

from quotaform.errors import InputError
from quotaform.inputs.limits import Limits
from quotaform.kafka.entity import escape_unprintable

__all__ = [
    "decode_text",
    "is_regular_file",
    "open_input",
    "read_bytes",
    "read_text",
    "shown",
    "special_kind",
]

_BOM = b"\xef\xbb\xbf"


def shown(path: str | os.PathLike[str]) -> str:
    """``path`` as messages show it: one line, control and format characters
    escaped (:func:`~quotaform.kafka.entity.escape_unprintable`)."""
    return escape_unprintable(os.fspath(path))


def special_kind(mode: int) -> str | None:
    """What a file of ``st_mode`` ``mode`` is when it is neither a regular
    file nor a directory (``"a FIFO"``, which would block a reader forever;
    ``"a socket"``, ``"a device"``), else ``None``."""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a file"


def _why_not(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symbolic link loop (too many levels of symbolic links)"
    return (exc.strerror or type(exc).__name__).lower()


def open_input(path: str | os.PathLike[str], limits: Limits) -> tuple[BinaryIO, int]:
    """``(binary file, size in bytes)`` of ``path``, opened for reading.

    The file is opened without blocking (a FIFO never waits for a writer)
    and judged by what was opened, not by the name (no race between a check
    and the open): a directory, FIFO, socket or device is refused, and so is
    a file larger than ``limits.max_bytes``. The caller closes the file and,
    since a file may grow while it is read, reads no more than
    ``limits.max_bytes`` (:func:`read_bytes` does both).

    Raises:
        InputError: missing, unreadable, a symbolic link loop, not a regular
            file, or too large.
    """
    name = shown(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise InputError(name, f"cannot read the {limits.kind}: {_why_not(exc)}") from None
    try:
        info = os.fstat(fd)
        kind = "a directory" if stat.S_ISDIR(info.st_mode) else special_kind(info.st_mode)
        if kind is not None:
            raise InputError(
                name, f"not a regular file ({kind}): a {limits.kind} is read only from a file"
            )
        if info.st_size > limits.max_bytes:
            raise _too_large(name, limits)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb"), info.st_size
    except BaseException:
        os.close(fd)
        raise


def _too_large(name: str, limits: Limits) -> InputError:
    raise_with = f" (raise it with {limits.overridden_by})" if limits.overridden_by else ""
    return InputError(
        name, f"larger than {limits.size_text()}, the limit for a {limits.kind}{raise_with}"
    )


def read_bytes(path: str | os.PathLike[str], limits: Limits) -> bytes:
    """The whole content of ``path`` (:func:`open_input`), at most
    ``limits.max_bytes`` even when the file grows while it is read.

    Raises:
        InputError: as :func:`open_input`, or the file grew past the limit.
    """
    fh, size = open_input(path, limits)
    chunks: list[bytes] = []
    total = 0
    with fh:
        try:
            # The size first (no buffer sized by the limit), then whatever the
            # file grew by since it was opened, up to the limit.
            want = size or 1 << 16
            while chunk := fh.read(want):
                total += len(chunk)
                if total > limits.max_bytes:
                    raise _too_large(shown(path), limits)
                chunks.append(chunk)
                want = 1 << 20
        except OSError as exc:
            raise InputError(
                shown(path), f"cannot read the {limits.kind}: {_why_not(exc)}"
            ) from None
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def decode_text(data: bytes, source: str, limits: Limits, *, nul: bool = False) -> str:
    """``data`` as text: UTF-8, a leading byte-order mark dropped, line ends
    as written (CRLF is for the parser to take).

    Args:
        source: the name shown in refusals.
        nul: whether a NUL character is allowed (it never is in a document
            quotaform reads as text, and a terminal would hide it).

    Raises:
        InputError: a byte sequence that is not UTF-8, or a NUL, named by
            line and byte offset.
    """
    if data.startswith(_BOM):
        data = data[len(_BOM) :]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = "a byte" if limits.secret else f"byte 0x{data[exc.start]:02x}"
        raise InputError(
            source,
            f"not UTF-8 text: {byte} at byte offset {exc.start} ({exc.reason}); a "
            f"{limits.kind} is UTF-8 text",
            line=line,
        ) from None
    if not nul:
        at = text.find("\0")
        if at >= 0:
            line = text.count("\n", 0, at) + 1
            offset = len(text[:at].encode("utf-8"))
            raise InputError(
                source,
                f"a NUL byte at byte offset {offset}: a {limits.kind} is text, never binary",
                line=line,
            )
    return text


def read_text(path: str | os.PathLike[str], limits: Limits, *, nul: bool = False) -> str:
    """The text of ``path``: :func:`read_bytes`, then :func:`decode_text`.

    Raises:
        InputError: as both.
    """
    return decode_text(read_bytes(path, limits), shown(path), limits, nul=nul)


def is_regular_file(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` names a regular file (following symbolic links),
    never blocking and never raising."""
    try:
        return stat.S_ISREG(Path(path).stat().st_mode)
    except (OSError, ValueError):
        return False
