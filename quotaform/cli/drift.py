"""``quotaform drift``: a read-only check of the cluster against the manifests.

Exit codes (for cron jobs and alerting):

* 0: in sync: every in-scope entity matches its declaration.
* 2: drift: something in the scope is changed, missing or unexpected.
* 1: error: bad manifests or options, connection or authorization failure,
  wrong cluster id. Usage errors exit 1 too (click's usual 2 would read as
  drift).

Entities outside the scope never cause drift; they are only counted.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from typer.core import TyperCommand
from typer.exceptions import TyperException

from quotaform.cli.options import (
    BootstrapServer,
    ClusterOption,
    CommandConfig,
    ConfigOption,
    Manifests,
    target,
)
from quotaform.cli.output import OutputFormat, emit
from quotaform.cluster.connect import connect
from quotaform.errors import EXIT_CHANGES, EXIT_ERROR
from quotaform.formats.drift import render_drift_json
from quotaform.manifest import load_manifests
from quotaform.plan.drift import DriftReport
from quotaform.render.drift import render_drift_markdown, render_drift_text
from quotaform.workflow import detect_drift

__all__ = ["drift", "register"]

_USAGE_ERROR = 2

Output = Annotated[
    OutputFormat,
    typer.Option(
        "--output", "-o", help="How to print the report: text, json (alerting), markdown (tickets)."
    ),
]


class _DriftCommand(TyperCommand):
    """Makes usage errors exit 1: 2 is reserved for "drift found"."""

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return super().make_context(*args, **kwargs)
        except TyperException as exc:
            # click's usage errors (missing argument, unknown option, bad value)
            if exc.exit_code == _USAGE_ERROR:
                exc.exit_code = EXIT_ERROR
            raise


def _print_report(report: DriftReport, output: OutputFormat) -> None:
    emit(
        report,
        output,
        text=render_drift_text,
        markdown=render_drift_markdown,
        json=render_drift_json,
    )


def drift(
    manifests: Manifests,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    output: Output = OutputFormat.text,
) -> None:
    """Report how the cluster differs from the manifests; never changes it.

    Reads with a read-only client. Lists in-scope entities that are changed
    (declared and live, values differ), missing (declared, not live) or
    unexpected (live, not declared); counts live entities outside the scope.

    Exit codes: 0 in sync, 2 drift found, 1 error.
    """
    where = target(cluster, config, bootstrap_server, command_config)
    desired = load_manifests(manifests, cluster=where.cluster)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        report = detect_drift(desired, client)
    _print_report(report, output)
    if not report.in_sync:
        raise typer.Exit(EXIT_CHANGES)


def register(app: typer.Typer) -> None:
    """Add ``drift`` to ``app``."""
    app.command(cls=_DriftCommand)(drift)
