"""schemas/manifest.schema.json: up to date, and accepting what the loader accepts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from pydantic import ValidationError
from ruamel.yaml import YAML

from quotaform.formats.schemas import main, render_schema
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.manifest.models import ManifestDocument
from quotaform.manifest.schema import manifest_json_schema

ROOT = Path(__file__).resolve().parents[2]
SCHEMA_FILE = ROOT / "schemas" / "manifest.schema.json"
EXAMPLES = sorted((ROOT / "examples" / "manifests").glob("*.yaml"))
GOOD_FIXTURES = sorted(
    p
    for folder in ("good", "multi-cluster")
    for p in (Path(__file__).parent / "fixtures" / "manifests" / folder).rglob("*.y*ml")
    if not p.name.startswith(".")
)


def documents(path: Path) -> list[Any]:
    # safe loader: plain dicts/lists, as JSON Schema validators see YAML
    return [d for d in YAML(typ="safe").load_all(path.read_text(encoding="utf-8")) if d]


def check(schema: dict[str, Any], value: Any) -> list[str]:
    """jsonschema's complaints about ``value``: ``"$.path: message"`` each, sorted."""
    validator = jsonschema.Draft202012Validator(schema)
    return sorted(f"{e.json_path}: {e.message}" for e in validator.iter_errors(value))


def test_checked_in_schema_is_current() -> None:
    assert SCHEMA_FILE.exists(), "run `python -m quotaform.formats.schemas` to create it"
    assert SCHEMA_FILE.read_text(encoding="utf-8") == render_schema("manifest.schema.json"), (
        "schemas/manifest.schema.json is stale: run `python -m quotaform.formats.schemas` "
        "from the repository root and commit the result"
    )


def test_main_writes_the_rendered_schema(tmp_path: Path) -> None:
    assert main([str(tmp_path / "out")]) == 0
    text = (tmp_path / "out" / "manifest.schema.json").read_text(encoding="utf-8")
    assert text == render_schema("manifest.schema.json")
    assert text.endswith("}\n")
    assert text.splitlines()[1].startswith('  "')  # 2-space indent
    assert list(json.loads(text)) == sorted(json.loads(text))


def test_schema_structure() -> None:
    schema = manifest_json_schema()
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == "https://quotaform.io/schemas/manifest.schema.json"
    assert schema["title"] == "quotaform ClientQuotas manifest"
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["apiVersion", "kind", "metadata", "spec"]
    assert schema["properties"]["apiVersion"]["const"] == "quotaform.io/v1"
    assert schema["properties"]["kind"]["const"] == "ClientQuotas"
    defs = schema["$defs"]
    for name in (
        "Metadata",
        "Spec",
        "ScopeEntry",
        "ScopePrefixes",
        "QuotaEntry",
        "EntitySpec",
        "QuotaValues",
        "ProtectEntry",
        "ChangeBudgetSpec",
        "ProbeSpec",
    ):
        assert defs[name]["additionalProperties"] is False, name
        assert defs[name]["description"], name
        for prop, sub in defs[name]["properties"].items():
            # every field documented, no pydantic-generated title, no null default
            assert "title" not in sub, (name, prop)
            assert sub.get("default", "unset") is not None, (name, prop)
    assert set(defs["Metadata"]["properties"]) == {"cluster", "clusters", "clusterId", "labels"}
    assert set(defs["Spec"]["properties"]) == {
        "scope",
        "allowDeletes",
        "quotas",
        "protect",
        "changeBudget",
        "probes",
        "storagePolicy",
    }
    assert set(defs["ProbeSpec"]["properties"]) == {"user", "client-id", "ip"}
    assert set(defs["ProtectEntry"]["properties"]) == {"entity"}
    assert set(defs["ChangeBudgetSpec"]["properties"]) == {
        "maxDeletes",
        "maxDeleteFraction",
        "maxRelaxFactor",
    }
    assert set(defs["ScopeEntry"]["properties"]) == {"shape", "prefixes", "includeDefaults"}
    assert defs["ScopeEntry"]["properties"]["shape"]["enum"] == [
        "user",
        "client-id",
        "user+client-id",
        "ip",
    ]
    assert set(defs["QuotaEntry"]["properties"]) == {"entity", "values", "preventDestroy"}
    assert set(defs["EntitySpec"]["properties"]) == {"user", "client-id", "ip"}
    assert defs["EntitySpec"]["minProperties"] == 1
    values = defs["QuotaValues"]
    assert values["minProperties"] == 1
    assert set(values["properties"]) == set(QUOTA_KEYS)
    for key, spec in QUOTA_KEYS.items():
        prop = values["properties"][key]
        assert spec.value_type.value in prop["description"], key
        branch_types = sorted(b["type"] for b in prop["anyOf"])
        assert branch_types[1] == "string", key
        assert branch_types[0] in ("integer", "number"), key
    assert "bytes/s" in values["properties"]["producer_byte_rate"]["description"]
    assert "%" in values["properties"]["request_percentage"]["description"]
    assert "connections" in values["properties"]["connection_creation_rate"]["description"]


@pytest.mark.parametrize("path", EXAMPLES + GOOD_FIXTURES, ids=lambda p: p.name)
def test_examples_validate_against_schema_and_models(path: Path) -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    docs = documents(path)
    assert docs
    for doc in docs:
        assert check(schema, doc) == []
        ManifestDocument.model_validate(doc)


def test_the_briefs_example_validates() -> None:
    doc = YAML(typ="safe").load(
        """
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  cluster: prod-eu
  clusterId: "MkU3OEVBNTcwNTJENDM2Qk"
  labels: {team: payments}
spec:
  scope:
    - shape: user
    - shape: user+client-id
      prefixes: {user: ["svc-"]}
      includeDefaults: true
    - shape: ip
  allowDeletes: false
  quotas:
    - entity: {user: {default: true}}
      values: {producer_byte_rate: 1MiB, consumer_byte_rate: 2MiB, request_percentage: "25%"}
    - entity: {user: svc-orders}
      values: {producer_byte_rate: 10MiB}
    - entity: {user: svc-orders, client-id: {default: true}}
      values: {consumer_byte_rate: 512KiB}
    - entity: {ip: {default: true}}
      values: {connection_creation_rate: 20}
    - entity: {ip: 192.0.2.10}
      values: {connection_creation_rate: 100}
    - entity: {client-id: reporting}
      values: {controller_mutation_rate: 2.5}
      preventDestroy: true
"""
    )
    schema = manifest_json_schema()
    assert check(schema, doc) == []
    ManifestDocument.model_validate(doc)


def _quota(entity: dict[str, Any], values: dict[str, Any]) -> dict[str, Any]:
    return {"spec": {"quotas": [{"entity": entity, "values": values}]}}


@pytest.mark.parametrize(
    ("patch", "complaint"),
    [
        ({"kind": "Quotas"}, "$.kind"),
        ({"extra": 1}, "$"),
        (_quota({}, {"producer_byte_rate": 1}), "$.spec.quotas[0].entity"),
        (
            _quota({"user": "a"}, {"producer_byte_rate": "10MiBs"}),
            "$.spec.quotas[0].values.producer_byte_rate",
        ),
        (
            _quota({"user": {"default": False}}, {"request_percentage": 1}),
            "$.spec.quotas[0].entity.user",
        ),
        (
            _quota({"ip": {"default": True}}, {"connection_creation_rate": 2.5}),
            "$.spec.quotas[0].values.connection_creation_rate",
        ),
        (
            _quota({"user": "a"}, {"request_percentage": -5}),
            "$.spec.quotas[0].values.request_percentage",
        ),
        (
            {"metadata": {"cluster": "c", "labels": {"team": 7}}},
            "$.metadata.labels.team",
        ),
        ({"metadata": {"labels": {}}}, "$.metadata"),
        ({"metadata": {"cluster": "c", "clusters": ["d", "e"]}}, "$.metadata"),
        ({"metadata": {"clusters": ["d", "e"], "clusterId": "x"}}, "$.metadata"),
        ({"metadata": {"clusters": ["*", "e"]}}, "$.metadata.clusters"),
        ({"metadata": {"clusters": ["d", "d"]}}, "$.metadata.clusters"),
        ({"metadata": {"clusters": []}}, "$.metadata.clusters"),
        ({"spec": {"protect": [{"entity": {}}]}}, "$.spec.protect[0].entity"),
        ({"spec": {"protect": [{"user": "a"}]}}, "$.spec.protect[0]"),
        ({"spec": {"changeBudget": {}}}, "$.spec.changeBudget"),
        ({"spec": {"changeBudget": {"maxDeletes": -1}}}, "$.spec.changeBudget.maxDeletes"),
        (
            {"spec": {"changeBudget": {"maxDeleteFraction": 2}}},
            "$.spec.changeBudget.maxDeleteFraction",
        ),
        (
            {"spec": {"changeBudget": {"maxRelaxFactor": 0.5}}},
            "$.spec.changeBudget.maxRelaxFactor",
        ),
    ],
)
def test_schema_rejects_what_the_models_reject(patch: dict[str, Any], complaint: str) -> None:
    doc: dict[str, Any] = {
        "apiVersion": "quotaform.io/v1",
        "kind": "ClientQuotas",
        "metadata": {"cluster": "c"},
        "spec": {"scope": [{"shape": "user"}]},
    }
    doc.update(patch)
    schema = manifest_json_schema()
    complaints = check(schema, doc)
    assert any(c.split(": ")[0] == complaint for c in complaints), complaints
    with pytest.raises(ValidationError):
        ManifestDocument.model_validate(doc)


def test_schema_is_a_valid_draft_2020_12_schema() -> None:
    schema = json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))
    jsonschema.Draft202012Validator.check_schema(schema)
    for path in EXAMPLES:
        for doc in documents(path):
            jsonschema.validate(doc, schema, cls=jsonschema.Draft202012Validator)
