"""What every document model of quotaform's file formats shares."""

from __future__ import annotations

from pydantic import ConfigDict

__all__ = ["FROZEN"]

#: A document model's configuration: its schema built on first use (importing
#: a format builds nothing), no field outside the schema, immutable.
FROZEN = ConfigDict(defer_build=True, extra="forbid", frozen=True)
