"""Issue 23 (explain, describe, show): mistakes are not answered silently,
explain reads at 80 columns, and the flags and refusals speak one language."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from quotaform.cli.app import app

from .test_planfile import _forged

runner = CliRunner()
MANIFESTS = Path(__file__).resolve().parents[2] / "examples" / "manifests"


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


def test_show_refuses_a_forged_plan_without_speaking_of_apply(tmp_path: Path) -> None:
    path = _forged(tmp_path, _send_1000x)
    shown = runner.invoke(app, ["show", str(path)])
    assert shown.exit_code == 1
    assert "follow from the plan's before and after" in shown.output
    assert "apply would send does not" not in shown.output
    assert "the key changes and actions it records do not follow" in shown.output
