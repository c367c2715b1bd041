"""Saved plan files: written, read back identically, and refused when unusable."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from quotaform.errors import PlanFileError
from quotaform.formats.planfile import is_plan_file, read_plan_file, write_plan_file
from quotaform.render.text import render_markdown, render_text

from .test_render import _plan


@pytest.mark.parametrize("allow_deletes", [True, False])
def test_round_trip_gives_the_same_plan_and_review(tmp_path: Path, allow_deletes: bool) -> None:
    plan, review = _plan(allow_deletes=allow_deletes)
    path = tmp_path / "plan.json"
    write_plan_file(plan, review, path)
    assert is_plan_file(path)
    again, again_review = read_plan_file(path)
    assert again.changes == plan.changes
    assert (again.cluster, again.cluster_id, again.warnings) == (
        plan.cluster,
        plan.cluster_id,
        plan.warnings,
    )
    assert again.summary == plan.summary
    # The review round-trips: fallbacks as data, blocked deletes, violations.
    assert again_review.fallbacks == review.fallbacks and review.fallbacks
    assert again_review.violations == review.violations
    assert again_review.deletes_allowed == review.deletes_allowed
    # So a saved plan renders exactly like the plan it was made from.
    assert render_text(again, again_review).plain == render_text(plan, review).plain
    assert render_markdown(again, again_review) == render_markdown(plan, review)


def test_manifests_and_directories_are_not_plan_files(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: quotaform.io/v1\n", encoding="utf-8")
    assert not is_plan_file(manifest)
    assert not is_plan_file(tmp_path)


def _saved(tmp_path: Path) -> tuple[Path, dict]:  # type: ignore[type-arg]
    path = tmp_path / "plan.json"
    write_plan_file(*_plan(), path)
    return path, json.loads(path.read_text(encoding="utf-8"))


def test_an_edited_value_is_refused_as_damaged(tmp_path: Path) -> None:
    path, doc = _saved(tmp_path)
    doc["plan"]["changes"][1]["after"]["producer_byte_rate"] = 1.0
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(PlanFileError, match="damaged or was edited"):
        read_plan_file(path)


def test_a_truncated_file_is_refused(tmp_path: Path) -> None:
    path, _ = _saved(tmp_path)
    path.write_text(path.read_text(encoding="utf-8")[:200], encoding="utf-8")
    with pytest.raises(PlanFileError, match="not JSON"):
        read_plan_file(path)


def test_a_newer_format_version_is_refused(tmp_path: Path) -> None:
    path, doc = _saved(tmp_path)
    doc["plan"]["format_version"] = 2
    path.write_text(json.dumps(doc), encoding="utf-8")
    with pytest.raises(PlanFileError, match=r"format_version 2.*upgrade quotaform"):
        read_plan_file(path)


def test_a_json_file_that_is_no_plan_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "x.json"
    path.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(PlanFileError, match="not a quotaform plan file"):
        read_plan_file(path)


def test_the_plan_file_holds_no_connection_settings(tmp_path: Path) -> None:
    path, doc = _saved(tmp_path)
    text = path.read_text(encoding="utf-8")
    assert set(doc) == {"format_version", "plan", "checksum", "quotaform_version"}
    assert "bootstrap" not in text and "sasl" not in text


def test_the_plan_file_has_a_schema_of_its_own(tmp_path: Path) -> None:
    # The saved file is an envelope around the plan: it validates against
    # planfile.schema.json, and its "plan" against plan.schema.json.
    _, doc = _saved(tmp_path)
    schemas = Path(__file__).resolve().parents[2] / "schemas"
    planfile = json.loads((schemas / "planfile.schema.json").read_text(encoding="utf-8"))
    plan = json.loads((schemas / "plan.schema.json").read_text(encoding="utf-8"))
    assert list(jsonschema.Draft202012Validator(planfile).iter_errors(doc)) == []
    assert list(jsonschema.Draft202012Validator(plan).iter_errors(doc["plan"])) == []
    assert list(jsonschema.Draft202012Validator(plan).iter_errors(doc)) != []
