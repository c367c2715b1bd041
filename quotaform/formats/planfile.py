"""Saved plans: ``plan --out FILE`` writes one, ``apply FILE`` applies exactly it.

Kafka has no compare-and-set for quotas, so a saved plan records the cluster id
and the before-values of every entity it touches; before applying, apply
describes those entities again and refuses when any of them moved since the
plan (:func:`quotaform.cluster.apply.check_not_stale`).

The file (``schemas/planfile.schema.json``, :class:`PlanFileDocument`) holds
its own ``format_version``, the JSON plan (``plan``, ``schemas/plan.schema.json``),
the ``quotaform_version`` that wrote it, and a ``checksum``: the SHA-256 of the
canonical JSON of everything else, so a damaged file is refused instead of
half-understood. ``quotaform show FILE`` prints it. A checksum anyone can recompute proves
nothing about who wrote the file, so apply never trusts the permissions or
verdicts a file records: it judges the plan again (:mod:`quotaform.plan.review`).
For pipelines that must know the plan job wrote the file, a key in
``QUOTAFORM_PLAN_KEY`` makes ``plan --out`` add an HMAC-SHA256 ``signature``
and ``apply`` refuse a file without a valid one.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError

from quotaform.errors import InputError, PlanFileError, PlanKeyError
from quotaform.formats.base import FROZEN
from quotaform.formats.plan import ChangeDoc, PlanDocument, plan_data, plan_from_document
from quotaform.inputs.files import open_input
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.jsonsource import json_lines
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.entity import Entity, escape_unprintable
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.names import entity_problem, quota_problem
from quotaform.kafka.units import same_value
from quotaform.manifest.pydantic_errors import validation_problems
from quotaform.plan.differences import differences, path_text
from quotaform.plan.model import PLAN_FORMAT_VERSION, EntityChange, Plan
from quotaform.plan.review import PlanReview
from quotaform.plan.storage_types import SCALED_KEY

__all__ = [
    "ENV_PLAN_KEY",
    "PLANFILE_FORMAT_VERSION",
    "PlanFileDocument",
    "SavedPlan",
    "is_plan_file",
    "load_saved_plan",
    "read_plan_file",
    "signing_key",
    "write_plan_file",
]

#: The environment variable holding the plan-signing key (any string).
ENV_PLAN_KEY = "QUOTAFORM_PLAN_KEY"
_SIGNATURE_ALG = "HMAC-SHA256"
#: Version of the saved-plan file's own envelope (the plan inside has its own).
PLANFILE_FORMAT_VERSION = 1


class SignatureDoc(BaseModel):
    """An HMAC of the file's body, made with ``QUOTAFORM_PLAN_KEY``."""

    model_config = FROZEN
    alg: Literal["HMAC-SHA256"]
    value: str = Field(description="Hex digest over the canonical JSON of the body.")


class PlanFileDocument(BaseModel):
    """A saved plan file (``plan --out FILE``)."""

    model_config = FROZEN
    format_version: Literal[1] = Field(
        default=1, description="Version of the saved-plan envelope (absent in early files)."
    )
    plan: PlanDocument = Field(description="The plan and its review (plan.schema.json).")
    quotaform_version: str = Field(description="The quotaform that wrote the file.")
    signature: SignatureDoc | None = Field(
        default=None, description="Present when QUOTAFORM_PLAN_KEY was set at plan time."
    )
    checksum: str = Field(
        description="SHA-256 (hex) of the canonical JSON (sorted keys, no spaces) of every "
        "other field."
    )


@dataclass(frozen=True, slots=True)
class SavedPlan:
    """A saved plan as read: the plan, the review it was saved with (for
    showing; apply judges the plan again), who wrote it, whether it is signed."""

    plan: Plan
    review: PlanReview
    quotaform_version: str
    signed: bool


def signing_key(env: Mapping[str, str] | None = None) -> bytes | None:
    """The signing key from ``QUOTAFORM_PLAN_KEY`` (in ``env``, default
    ``os.environ``); ``None`` when unset.

    Raises:
        PlanKeyError: it is set but empty (or blank): what a CI system passes
            for a secret it does not have, which must not switch signing off.
    """
    value = (os.environ if env is None else env).get(ENV_PLAN_KEY)
    if value is None:
        return None
    if not value.strip():
        raise PlanKeyError(
            f"{ENV_PLAN_KEY} is set but empty (a missing CI secret?): set it to the "
            "plan-signing key, or unset it to write and read unsigned plans"
        )
    return value.encode("utf-8")


def _sign(key: bytes, body: dict[str, Any]) -> str:
    return hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()


def _canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def write_plan_file(
    plan: Plan, review: PlanReview, path: str | Path, *, env: Mapping[str, str] | None = None
) -> bool:
    """Write ``plan`` and its ``review`` to ``path`` as JSON with a checksum,
    signed with ``QUOTAFORM_PLAN_KEY`` when set (read from ``env``, default
    ``os.environ``). No secrets: the plan holds entities, quota values and
    the cluster id only; the key never enters the file.

    Returns:
        Whether the file was signed.
    """
    from quotaform import __version__

    data = plan_data(plan, review)
    body: dict[str, Any] = {
        "format_version": PLANFILE_FORMAT_VERSION,
        "plan": data,
        "quotaform_version": __version__,
    }
    key = signing_key(env)
    if key is not None:
        body["signature"] = {"alg": _SIGNATURE_ALG, "value": _sign(key, body)}
    document = {**body, "checksum": hashlib.sha256(_canonical(body)).hexdigest()}
    Path(path).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return key is not None


def is_plan_file(path: str | Path) -> bool:
    """True when ``path`` is a file whose content is a JSON object (a saved
    plan), as opposed to a YAML manifest or a directory."""
    if not Path(path).is_file():
        return False
    try:
        fh, _ = open_input(path, LIMITS["plan"])
    except InputError:
        return False
    with fh:
        head = fh.read(64).lstrip(b"\xef\xbb\xbf \t\r\n")
    return head.startswith(b"{")


def read_plan_file(
    path: str | Path, *, env: Mapping[str, str] | None = None
) -> tuple[Plan, PlanReview]:
    """``(plan, review)`` of :func:`load_saved_plan`.

    Raises:
        PlanFileError: as :func:`load_saved_plan`.
    """
    saved = load_saved_plan(path, env=env)
    return saved.plan, saved.review


#: Errors listed in one refusal before "... and N more".
_MAX_LISTED = 10


def _read_json(path: str | Path, shown: str) -> tuple[Any, str]:
    """The JSON document in ``path`` and its text, read within the bounds of
    a saved plan (:data:`quotaform.inputs.limits.LIMITS` ``["plan"]``: a
    regular file, size, nesting, number length, no ``NaN`` / ``Infinity``)."""
    try:
        return load_json(path, LIMITS["plan"], name=shown)
    except InputError as exc:
        raise PlanFileError(f"{exc}: not a quotaform plan file") from None


def _schema_problems(exc: ValidationError, shown: str, text: str) -> list[str]:
    """Every schema error of the file ``shown`` (whose JSON is ``text``), as
    ``file:line: field: message``."""
    lines = json_lines(text, [error["loc"] for error in exc.errors(include_url=False)])
    problems = validation_problems(exc, shown, locate=lambda loc: (lines(loc), path_text(loc)))
    return [str(problem) for problem in problems]


def _content_problems(doc: PlanDocument) -> list[str]:
    """Entities and quota values in ``doc`` that Kafka would reject or
    quotaform never sends, by the rules manifests are loaded by
    (:func:`~quotaform.kafka.names.entity_problem`,
    :func:`~quotaform.kafka.names.quota_problem`), each as ``field: message``."""
    problems: list[str] = []
    seen: set[Entity] = set()
    for i, change in enumerate(doc.changes):
        entity = Entity.from_mapping(change.entity)
        problem = entity_problem(entity, written=bool(change.after))
        if problem is not None:
            problems.append(f"plan.changes[{i}].entity: {problem}")
            continue
        if entity in seen:
            problems.append(f"plan.changes[{i}].entity: {entity.label()} is planned twice")
        seen.add(entity)
        for key, value in change.after.items():
            problem = quota_problem(entity, key, value)
            if problem is not None:
                problems.append(f"plan.changes[{i}].after.{key}: {problem}")
        for key, value in change.before.items():
            if key not in QUOTA_KEYS or not math.isfinite(value):
                problem = quota_problem(entity, key, value) or "not a live quota value"
                problems.append(f"plan.changes[{i}].before.{key}: {problem}")
    for i, outside in enumerate(doc.outside_scope):
        problem = entity_problem(Entity.from_mapping(outside.entity), written=False)
        if problem is not None:
            problems.append(f"plan.outside_scope[{i}].entity: {problem}")
    return problems


def _key_change_data(changes: Iterable[Any]) -> list[dict[str, Any]]:
    return [
        {
            "key": k.key,
            "action": getattr(k.action, "value", k.action),
            "before": k.before,
            "after": k.after,
        }
        for k in changes
    ]


def _same_key_changes(recorded: ChangeDoc, derived: EntityChange) -> bool:
    if recorded.action != derived.action.value or len(recorded.key_changes) != len(
        derived.key_changes
    ):
        return False
    return all(
        r.key == d.key
        and r.action == d.action.value
        and (r.before is None) == (d.before is None)
        and (r.after is None) == (d.after is None)
        and (r.before is None or d.before is None or same_value(r.before, d.before))
        and (r.after is None or d.after is None or same_value(r.after, d.after))
        for r, d in zip(recorded.key_changes, derived.key_changes, strict=True)
    )


def _contradictions(doc: PlanDocument, plan: Plan) -> list[str]:
    """Where the file's own record of what apply sends (``key_changes``,
    ``action``, ``summary``, the storage block's ``written``) differs from
    what its ``before``/``after`` imply (``plan``, derived from them), as
    ``path: in the file != implied`` lines."""
    lines: list[str] = []
    for i, (recorded, derived) in enumerate(zip(doc.changes, plan.changes, strict=True)):
        if not _same_key_changes(recorded, derived):
            lines += differences(
                {"action": recorded.action, "key_changes": _key_change_data(recorded.key_changes)},
                {
                    "action": derived.action.value,
                    "key_changes": _key_change_data(derived.key_changes),
                },
                root=f"plan.changes[{i}]",
            )
    summary = plan.summary
    implied = {
        "create": summary.create,
        "update": summary.update,
        "delete": summary.delete,
        "no-op": summary.no_op,
    }
    lines += differences(doc.summary.model_dump(by_alias=True), implied, root="plan.summary")
    if doc.storage is not None:
        after = {c.entity: c.after for c in plan.changes}
        for j, scaled in enumerate(doc.storage.scaled):
            written = after.get(Entity.from_mapping(scaled.entity), {}).get(SCALED_KEY)
            if written is None or not same_value(written, scaled.written):
                lines += differences(
                    scaled.written, written, root=f"plan.storage.scaled[{j}].written"
                )
    return lines


def _refuse(shown: str, what: str, lines: list[str]) -> PlanFileError:
    listed = lines[:_MAX_LISTED]
    more = f"; ... and {len(lines) - _MAX_LISTED} more" if len(lines) > _MAX_LISTED else ""
    return PlanFileError(f"{shown}: {what}: {'; '.join(listed)}{more}. Refusing it; plan again.")


def _check_envelope(document: dict[str, Any], shown: str, key: bytes | None) -> bool:
    """Check what surrounds the plan: both format versions readable here,
    the checksum, and with ``key`` the signature. Returns whether the file
    is signed.

    Raises:
        PlanFileError: a newer format, a checksum mismatch, a missing or
            wrong signature while a key is set.
    """
    body = {k: v for k, v in document.items() if k != "checksum"}
    plan_data = body.get("plan")
    envelope = body.get("format_version", PLANFILE_FORMAT_VERSION)
    writer = escape_unprintable(str(body.get("quotaform_version", "?")))[:40]
    if isinstance(envelope, int) and envelope > PLANFILE_FORMAT_VERSION:
        raise PlanFileError(
            f"{shown} is a plan file of format_version {envelope}, written by quotaform "
            f"{writer}; this quotaform reads version "
            f"{PLANFILE_FORMAT_VERSION}: upgrade quotaform or plan again"
        )
    version = plan_data.get("format_version") if isinstance(plan_data, dict) else None
    if isinstance(version, int) and version > PLAN_FORMAT_VERSION:
        raise PlanFileError(
            f"{shown} has plan format_version {version}, written by quotaform "
            f"{writer}; this quotaform reads version "
            f"{PLAN_FORMAT_VERSION}: upgrade quotaform or plan again"
        )
    if hashlib.sha256(_canonical(body)).hexdigest() != document["checksum"]:
        raise PlanFileError(f"{shown} is damaged or was edited (checksum mismatch): refusing it")
    signed = isinstance(body.get("signature"), dict)
    if key is not None:
        signature = body.pop("signature", None)
        value = signature.get("value") if isinstance(signature, dict) else None
        if not isinstance(value, str):
            raise PlanFileError(
                f"{shown} is not signed, but {ENV_PLAN_KEY} is set: refusing a plan the "
                "plan job did not sign"
            )
        if not hmac.compare_digest(value, _sign(key, body)):
            raise PlanFileError(
                f"{shown} has a signature that does not match {ENV_PLAN_KEY}: it was "
                "edited or signed with another key; refusing it"
            )
    return signed


def load_saved_plan(
    path: str | Path, *, env: Mapping[str, str] | None = None, purpose: str = "apply"
) -> SavedPlan:
    """Load a saved plan and the review it was saved with (the review is for
    showing the plan; apply judges the plan again).

    Nothing in the file is taken on trust: it is read within bounds
    (:func:`_read_json`), its checksum and (with ``QUOTAFORM_PLAN_KEY`` set,
    from ``env``, default ``os.environ``) its signature checked, its shape
    validated by :class:`PlanFileDocument`, every entity and quota value by
    Kafka's rules as manifests are, and what apply sends (each change's
    ``key_changes`` and ``action``) must be exactly what its ``before`` and
    ``after`` imply: the plan returned is derived from ``before``/``after``
    (:meth:`~quotaform.plan.model.EntityChange.between`), so the reviewed
    values, the guard rails, the manifests cross-check, the read-back and the
    AlterClientQuotas request can never disagree.

    Raises:
        PlanFileError: unreadable, not a regular file, too large, too deeply
            nested, a number too long, NaN or Infinity, not JSON; checksum
            mismatch (damaged or edited); a missing or wrong signature while
            a key is set; a ``format_version`` this quotaform does not know
            (newer); content that does not match ``schemas/planfile.schema.json``;
            an entity or quota value Kafka would reject; ``key_changes``,
            actions or the summary that do not follow from ``before``/``after``
            (every such path listed, ``path: in the file != implied``). Paths
            in messages have unprintable characters escaped.
        PlanKeyError: ``QUOTAFORM_PLAN_KEY`` is set but empty.

    ``purpose`` is the command reading the file (``apply``, ``show``,
    ``explain``, ...): only apply's refusals speak of what it would send.
    """
    shown = escape_unprintable(str(path))
    key = signing_key(env)
    document, text = _read_json(path, shown)
    if not isinstance(document, dict) or "plan" not in document or "checksum" not in document:
        raise PlanFileError(f"{shown} is not a quotaform plan file (no plan and checksum)")
    signed = _check_envelope(document, shown, key)
    try:
        doc = PlanFileDocument.model_validate(document)
    except ValidationError as exc:
        problems = _schema_problems(exc, shown, text)
        raise _refuse(shown, "not a valid quotaform plan file", problems) from None
    del text  # kept for the lines of schema errors only
    problems = _content_problems(doc.plan)
    if problems:
        raise _refuse(shown, "holds what Kafka would reject", problems)
    plan, review = plan_from_document(doc.plan)
    contradictions = _contradictions(doc.plan, plan)
    if contradictions:
        what = (
            "what apply would send does not"
            if purpose == "apply"
            else "the key changes and actions it records do not"
        )
        raise _refuse(
            shown,
            f"{what} follow from the plan's before and after values (the file was edited)",
            contradictions,
        )
    return SavedPlan(plan, review, doc.quotaform_version, signed)
