"""The JSON Schemas of quotaform's file formats, checked in under ``schemas/``.

``python -m quotaform.schemas [DIR]`` rewrites them (sorted keys, 2-space
indent, trailing newline); unit tests fail when a checked-in file is stale.

* ``manifest.schema.json``: one manifest document (for editors).
* ``plan.schema.json``: the JSON plan (``plan -o json``, saved plans).
* ``drift.schema.json``: the JSON drift report (``drift -o json``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from quotaform.manifest.schema import manifest_json_schema
from quotaform.render.drift import drift_json_schema
from quotaform.render.plan_json import PlanDocument

__all__ = ["SCHEMAS", "main", "plan_json_schema", "render_schema"]

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def plan_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of the JSON plan, ``format_version`` 1."""
    # Untidied: in a plan, null is meaningful (the default entity's name, a
    # value that is absent before an add or after a remove).
    schema = PlanDocument.model_json_schema(by_alias=True, mode="serialization")
    schema["$schema"] = _DRAFT
    schema["$id"] = "https://quotaform.io/schemas/plan.schema.json"
    schema["title"] = "quotaform plan"
    return schema


#: File name under ``schemas/`` -> the function producing it.
SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "manifest.schema.json": manifest_json_schema,
    "plan.schema.json": plan_json_schema,
    "drift.schema.json": drift_json_schema,
}


def render_schema(name: str) -> str:
    """The schema file ``name`` as checked in.

    Raises:
        KeyError: ``name`` is not one of :data:`SCHEMAS`.
    """
    return json.dumps(SCHEMAS[name](), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write every schema into ``argv[0]`` (default ``schemas/``); returns 0."""
    args = sys.argv[1:] if argv is None else argv
    target = Path(args[0]) if args else Path("schemas")
    target.mkdir(parents=True, exist_ok=True)
    for name in SCHEMAS:
        (target / name).write_text(render_schema(name), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
