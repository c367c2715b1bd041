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
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quotaform.errors import PlanFileError
from quotaform.formats.plan import PlanDocument, plan_data, plan_from_document
from quotaform.plan.model import PLAN_FORMAT_VERSION, Plan
from quotaform.plan.review import PlanReview

__all__ = [
    "ENV_PLAN_KEY",
    "PLANFILE_FORMAT_VERSION",
    "PlanFileDocument",
    "SavedPlan",
    "is_plan_file",
    "load_saved_plan",
    "read_plan_file",
    "write_plan_file",
]

#: The environment variable holding the plan-signing key (any string).
ENV_PLAN_KEY = "QUOTAFORM_PLAN_KEY"
_SIGNATURE_ALG = "HMAC-SHA256"
#: Version of the saved-plan file's own envelope (the plan inside has its own).
PLANFILE_FORMAT_VERSION = 1


class SignatureDoc(BaseModel):
    """An HMAC of the file's body, made with ``QUOTAFORM_PLAN_KEY``."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)
    alg: Literal["HMAC-SHA256"]
    value: str = Field(description="Hex digest over the canonical JSON of the body.")


class PlanFileDocument(BaseModel):
    """A saved plan file (``plan --out FILE``)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True)
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


def _key(env: dict[str, str] | None) -> bytes | None:
    value = (os.environ if env is None else env).get(ENV_PLAN_KEY)
    return value.encode("utf-8") if value else None


def _sign(key: bytes, body: dict[str, Any]) -> str:
    return hmac.new(key, _canonical(body), hashlib.sha256).hexdigest()


def _canonical(data: Mapping[str, Any]) -> bytes:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def write_plan_file(
    plan: Plan, review: PlanReview, path: str | Path, *, env: dict[str, str] | None = None
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
    key = _key(env)
    if key is not None:
        body["signature"] = {"alg": _SIGNATURE_ALG, "value": _sign(key, body)}
    document = {**body, "checksum": hashlib.sha256(_canonical(body)).hexdigest()}
    Path(path).write_text(json.dumps(document, indent=2, ensure_ascii=False) + "\n", "utf-8")
    return key is not None


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


def read_plan_file(
    path: str | Path, *, env: dict[str, str] | None = None
) -> tuple[Plan, PlanReview]:
    """``(plan, review)`` of :func:`load_saved_plan`.

    Raises:
        PlanFileError: as :func:`load_saved_plan`.
    """
    saved = load_saved_plan(path, env=env)
    return saved.plan, saved.review


def load_saved_plan(path: str | Path, *, env: dict[str, str] | None = None) -> SavedPlan:
    """Load a saved plan and the review it was saved with (the review is for
    showing the plan; apply judges the plan again).

    With ``QUOTAFORM_PLAN_KEY`` set (in ``env``, default ``os.environ``) the
    file must carry a valid signature made with that key.

    Raises:
        PlanFileError: unreadable, not JSON, checksum mismatch (damaged or
            edited), a missing or wrong signature while a key is set, a
            ``format_version`` this quotaform does not know (newer),
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
    envelope = body.get("format_version", PLANFILE_FORMAT_VERSION)
    if isinstance(envelope, int) and envelope > PLANFILE_FORMAT_VERSION:
        raise PlanFileError(
            f"{where} is a plan file of format_version {envelope}, written by quotaform "
            f"{body.get('quotaform_version', '?')}; this quotaform reads version "
            f"{PLANFILE_FORMAT_VERSION}: upgrade quotaform or plan again"
        )
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
    key = _key(env)
    signed = isinstance(body.get("signature"), dict)
    if key is not None:
        signature = body.pop("signature", None)
        value = signature.get("value") if isinstance(signature, dict) else None
        if not isinstance(value, str):
            raise PlanFileError(
                f"{where} is not signed, but {ENV_PLAN_KEY} is set: refusing a plan the "
                "plan job did not sign"
            )
        if not hmac.compare_digest(value, _sign(key, body)):
            raise PlanFileError(
                f"{where} has a signature that does not match {ENV_PLAN_KEY}: it was "
                "edited or signed with another key; refusing it"
            )
    try:
        doc = PlanFileDocument.model_validate(document)
    except ValidationError as exc:
        raise PlanFileError(f"{where} is not a valid quotaform plan file: {exc}") from exc
    plan, review = plan_from_document(doc.plan)
    return SavedPlan(plan, review, doc.quotaform_version, signed)
