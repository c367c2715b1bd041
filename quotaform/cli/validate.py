"""``quotaform validate``: check manifests offline (exit 0 valid, 1 invalid)."""

from __future__ import annotations

from typing import Annotated

import typer

from quotaform.app.validate import ValidateRequest, run_validate
from quotaform.cli.options import Manifests
from quotaform.cli.output import make_console, say

__all__ = ["register", "validate"]


def validate(
    manifests: Manifests,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Validate the set for this cluster (documents naming it, and shared "
            "ones); needed when the set names several clusters.",
            show_default=False,
        ),
    ] = None,
    all_clusters: Annotated[
        bool,
        typer.Option("--all-clusters", help="Validate the set for every cluster it names."),
    ] = False,
) -> None:
    """Check manifests offline: syntax, fields, quota values, scope. No RPC."""
    err = make_console(stderr=True)
    states = run_validate(ValidateRequest(tuple(manifests), cluster, all_clusters))
    # Each set's warnings are sorted by file and line; a warning of several sets once.
    for warning in dict.fromkeys(w for desired in states for w in desired.warnings):
        say(err, warning, style="yellow", prefix="Warning: ")
    for desired in states:
        say(
            make_console(),
            f"Valid: {len(desired.entities)} entities for cluster {desired.cluster!r} "
            f"in {len(desired.scope.rules)} scope rule(s).",
        )


def register(app: typer.Typer) -> None:
    """Add ``validate`` to ``app``."""
    app.command()(validate)
