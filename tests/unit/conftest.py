"""Fixtures shared by the unit tests. Builders of states and plans live in
``tests/unit/builders.py``; the golden-file check is the ``golden`` fixture.

Regenerate golden files after an intended change with
``QUOTAFORM_UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/unit`` and review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from .builders import Golden

GOLDEN = Path(__file__).parent / "golden"



def check_golden(name: str, actual: str) -> None:
    """Assert ``actual`` equals ``tests/unit/golden/<name>`` (rewriting the file
    instead when ``QUOTAFORM_UPDATE_GOLDEN`` is set)."""
    path = GOLDEN / name
    if os.environ.get("QUOTAFORM_UPDATE_GOLDEN"):
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8"), f"{name} differs from the golden file"


@pytest.fixture
def golden() -> Golden:
    """``golden(name, text)``: compare ``text`` with a golden file."""
    return check_golden
