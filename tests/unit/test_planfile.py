"""Saved plan files: written, read back identically, and refused when unusable."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from quotaform.planfile import PlanFileError, is_plan_file, read_plan_file, write_plan_file

from .test_render import _plan


def test_round_trip_gives_the_same_plan(tmp_path: Path) -> None:
    plan = _plan()
    path = tmp_path / "plan.json"
    write_plan_file(plan, path)
    assert is_plan_file(path)
    again = read_plan_file(path)
    assert again.changes == plan.changes
    assert (again.cluster, again.cluster_id, again.deletes_allowed) == (
        plan.cluster,
        plan.cluster_id,
        plan.deletes_allowed,
    )
    assert again.summary == plan.summary


def test_manifests_and_directories_are_not_plan_files(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: quotaform.io/v1\n", encoding="utf-8")
    assert not is_plan_file(manifest)
    assert not is_plan_file(tmp_path)


def _saved(tmp_path: Path) -> tuple[Path, dict]:  # type: ignore[type-arg]
    path = tmp_path / "plan.json"
    write_plan_file(_plan(), path)
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
    assert set(doc) == {"plan", "checksum", "quotaform_version"}
    assert "bootstrap" not in text and "sasl" not in text
