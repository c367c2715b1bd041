"""Where a declaration was written: a leaf of the plan layer, so every value
that remembers its manifest line can import it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SourceLocation"]


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where something was declared: a manifest file path (as given) and a 1-based line."""

    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.path}:{self.line}"
