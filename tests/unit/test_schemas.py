"""Every checked-in JSON Schema under schemas/ is current and a valid draft 2020-12 schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from quotaform.formats.schemas import SCHEMAS, render_schema

SCHEMA_DIR = Path(__file__).resolve().parents[2] / "schemas"


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_checked_in_schema_is_current(name: str) -> None:
    path = SCHEMA_DIR / name
    assert path.exists(), f"run `python -m quotaform.formats.schemas` to create schemas/{name}"
    assert path.read_text(encoding="utf-8") == render_schema(name), (
        f"schemas/{name} is stale: run `python -m quotaform.formats.schemas` and commit the result"
    )
    jsonschema.Draft202012Validator.check_schema(json.loads(path.read_text(encoding="utf-8")))


def test_no_schema_file_without_a_generator() -> None:
    assert sorted(p.name for p in SCHEMA_DIR.glob("*.json")) == sorted(SCHEMAS)
