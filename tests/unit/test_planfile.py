"""Saved plan files: written, read back identically, and refused when unusable."""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from quotaform.errors import PlanFileError, PlanKeyError
from quotaform.formats.planfile import (
    ENV_PLAN_KEY,
    is_plan_file,
    read_plan_file,
    write_plan_file,
)
from quotaform.plan.differences import differences
from quotaform.render.text import render_markdown, render_text

from .builders import example_plan


@pytest.mark.parametrize("allow_deletes", [True, False])
def test_round_trip_gives_the_same_plan_and_review(tmp_path: Path, allow_deletes: bool) -> None:
    plan, review = example_plan(allow_deletes=allow_deletes)
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
    write_plan_file(*example_plan(), path)
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


# ------------------------------------------------ forged and hostile plan files
#
# Each forgery is made the way an attacker would: edit the JSON, recompute the
# (unkeyed) checksum. Each must be refused with one PlanFileError naming the
# file and the field, never a traceback, a hang or a plan that sends something
# other than what it shows.


def _forge(
    path: Path, edit: Callable[[dict[str, Any]], None], *, indent: int | None = None
) -> None:
    """Edit the plan inside ``path`` and recompute its checksum."""
    doc = json.loads(path.read_text(encoding="utf-8"))
    edit(doc["plan"])
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    doc["checksum"] = hashlib.sha256(canonical.encode()).hexdigest()
    path.write_text(json.dumps(doc, indent=indent), encoding="utf-8")


def _forged(tmp_path: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    path, _ = _saved(tmp_path)
    _forge(path, edit)
    return path


def test_key_changes_that_do_not_follow_from_before_and_after_are_refused(
    tmp_path: Path,
) -> None:
    # What apply sends (key_changes) multiplied by 1,000 while before/after,
    # which the guard rails and the reviewer see, stay as planned.
    def send_1000x(plan: dict[str, Any]) -> None:
        for change in plan["changes"]:
            for k in change["key_changes"]:
                if k["key"] == "producer_byte_rate":
                    k["after"] = k["after"] * 1000

    path = _forged(tmp_path, send_1000x)
    with pytest.raises(PlanFileError) as caught:
        read_plan_file(path)
    message = str(caught.value)
    assert "does not follow from the plan's before and after" in message
    # deepdiff names the path and both values: in the file != implied.
    assert "plan.changes[2].key_changes[1].after: 10485760000 != 10485760" in message


def test_an_action_or_summary_that_contradicts_the_changes_is_refused(tmp_path: Path) -> None:
    def relabel(plan: dict[str, Any]) -> None:
        plan["changes"][6]["action"] = "no-op"
        plan["summary"]["delete"] = 0

    with pytest.raises(PlanFileError) as caught:
        read_plan_file(_forged(tmp_path, relabel))
    message = str(caught.value)
    assert "plan.changes[6].action: 'no-op' != 'delete'" in message
    assert "plan.summary.delete: 0 != 1" in message


def test_equal_values_in_another_spelling_are_not_a_contradiction(tmp_path: Path) -> None:
    # 10485760 written as 1.048576E7, an int where the writer put a float: the
    # same float64 to Kafka, so the same plan (same_value, not text equality).
    def respell(plan: dict[str, Any]) -> None:
        plan["changes"][2]["key_changes"][1]["after"] = 10485760
        plan["changes"][2]["after"]["producer_byte_rate"] = 1.048576e7

    plan, _ = read_plan_file(_forged(tmp_path, respell))
    assert plan.changes[2].after["producer_byte_rate"] == 10485760.0


def _set_after(key: str, value: Any, index: int = 2) -> Callable[[dict[str, Any]], None]:
    def edit(plan: dict[str, Any]) -> None:
        change = plan["changes"][index]
        change["after"][key] = value
        for k in change["key_changes"]:
            if k["key"] == key:
                k["after"] = value

    return edit


@pytest.mark.parametrize(
    ("key", "value", "problem"),
    [
        ("producer_byte_rate", -1.0, "must be greater than 0"),
        ("producer_byte_rate", 0.0, "must be greater than 0"),
        ("producer_byte_rate", 1.5, "not a whole number of bytes/s"),
        ("producer_byte_rate", 1e300, "too large"),
        ("request_percentage", True, "after.request_percentage: Input should be a valid number"),
        ("connection_creation_rate", 5.0, "not valid for a user entity"),
        ("bogus_rate", 5.0, "unknown quota key 'bogus_rate'"),
    ],
)
def test_quota_values_kafka_would_reject_are_refused(
    tmp_path: Path, key: str, value: Any, problem: str
) -> None:
    path = _forged(tmp_path, _set_after(key, value))
    with pytest.raises(PlanFileError) as caught:
        read_plan_file(path)
    message = str(caught.value)
    assert f"plan.changes[2].after.{key}" in message or "plan.changes[2].after" in message
    assert problem in message
    assert str(path) in message


def test_nan_and_infinity_are_refused_with_their_line(tmp_path: Path) -> None:
    for literal in ("NaN", "Infinity", "-Infinity"):
        path, _ = _saved(tmp_path)
        text = path.read_text(encoding="utf-8").replace("10485760.0", literal, 1)
        path.write_text(text, encoding="utf-8")
        with pytest.raises(PlanFileError) as caught:
            read_plan_file(path)
        line = text[: text.index(literal)].count("\n") + 1
        assert f"{path}:{line}: {literal} is not a number JSON allows" in str(caught.value)
    # A float too large for float64 (1e999) parses as infinity: refused as a value.
    path = _forged(tmp_path, _set_after("producer_byte_rate", float("inf")))
    text = path.read_text(encoding="utf-8").replace("Infinity", "1e999")
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PlanFileError) as caught:
        read_plan_file(path)
    assert "plan.changes[2].after.producer_byte_rate: inf is not a finite number" in str(
        caught.value
    )


@pytest.mark.parametrize(
    ("entity", "problem"),
    [
        ({"user": ""}, "empty user name"),
        ({"ip": "kafka.example.com"}, "not an IPv4 or IPv6 address"),
        ({"ip": "192.0.2.0/24"}, "CIDR"),
        ({"user": "a", "ip": "192.0.2.1"}, "ip cannot be combined"),
        ({"group": "x"}, "unknown entity type 'group'"),
    ],
)
def test_entities_kafka_would_reject_are_refused(
    tmp_path: Path, entity: dict[str, Any], problem: str
) -> None:
    def edit(plan: dict[str, Any]) -> None:
        plan["changes"][3]["entity"] = entity

    with pytest.raises(PlanFileError, match=r"plan\.changes\[3\]\.entity: .*" + problem):
        read_plan_file(_forged(tmp_path, edit))


def test_an_entity_planned_twice_is_refused(tmp_path: Path) -> None:
    def twice(plan: dict[str, Any]) -> None:
        plan["changes"].append(plan["changes"][3])
        plan["summary"]["create"] += 1

    with pytest.raises(PlanFileError, match=r"plan\.changes\[7\]\.entity: .* planned twice"):
        read_plan_file(_forged(tmp_path, twice))


def test_schema_errors_name_every_field(tmp_path: Path) -> None:
    def break_two(plan: dict[str, Any]) -> None:
        plan["changes"][1]["after"]["consumer_byte_rate"] = "lots"
        plan["changes"][4]["action"] = "explode"

    with pytest.raises(PlanFileError) as caught:
        read_plan_file(_forged(tmp_path, break_two))
    message = str(caught.value)
    assert "plan.plan.changes[1].after.consumer_byte_rate" not in message
    assert "plan.changes[1].after.consumer_byte_rate: Input should be a valid number" in message
    assert "plan.changes[4].action: Input should be" in message


def test_schema_errors_are_each_named_with_their_line(tmp_path: Path) -> None:
    def break_three(plan: dict[str, Any]) -> None:
        plan["changes"][1]["after"]["consumer_byte_rate"] = "lots"
        plan["changes"][4]["action"] = "explode"
        del plan["changes"][5]["entity"]

    path, _ = _saved(tmp_path)
    _forge(path, break_three, indent=2)  # laid out as plan --out writes it
    lines = path.read_text(encoding="utf-8").splitlines()
    changes = [n for n, line in enumerate(lines, 1) if line == "      {"]  # each change's "{"
    lots = next(n for n, line in enumerate(lines, 1) if '"lots"' in line)
    explode = next(n for n, line in enumerate(lines, 1) if '"explode"' in line)
    with pytest.raises(PlanFileError) as caught:
        read_plan_file(path)
    assert str(caught.value) == (
        f"{path}: not a valid quotaform plan file: "
        f"{path}:{lots}: plan.changes[1].after.consumer_byte_rate: Input should be a valid "
        'number (got "lots"); '
        f"{path}:{explode}: plan.changes[4].action: Input should be 'create', 'update', "
        "'delete' or 'no-op' (got \"explode\"); "
        # A missing field: the line of the change that lacks it.
        f"{path}:{changes[5]}: plan.changes[5].entity: Field required. "
        "Refusing it; plan again."
    )


def test_a_deeply_nested_file_is_refused_without_a_traceback(tmp_path: Path) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"plan": ' + "[" * 100_000 + "]" * 100_000 + ', "checksum": "x"}')
    with pytest.raises(PlanFileError, match="nested too deeply"):
        read_plan_file(path)


def test_a_5000_digit_number_is_refused_with_its_line(tmp_path: Path) -> None:
    path, _ = _saved(tmp_path)
    text = path.read_text(encoding="utf-8").replace("10485760.0", "9" * 5000, 1)
    path.write_text(text, encoding="utf-8")
    with pytest.raises(PlanFileError, match=r":\d+: a number of 5000 characters: too long"):
        read_plan_file(path)


def test_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(PlanFileError, match=r"not a regular file \(a FIFO\)"):
        read_plan_file(fifo)
    assert time.monotonic() - start < 5
    with pytest.raises(PlanFileError, match=r"not a regular file \(a directory\)"):
        read_plan_file(tmp_path)


def test_a_file_name_with_a_newline_is_printed_escaped(tmp_path: Path) -> None:
    path = tmp_path / "evil\nError: all good.json"
    path.write_text('{"hello": 1}', encoding="utf-8")
    with pytest.raises(PlanFileError) as caught:
        read_plan_file(path)
    assert "\n" not in str(caught.value)
    assert "evil\\u000aError: all good.json" in str(caught.value)


def test_an_empty_signing_key_is_an_error_never_unsigned(tmp_path: Path) -> None:
    for empty in ("", "   "):
        env = {ENV_PLAN_KEY: empty}
        with pytest.raises(PlanKeyError, match="QUOTAFORM_PLAN_KEY is set but empty"):
            write_plan_file(*example_plan(), tmp_path / "p.json", env=env)
        assert not (tmp_path / "p.json").exists()
        path, _ = _saved(tmp_path)
        with pytest.raises(PlanKeyError, match="set but empty"):
            read_plan_file(path, env=env)


def test_differences_compare_numbers_by_kafkas_value_equality() -> None:
    assert differences({"a": [650, {"b": 1}]}, {"a": [6.5e2, {"b": 1.0}]}) == []
    assert differences({"a": 1, "c": "x"}, {"a": 2, "d": None}, root="r") == [
        "r.a: 1 != 2",
        "r.c: 'x' != (absent)",
        "r.d: (absent) != None",
    ]
