"""``quotaform drift``: a read-only check of the cluster against the manifests.

Exit codes (for cron jobs and alerting):

* 0: in sync: every in-scope entity matches its declaration.
* 2: drift: something in the scope is changed, missing or unexpected.
* 1: error: bad manifests or options, connection or authorization failure,
  wrong cluster id (usage errors too: see :mod:`quotaform.cli.app`).

Entities outside the scope never cause drift; they are only counted.
"""

from __future__ import annotations

from typing import Annotated

import typer

from quotaform.app.common import ConnectionOptions
from quotaform.app.drift import DriftRequest, run_drift
from quotaform.cli.options import (
    CONNECTION,
    VOLUMES,
    Manifests,
    with_connection,
    with_volumes,
)
from quotaform.cli.output import OutputFormat, emit
from quotaform.cli.view import make_view
from quotaform.errors import EXIT_CHANGES
from quotaform.formats.drift import render_drift_json
from quotaform.plan.drift import DriftReport
from quotaform.plan.facts import VolumeSource
from quotaform.render.drift import render_drift_markdown, render_drift_text

__all__ = ["drift", "register"]


Output = Annotated[
    OutputFormat,
    typer.Option(
        "--output", "-o", help="How to print the report: text, json (alerting), markdown (tickets)."
    ),
]


def _print_report(report: DriftReport, output: OutputFormat) -> None:
    emit(
        report,
        output,
        text=render_drift_text,
        markdown=render_drift_markdown,
        json=render_drift_json,
    )


@with_connection
@with_volumes
def drift(
    manifests: Manifests,
    connection: ConnectionOptions = CONNECTION,
    output: Output = OutputFormat.text,
    volumes: VolumeSource = VOLUMES,
) -> None:
    """Report how the cluster differs from the manifests; never changes it.

    Reads with a read-only client. Lists in-scope entities that are changed
    (declared and live, values differ), missing (declared, not live) or
    unexpected (live, not declared); counts live entities outside the scope.

    Exit codes: 0 in sync, 2 drift found, 1 error.
    """
    report = run_drift(
        DriftRequest(
            tuple(manifests),
            connection=connection,
            volumes=volumes,
            view=make_view(),
        )
    )
    _print_report(report, output)
    if not report.in_sync:
        raise typer.Exit(EXIT_CHANGES)


def register(app: typer.Typer) -> None:
    """Add ``drift`` to ``app``."""
    app.command()(drift)
