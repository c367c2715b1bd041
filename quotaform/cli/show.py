"""``quotaform show PLANFILE``: print a saved plan (like ``terraform show``).

Offline: no connection is made. The file is checked as apply checks it
(checksum; the signature when ``QUOTAFORM_PLAN_KEY`` is set), so what is shown
is what ``apply PLANFILE`` would apply. ``-o json`` prints the plan document
(``schemas/plan.schema.json``), the same shape as ``plan -o json``.

Exit codes: 0 shown, 1 unreadable, damaged, unsigned while a key is set, or
from a newer quotaform.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quotaform.cli.options import Output
from quotaform.cli.output import OutputFormat, make_console, say
from quotaform.cli.plan import print_plan
from quotaform.formats.planfile import load_saved_plan

__all__ = ["register", "show"]


def show(
    planfile: Annotated[
        Path,
        typer.Argument(
            help="A plan file saved by `quotaform plan --out FILE`.",
            metavar="PLANFILE",
            show_default=False,
        ),
    ],
    output: Output = OutputFormat.text,
) -> None:
    """Print a saved plan file: its changes, guard-rail verdicts and origin.

    The review shown is the one saved with the plan; apply judges the plan
    again with its own flags and the manifests given to it.
    """
    saved = load_saved_plan(planfile, purpose="show")
    plan = saved.plan
    say(
        make_console(stderr=True),
        f"Saved plan {planfile}: cluster {plan.cluster!r} (id {plan.cluster_id}), written by "
        f"quotaform {saved.quotaform_version}, {'signed' if saved.signed else 'not signed'}.",
    )
    print_plan(plan, saved.review, output)


def register(app: typer.Typer) -> None:
    """Add ``show`` to ``app``."""
    app.command()(show)
