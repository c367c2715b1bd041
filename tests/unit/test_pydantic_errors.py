"""The one translator of pydantic's errors (every error, with file, line and
field path, in the wording its file's readers need) and the JSON line
locator saved plans use with it."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from quotaform.inputs.jsonsource import json_lines
from quotaform.inputs.yamlsource import compose_documents, locate
from quotaform.manifest.pydantic_errors import SCHEMA_WORDS, Loc, Wording, validation_problems
from tests.unit.builders import data_paths


class _Volume(BaseModel):
    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    capacity: int = Field(ge=0)


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")
    kind: Literal["disk"]
    volumes: list[_Volume]
    token: str


BAD = {"kind": "tape", "volumes": [{"name": "", "capacity": -1, "size": 1}]}
LINES = {(): 1, ("kind",): 1, ("volumes",): 2, ("volumes", 0): 3, ("volumes", 0, "name"): 4}


def _error() -> ValidationError:
    with pytest.raises(ValidationError) as caught:
        _Record.model_validate(BAD)
    return caught.value


def _by_line(loc: Loc) -> tuple[int | None, str]:
    """Lines from a table; a location not in it at its nearest parent's."""
    for n in range(len(loc), -1, -1):
        if loc[:n] in LINES:
            return LINES[loc[:n]], ".".join(map(str, loc))
    return None, ".".join(map(str, loc))


def _fields(loc: Loc) -> list[str] | None:
    return ["name", "capacity"] if loc[-1:] == (0,) else None


def test_every_error_is_reported_in_order_with_its_file_and_line() -> None:
    problems = validation_problems(
        _error(), "r.json", locate=_by_line, wording=Wording(fields=_fields)
    )
    assert [str(p) for p in problems] == [
        "r.json:1: kind: expected 'disk', got \"tape\"",
        "r.json:4: volumes.0.name: must not be empty",
        # No line of its own in the table: its nearest parent's.
        "r.json:3: volumes.0.capacity: Input should be greater than or equal to 0 (got -1)",
        "r.json:3: volumes.0.size: unknown field 'size': allowed: name, capacity",
        "r.json:1: token: required field is missing",
    ]


def test_without_input_no_value_is_quoted_back() -> None:
    wording = Wording(show_input=False, fields=_fields)
    problems = validation_problems(_error(), "r.json", locate=_by_line, wording=wording)
    assert [p.message for p in problems] == [
        "expected 'disk'",
        "must not be empty",
        "Input should be greater than or equal to 0",
        "unknown field: allowed: name, capacity",
        "required field is missing",
    ]


def test_schema_words_are_pydantic_s_with_the_value_given() -> None:
    problems = validation_problems(_error(), "r.json")  # no locator: no lines
    assert [str(p) for p in problems] == [
        "r.json: kind: Input should be 'disk' (got \"tape\")",
        'r.json: volumes[0].name: String should have at least 1 character (got "")',
        "r.json: volumes[0].capacity: Input should be greater than or equal to 0 (got -1)",
        "r.json: volumes[0].size: Extra inputs are not permitted (got 1)",
        "r.json: token: Field required",  # not the whole record it is missing from
    ]
    assert SCHEMA_WORDS.readable is False


def test_a_part_validated_alone_is_reported_where_it_sits() -> None:
    with pytest.raises(ValidationError) as caught:
        _Volume.model_validate({"name": "", "capacity": "x"})
    seen: list[Loc] = []

    def where(loc: Loc) -> tuple[int | None, str]:
        seen.append(loc)
        return 7, ".".join(map(str, loc))

    problems = validation_problems(
        caught.value, "r.json", locate=where, at=("volumes", 3), skip=lambda loc: "name" in loc
    )
    assert seen == [("volumes", 3, "capacity")]
    assert [str(p) for p in problems] == [
        "r.json:7: volumes.3.capacity: Input should be a valid integer, unable to parse string "
        'as an integer (got "x")'
    ]


def test_a_caller_s_own_words_come_first() -> None:
    def special(loc: Loc, error: Any) -> str | None:
        return "a volume needs a name" if loc[-1:] == ("name",) else None

    wording = Wording(special=special)
    messages = [p.message for p in validation_problems(_error(), "r", wording=wording)]
    assert messages[1] == "a volume needs a name"
    assert messages[0] == "expected 'disk', got \"tape\""


# ----------------------------------------------------------------- JSON lines


DOCUMENT = {
    "a": [1, {"b": 'x"]}{[', "c": [[], {}, [1, 2]]}, "s"],
    "d": {"e": None, "f": True, "g": -1.5e3},
    "h": "\\",
    "é\n": {"k": []},
    "z": 1,
}


@pytest.mark.parametrize("indent", [None, 2, 4])
def test_json_lines_agree_with_the_yaml_node_tree(indent: int | None) -> None:
    # JSON is YAML: the YAML reader's node marks are the reference.
    text = json.dumps(DOCUMENT, indent=indent, ensure_ascii=indent == 4)
    ((_, node),) = compose_documents(text)
    locs = [*data_paths(DOCUMENT), ("a", 1, "missing"), ("missing",), ("a", 9)]
    together = json_lines(text, locs)
    for loc in locs:
        alone = json_lines(text, [loc])  # everything else skipped
        assert together(loc) == alone(loc) == locate(node, loc)[0], loc


def test_json_lines_never_fail_on_text_that_is_not_json() -> None:
    for text in ["[1, : 2]", '{"a": ', '{"a" 1}', "", "[", '["abc', "{,}", "[1 2]"]:
        assert json_lines(text, [("a", 0), (1,)])(("a", 0)) in (None, 1)
