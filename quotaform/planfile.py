"""Saved plans: ``plan --out FILE`` writes one, ``apply FILE`` applies exactly it.

Kafka has no compare-and-set for quotas, so a saved plan records the cluster id
and the before-values of every entity it touches; apply describes those
entities again and refuses when any of them moved since the plan (a quota
edited behind the tool's back, another pipeline's apply). That is how two
pipelines racing each other are caught.

The file is the JSON plan (``schemas/plan.schema.json``) plus a ``checksum``:
the SHA-256 of the canonical JSON of everything else, so a damaged or
hand-edited file is refused instead of half-understood.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from quotaform.diff import diff_entity
from quotaform.entity import Entity
from quotaform.errors import QuotaformError
from quotaform.live import QuotaReader, describe_shapes
from quotaform.plan import PLAN_FORMAT_VERSION, Action, EntityChange, KeyAction, KeyChange, Plan
from quotaform.render.plan_json import PlanDocument, plan_document
from quotaform.render.text import entity_label

__all__ = [
    "EXIT_STALE_PLAN",
    "MovedEntity",
    "PlanFileError",
    "StalePlanError",
    "check_not_stale",
    "is_plan_file",
    "read_plan_file",
    "write_plan_file",
]

#: ``apply PLANFILE`` exit code when the cluster moved since the plan.
EXIT_STALE_PLAN = 5


class PlanFileError(QuotaformError):
    """The plan file cannot be used: unreadable, damaged, from a newer
    quotaform, or for another cluster. Nothing was applied."""


@dataclass(frozen=True, slots=True)
class MovedEntity:
    """A touched entity whose live quotas differ from the plan's before-values.

    ``planned_before`` and ``now`` map quota key to quota value; ``{}`` means
    the entity had (or has) no quotas.
    """

    entity: Entity
    planned_before: Mapping[str, float]
    now: Mapping[str, float]


class StalePlanError(QuotaformError):
    """The cluster changed since the plan was made; nothing was applied."""

    exit_code = EXIT_STALE_PLAN

    def __init__(self, moved: list[MovedEntity]) -> None:
        self.moved = moved
        lines = [
            f"the saved plan is stale: {len(moved)} entit{'y' if len(moved) == 1 else 'ies'} "
            "changed on the cluster since it was made; nothing was applied. "
            "Run plan again and review the new plan."
        ]
        for m in moved:
            lines.append(
                f"  {entity_label(m.entity)}: planned from {dict(m.planned_before)}, "
                f"now {dict(m.now)}"
            )
        super().__init__("\n".join(lines))


def _canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def write_plan_file(plan: Plan, path: str | Path) -> None:
    """Write ``plan`` to ``path`` as JSON with a checksum (no secrets: the plan
    holds entities, quota values and the cluster id only)."""
    from quotaform import __version__

    data = plan_document(plan).model_dump(mode="json", by_alias=True)
    body = {"plan": data, "quotaform_version": __version__}
    document = {**body, "checksum": hashlib.sha256(_canonical(body)).hexdigest()}
    Path(path).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")


def is_plan_file(path: str | Path) -> bool:
    """True when ``path`` is a file whose content is a JSON object (a saved
    plan), as opposed to a YAML manifest or a directory."""
    p = Path(path)
    if not p.is_file():
        return False
    try:
        with p.open("rb") as fh:
            head = fh.read(64).lstrip()
    except OSError:
        return False
    return head.startswith(b"{")


def read_plan_file(path: str | Path) -> Plan:
    """Load a saved plan.

    Raises:
        PlanFileError: unreadable, not JSON, checksum mismatch (damaged or
            edited), a ``format_version`` this quotaform does not know (newer),
            or content that does not match ``schemas/plan.schema.json``.
    """
    where = str(path)
    try:
        document = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise PlanFileError(f"cannot read plan file {where}: {exc.strerror}") from exc
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise PlanFileError(f"{where} is not a quotaform plan file (not JSON: {exc})") from exc
    if not isinstance(document, dict) or "plan" not in document or "checksum" not in document:
        raise PlanFileError(f"{where} is not a quotaform plan file (no plan and checksum)")
    body = {k: v for k, v in document.items() if k != "checksum"}
    plan_data = body.get("plan")
    version = plan_data.get("format_version") if isinstance(plan_data, dict) else None
    if isinstance(version, int) and version > PLAN_FORMAT_VERSION:
        raise PlanFileError(
            f"{where} has plan format_version {version}, written by quotaform "
            f"{body.get('quotaform_version', '?')}; this quotaform reads version "
            f"{PLAN_FORMAT_VERSION}: upgrade quotaform or plan again"
        )
    if hashlib.sha256(_canonical(body)).hexdigest() != document["checksum"]:
        raise PlanFileError(
            f"{where} is damaged or was edited (checksum mismatch): refusing to apply it; "
            "plan again"
        )
    try:
        doc = PlanDocument.model_validate(plan_data)
    except ValidationError as exc:
        raise PlanFileError(f"{where} is not a valid quotaform plan: {exc}") from exc
    return _plan_from_document(doc)


def _plan_from_document(doc: PlanDocument) -> Plan:
    changes = tuple(
        EntityChange(
            entity=Entity.from_mapping(c.entity),
            action=Action(c.action),
            before=dict(c.before),
            after=dict(c.after),
            key_changes=tuple(
                KeyChange(k.key, KeyAction(k.action), k.before, k.after) for k in c.key_changes
            ),
            source=c.source,
        )
        for c in doc.changes
    )
    return Plan(
        cluster=doc.cluster,
        cluster_id=doc.cluster_id,
        changes=changes,
        deletes_allowed=doc.deletes_allowed,
        unmanaged=doc.unmanaged,
        rpc_counts=dict(doc.live_state_rpcs),
        warnings=tuple(doc.warnings),
    )


def check_not_stale(plan: Plan, reader: QuotaReader, cluster_id: str) -> None:
    """Refuse ``plan`` unless the cluster is the plan's and every entity it
    touches still has the plan's before-values.

    Reads one strict DescribeClientQuotas per touched entity shape.

    Raises:
        PlanFileError: the plan was made for another cluster id.
        StalePlanError: at least one touched entity moved (listing each).
    """
    if plan.cluster_id is not None and plan.cluster_id != cluster_id:
        raise PlanFileError(
            f"the plan was made for cluster id {plan.cluster_id!r} "
            f"({plan.cluster!r}); the bootstrap server belongs to {cluster_id!r}: refusing"
        )
    touched = {c.entity: dict(c.before) for c in plan.pending}
    if not touched:
        return
    live = describe_shapes(reader, sorted({e.types for e in touched}))
    moved = [
        MovedEntity(e, touched[e], live.get(e, {}))
        for e in sorted(touched, key=Entity.sort_key)
        if diff_entity(touched[e], live.get(e, {}))
    ]
    if moved:
        raise StalePlanError(moved)
