"""The JSON Schemas of quotaform's file formats, checked in under ``schemas/``.

``python -m quotaform.formats [DIR]`` rewrites them (sorted keys, 2-space
indent, trailing newline); unit tests fail when a checked-in file is stale.

* ``manifest.schema.json``: one manifest document (for editors).
* ``plan.schema.json``: the JSON plan (``plan -o json``, ``show -o json``, and
  the ``plan`` of a saved plan file).
* ``planfile.schema.json``: a saved plan file (``plan --out FILE``).
* ``drift.schema.json``: the JSON drift report (``drift -o json``).
* ``apply.schema.json``: the JSON apply result (``apply -o json``).
* ``describe.schema.json``: the live view (``describe -o json``).
* ``explain.schema.json``: ``explain -o json``.
* ``analyze.schema.json``: ``analyze ... --out DIR``'s ``summary.json``.
* ``usage.schema.json``: one row of the usage table (input).
* ``snapshot.schema.json``: one line of ``quotaform snapshot`` (input).
* ``multicluster.schema.json``: ``plan --all-clusters -o json``.
* ``volume-snapshot.schema.json``: one Volume Metrics snapshot record (the
  Strimzi proposal's, whose JSON Schema is the authority; input and output).
* ``storage-status.schema.json``: ``storage status -o json``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from quotaform.formats.analyze import AnalyzeSummary, SnapshotLine, UsageRecord
from quotaform.formats.apply import ApplyDocument
from quotaform.formats.describe import DescribeDocument
from quotaform.formats.drift import DriftDocument
from quotaform.formats.explain import ExplainDocument
from quotaform.formats.multicluster import MultiClusterDocument
from quotaform.formats.plan import PlanDocument
from quotaform.formats.planfile import PlanFileDocument
from quotaform.formats.storage import StorageStatusDocument, VolumeSnapshotRecord
from quotaform.manifest.schema import manifest_json_schema

__all__ = ["SCHEMAS", "document_schema", "main", "render_schema"]

_DRAFT = "https://json-schema.org/draft/2020-12/schema"


def document_schema(model: type[BaseModel], name: str, title: str) -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of an output document model, ``$id``
    ``https://quotaform.io/schemas/<name>``. Untidied: in output documents
    null is meaningful (the default entity's name, an absent value)."""
    schema = model.model_json_schema(by_alias=True, mode="serialization")
    schema["$schema"] = _DRAFT
    schema["$id"] = f"https://quotaform.io/schemas/{name}"
    schema["title"] = title
    return schema


#: File name under ``schemas/`` -> the function producing it.
SCHEMAS: dict[str, Callable[[], dict[str, Any]]] = {
    "manifest.schema.json": manifest_json_schema,
    "plan.schema.json": lambda: document_schema(PlanDocument, "plan.schema.json", "quotaform plan"),
    "planfile.schema.json": lambda: document_schema(
        PlanFileDocument, "planfile.schema.json", "quotaform saved plan file"
    ),
    "drift.schema.json": lambda: document_schema(
        DriftDocument, "drift.schema.json", "quotaform drift report"
    ),
    "apply.schema.json": lambda: document_schema(
        ApplyDocument, "apply.schema.json", "quotaform apply result"
    ),
    "explain.schema.json": lambda: document_schema(
        ExplainDocument, "explain.schema.json", "quotaform explanation"
    ),
    "analyze.schema.json": lambda: document_schema(
        AnalyzeSummary, "analyze.schema.json", "quotaform analyze summary"
    ),
    "usage.schema.json": lambda: document_schema(
        UsageRecord, "usage.schema.json", "quotaform usage sample (one row)"
    ),
    "snapshot.schema.json": lambda: document_schema(
        SnapshotLine, "snapshot.schema.json", "quotaform quota snapshot (one line)"
    ),
    "multicluster.schema.json": lambda: document_schema(
        MultiClusterDocument, "multicluster.schema.json", "quotaform plan of every cluster"
    ),
    "describe.schema.json": lambda: document_schema(
        DescribeDocument, "describe.schema.json", "quotaform live quotas (describe)"
    ),
    "volume-snapshot.schema.json": lambda: document_schema(
        VolumeSnapshotRecord, "volume-snapshot.schema.json", "Volume Metrics snapshot (one broker)"
    ),
    "storage-status.schema.json": lambda: document_schema(
        StorageStatusDocument, "storage-status.schema.json", "quotaform storage status"
    ),
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
