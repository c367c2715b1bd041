"""The manifest JSON Schema, generated from the pydantic models.

``python -m quotaform.formats`` rewrites ``schemas/manifest.schema.json``
(sorted keys, 2-space indent, trailing newline); a unit test fails when the
checked-in file is stale. Editors use the schema for completion and checks;
quotaform itself validates with the models, which also check what a schema
cannot (scope coverage, duplicates across files, ...).
"""

from __future__ import annotations

from typing import Any

from quotaform.manifest.models import ManifestDocument

__all__ = ["SCHEMA_ID", "manifest_json_schema", "tidy_schema"]

SCHEMA_ID = "https://quotaform.io/schemas/manifest.schema.json"


def manifest_json_schema() -> dict[str, Any]:
    """JSON Schema (draft 2020-12) of one manifest document (``apiVersion:
    quotaform.io/v1``, ``kind: ClientQuotas``), field names as written in YAML
    (camelCase, ``client-id``), with each field's description and units."""
    schema = tidy_schema(ManifestDocument.model_json_schema(by_alias=True, mode="validation"))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["$id"] = SCHEMA_ID
    schema["title"] = "quotaform ClientQuotas manifest"
    return schema


def tidy_schema(node: Any, *, in_properties: bool = False) -> Any:
    """Drop what pydantic adds for optional fields but the models refuse: the
    ``null`` branch and ``"default": null`` (an explicit null is an error),
    and the generated per-property titles ("Allowdeletes")."""
    if isinstance(node, list):
        return [tidy_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key == "default" and value is None:
            continue
        if key == "title" and in_properties:
            continue
        if key == "properties":
            out[key] = {name: tidy_schema(prop, in_properties=True) for name, prop in value.items()}
        else:
            out[key] = tidy_schema(value)
    branches = out.get("anyOf")
    if isinstance(branches, list) and {"type": "null"} in branches:
        rest = [b for b in branches if b != {"type": "null"}]
        del out["anyOf"]
        if len(rest) == 1:
            out = {**rest[0], **out}
        else:
            out["anyOf"] = rest
    return out
