"""Load ``resolution_cases.yaml``: Kafka's quota resolution, level by level,
as data every resolution engine is checked against."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from quotaform.kafka.entity import Entity
from quotaform.kafka.resolution import Principal

CASES_FILE = Path(__file__).with_name("resolution_cases.yaml")


@dataclass(frozen=True)
class ResolutionCase:
    """One case: a configuration, a principal, and per quota key the expected
    ``{"value", "level", "entity", "tags", "recorded"}``."""

    name: str
    entries: dict[Entity, dict[str, float]]
    principal: Principal
    expect: dict[str, dict[str, Any]]


def _principal(raw: dict[str, Any]) -> Principal:
    if "ip" in raw:
        return Principal(ip=str(raw["ip"]))
    return Principal(user=raw.get("user"), client_id=raw.get("client-id"))


def load_cases() -> list[ResolutionCase]:
    """Every case of the file, in order."""
    data = YAML(typ="safe").load(CASES_FILE.read_text(encoding="utf-8"))
    cases = []
    for raw in data["cases"]:
        entries = {
            Entity.from_mapping(e["entity"]): {k: float(v) for k, v in e["quotas"].items()}
            for e in raw["entries"]
        }
        cases.append(
            ResolutionCase(raw["name"], entries, _principal(raw["principal"]), raw["expect"])
        )
    return cases
