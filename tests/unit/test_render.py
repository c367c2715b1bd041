"""Renderings of one plan, compared with golden files.

Regenerate after an intended change with
``QUOTAFORM_UPDATE_GOLDEN=1 pytest tests/unit/test_render.py`` and review the diff.
"""

from __future__ import annotations

import io
import json

import pytest
from rich.console import Console

from quotaform.cli.output import print_text
from quotaform.formats.plan import PlanDocument, render_json
from quotaform.formats.schemas import SCHEMAS
from quotaform.kafka.entity import Entity
from quotaform.plan.state import Scope, ScopeRule
from quotaform.render.text import render_markdown, render_text

from .builders import (
    Golden,
    assert_plan_data_is_its_model,
    desired_state,
    example_plan,
    reviewed,
)


def test_text_plain(golden: Golden) -> None:
    golden("plan.txt", render_text(*example_plan()).plain)


def test_text_on_a_terminal_has_colour() -> None:
    console = Console(force_terminal=True, color_system="standard", width=120, record=True)
    console.print(render_text(*example_plan()))
    assert "\x1b[" in console.export_text(styles=True)


def test_text_styles(golden: Golden) -> None:
    # Every span's style, as a terminal shows it (the golden file was made by
    # the Text.append renderer that _TextBuilder replaced: byte for byte).
    shown = []
    for allow in (True, False):
        console = Console(
            force_terminal=True,
            color_system="standard",
            width=200,
            record=True,
            file=io.StringIO(),
            soft_wrap=True,
            markup=False,
            highlight=False,
        )
        console.print(render_text(*example_plan(allow_deletes=allow)))
        shown.append(console.export_text(styles=True))
    golden("plan_styled.ansi", "\n".join(shown))


@pytest.mark.parametrize("allow_deletes", [True, False])
def test_plain_printing_is_what_rich_prints(allow_deletes: bool) -> None:
    # Without colour print_text writes .plain itself; rich would write the same.
    text = render_text(*example_plan(allow_deletes=allow_deletes))
    printed = []
    for printer in (lambda c, t: c.print(t), print_text):
        out = io.StringIO()
        console = Console(
            file=out, color_system=None, markup=False, highlight=False, soft_wrap=True
        )
        printer(console, text)
        printed.append(out.getvalue())
    assert printed[0] == printed[1]
    assert printed[1].endswith("\n") and "\x1b" not in printed[1]


def test_markdown(golden: Golden) -> None:
    golden("plan.md", render_markdown(*example_plan()))


def test_json(golden: Golden) -> None:
    golden("plan.json", render_json(*example_plan()))


def test_json_round_trips_through_its_model() -> None:
    text = render_json(*example_plan())
    doc = PlanDocument.model_validate_json(text)
    assert doc.summary.create == 4
    data = json.loads(text)
    assert data["format_version"] == 1
    first = data["changes"][0]
    assert set(first) >= {"entity", "action", "before", "after"}
    assert data["changes"][0]["entity"] == {"user": None}


@pytest.mark.parametrize("allow_deletes", [True, False])
def test_plan_data_is_exactly_the_models_dump(allow_deletes: bool) -> None:
    # refused (violations with fallbacks), deletes, defaults, outside-scope entities
    assert_plan_data_is_its_model(*example_plan(allow_deletes=allow_deletes))


def test_empty_plan_says_so_in_one_sentence() -> None:
    plan, review = reviewed(
        desired_state({}, cluster="sandbox", scope=Scope((ScopeRule.build(("user",)),))), {}
    )
    text = render_text(plan, review).plain
    assert "No changes. The cluster matches the manifests (0 entities in scope)." in text
    assert "No changes." in render_markdown(plan, review)


@pytest.mark.parametrize("render", [render_markdown, lambda p, r: render_text(p, r).plain])
def test_blocked_deletes_stand_out(render) -> None:  # type: ignore[no-untyped-def]
    out = render(*example_plan(allow_deletes=False))
    assert "deletes are not allowed" in out
    assert "delete" in out.lower()


def test_plan_schema_accepts_a_plan_and_rejects_a_bad_action() -> None:
    import jsonschema

    schema = SCHEMAS["plan.schema.json"]()
    jsonschema.validate(json.loads(render_json(*example_plan())), schema)
    broken = json.loads(render_json(*example_plan()))
    broken["changes"][0]["action"] = "replace"
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(broken, schema)


def test_a_refused_plan_reads_the_same_in_text_and_markdown(golden: Golden) -> None:
    # The reason and the flag, in every rendering (golden files), and the JSON data.
    plan, review = example_plan(allow_deletes=False)
    golden("plan_refused.txt", render_text(plan, review).plain)
    golden("plan_refused.md", render_markdown(plan, review))
    flags = "After review, allow it with: --allow-deletes (on plan and apply)."
    assert flags in render_text(plan, review).plain
    assert flags in render_markdown(plan, review)
    data = json.loads(render_json(plan, review))
    assert (data["refused"], data["allow_flags"]) == (True, ["--allow-deletes"])


def test_markdown_escapes_default_and_folds_long_plans() -> None:
    text = render_markdown(*example_plan())
    # Outside code spans "<default>" would vanish as an HTML tag on GitHub.
    outside_code = "".join(part for i, part in enumerate(text.split("`")) if i % 2 == 0)
    assert "<default>" not in outside_code
    assert "&lt;default&gt;" in outside_code
    assert "<details>" not in text
    many = {Entity.of(user=f"u{i:02d}"): {"producer_byte_rate": 1024.0} for i in range(25)}
    long_plan = reviewed(desired_state(many, cluster="sandbox"), {})
    folded = render_markdown(*long_plan)
    assert "<details>" in folded and "</details>" in folded

