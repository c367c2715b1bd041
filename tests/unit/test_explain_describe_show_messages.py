"""explain, describe and show: mistakes are not answered silently,
explain reads at 80 columns, and the flags and refusals speak one language."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.errors import PlanFileError
from quotaform.formats.planfile import read_plan_file, write_plan_file
from quotaform.kafka.entity import Entity
from quotaform.kafka.resolution import Principal, QuotaIndex
from quotaform.plan.explain import explain
from quotaform.render.explain import render_explain_markdown, render_explain_text

from .builders import desired_state, example_plan, reviewed

runner = CliRunner()
MANIFESTS = Path(__file__).resolve().parents[2] / "examples" / "manifests"
KiB, MiB = 1024.0, 1024.0 * 1024


def _flat(text: str) -> str:
    """``text`` with its wrapping undone (every run of whitespace one space)."""
    return " ".join(text.split())


def _saved_plan(
    tmp_path: Path, live: dict[Entity, dict[str, float]], add: dict[Entity, dict[str, float]]
) -> Path:
    plan, review = reviewed(desired_state({**live, **add}), live)
    path = tmp_path / "plan.json"
    write_plan_file(plan, review, path)
    return path


# ----------------------------------------------------------------- 9: no silent answers


def test_explaining_manifests_notes_that_the_bootstrap_server_is_not_used() -> None:
    args = ["explain", str(MANIFESTS), "--user", "svc-payments-api", "--client-id", "payments-api"]
    result = runner.invoke(app, [*args, "--bootstrap-server", "127.0.0.1:1"])
    assert result.exit_code == 0, result.output
    assert result.stderr == (
        "Note: explaining the manifests offline; --bootstrap-server is not used (drop the "
        "manifests to ask the live cluster)\n"
    )
    assert "Note:" not in result.stdout
    quiet = runner.invoke(app, args)
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_explaining_a_saved_plan_notes_the_unused_connection_options(tmp_path: Path) -> None:
    path = _saved_plan(tmp_path, {}, {Entity.of(user=None): {"producer_byte_rate": MiB}})
    result = runner.invoke(
        app, ["explain", "--plan", str(path), "--user", "u", "--bootstrap-server", "h:9092"]
    )
    assert result.exit_code == 0, result.output
    assert "Note: explaining the saved plan offline; --bootstrap-server is not used" in (
        result.stderr
    )


def test_a_saved_plan_shows_the_overridden_entries_in_text_and_markdown(tmp_path: Path) -> None:
    live = {Entity.of(client_id=None): {"producer_byte_rate": 256 * KiB}}
    path = _saved_plan(tmp_path, live, {Entity.of(user=None): {"producer_byte_rate": 512 * KiB}})
    args = ["explain", "--plan", str(path), "--user", "ANONYMOUS", "--client-id", "app"]
    overridden = "* overridden: client-id=<default> 256KiB (level 8 {client-id=<default>})"
    as_json = json.loads(runner.invoke(app, [*args, "--include-overrides", "-o", "json"]).stdout)
    assert as_json["quotas"]["producer_byte_rate"]["overridden"][0]["level"] == 8
    text = runner.invoke(app, [*args, "--include-overrides"])
    assert text.exit_code == 0, text.output
    assert overridden in _flat(text.stdout)
    markdown = runner.invoke(app, [*args, "--include-overrides", "-o", "markdown"]).stdout
    assert "<br>* overridden: client-id=&lt;default&gt; 256KiB (level 8" in markdown
    assert "overridden" not in runner.invoke(app, args).stdout


def test_a_name_no_entry_gives_gets_a_hint_with_the_closest_match() -> None:
    args = ["explain", str(MANIFESTS), "--user", "svc-paymnts-api", "--client-id", "payments-api"]
    text = _flat(runner.invoke(app, args).stdout)
    assert (
        'Hint: no entry names user "svc-paymnts-api"; the answer comes from defaults '
        '(entries name users "svc-payments-api",'
    ) in text
    assert 'closest match "svc-payments-api"' in text
    assert "no entry names client-id" not in text  # payments-api is named
    markdown = runner.invoke(app, [*args, "-o", "markdown"]).stdout
    assert '> Hint: no entry names user "svc-paymnts-api"' in markdown
    doc = json.loads(runner.invoke(app, [*args, "-o", "json"]).stdout)
    (unnamed,) = doc["unnamed"]
    assert (unnamed["entity_type"], unnamed["name"]) == ("user", "svc-paymnts-api")
    assert unnamed["closest"][0] == "svc-payments-api"
    assert unnamed["hint"].startswith('no entry names user "svc-paymnts-api"')
    right = ["explain", str(MANIFESTS), "--user", "svc-payments-api", "-o", "json"]
    assert json.loads(runner.invoke(app, right).stdout)["unnamed"] == []


# ----------------------------------------------------------------- 10: readable at 80 columns


def test_explain_text_wraps_at_80_columns_keeping_the_indent() -> None:
    args = ["explain", str(MANIFESTS), "--user", "svc-payments-api", "--include-overrides"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert max(len(line) for line in lines) <= 80
    _header, *body = lines
    assert all(line == "" or line.startswith(("  ", "Hint: ")) for line in body)
    # a continuation sits deeper than the text it continues
    assert "\n                              client-id=<default>\n" in result.stdout
    # a level is never split
    assert "\n                              (level 2 {user=U, client-id=<default>})\n" in (
        result.stdout
    )
    assert _flat(result.stdout).count("quota group user=svc-payments-api") == 3


def test_a_value_change_shows_its_unchanged_source_once(tmp_path: Path) -> None:
    live = {Entity.of(user=None): {"producer_byte_rate": MiB}}
    path = tmp_path / "plan.json"
    plan, review = reviewed(
        desired_state({Entity.of(user=None): {"producer_byte_rate": 2 * MiB}}), live
    )
    write_plan_file(plan, review, path)
    args = ["explain", "--plan", str(path), "--user", "u", "--client-id", "c"]
    text = _flat(runner.invoke(app, args).stdout)
    assert (
        "~ producer_byte_rate 1MiB -> 2MiB from user=<default> (level 6 {user=<default>}), "
        "source unchanged"
    ) in text
    assert text.count("from user=<default>") == 1


CONFIG = {
    Entity.of(user="svc-a", client_id=None): {"producer_byte_rate": 10 * MiB},
    Entity.of(user="svc-a", client_id="batch"): {"producer_byte_rate": 3 * MiB},
}


def test_a_key_nobody_sets_does_not_name_a_quota_group_it_has_not() -> None:
    explanation = explain(QuotaIndex(CONFIG), Principal(user="svc-a", client_id="y"))
    text = _flat(render_explain_text(explanation, where="t").plain)
    assert (
        "controller_mutation_rate unlimited no quota group: no entity sets this key for "
        "anyone, so the broker keeps no sensor for it"
    ) in text
    assert "client-id=y: no quota group" not in text
    markdown = render_explain_markdown(explanation, where="t")
    assert "client-id=y: no quota group" not in markdown


def test_an_unknown_client_id_says_plainly_who_gets_what() -> None:
    explanation = explain(QuotaIndex(CONFIG), Principal(user="svc-a"))
    text = _flat(render_explain_text(explanation, where="t").plain)
    assert (
        "depends on the client-id: the value above is for client ids without entries of "
        "their own. Client ids with entries of their own get these instead: "
        'user="svc-a", client-id="batch" 3MiB (level 1 {user=U, client-id=C})'
    ) in text
    assert "apply instead to the names they give" not in text


# ----------------------------------------------------------------- 12: flags and refusals


def test_describe_accepts_client_id_as_explain_spells_it() -> None:
    # Refused before any connection: both a name and the defaults for one type.
    for spelling in ("--client", "--client-id"):
        result = runner.invoke(app, ["describe", spelling, "app", "--client-defaults"])
        assert result.exit_code == 1, result.output
        assert "give a client-id name or its defaults option, not both" in result.output


def _send_1000x(plan: dict[str, Any]) -> None:
    for change in plan["changes"]:
        for k in change["key_changes"]:
            if k["key"] == "producer_byte_rate":
                k["after"] = k["after"] * 1000


def _forged_1000x(tmp_path: Path) -> Path:
    """A saved plan whose key changes send 1,000 times the reviewed after
    values, its (unkeyed) checksum recomputed as an attacker would."""
    path = tmp_path / "plan.json"
    write_plan_file(*example_plan(), path)
    doc = json.loads(path.read_text(encoding="utf-8"))
    _send_1000x(doc["plan"])
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    doc["checksum"] = hashlib.sha256(canonical.encode()).hexdigest()
    path.write_text(json.dumps(doc), encoding="utf-8")
    return path


def test_show_refuses_a_forged_plan_without_speaking_of_apply(tmp_path: Path) -> None:
    path = _forged_1000x(tmp_path)
    shown = runner.invoke(app, ["show", str(path)])
    assert shown.exit_code == 1
    assert "follow from the plan's before and after" in shown.output
    assert "apply would send does not" not in shown.output
    assert "the key changes and actions it records do not follow" in shown.output


def test_apply_keeps_its_own_wording_for_a_forged_plan(tmp_path: Path) -> None:
    with pytest.raises(PlanFileError) as caught:
        read_plan_file(_forged_1000x(tmp_path))
    assert "what apply would send does not follow from the plan's before and after" in str(
        caught.value
    )
