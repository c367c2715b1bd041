"""``quotaform validate``: check manifests offline (exit 0 valid, 1 invalid)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quotaform.cli.options import Manifests
from quotaform.cli.output import make_console, say
from quotaform.errors import ClusterConfigError, ManifestError, ManifestProblem
from quotaform.manifest import load_manifests, manifest_clusters
from quotaform.plan.state import DesiredState

__all__ = ["register", "validate"]


def _load_for_validate(
    paths: list[Path], cluster: str | None, all_clusters: bool
) -> list[DesiredState]:
    """The set loaded for ``cluster`` (``None``: the set names one), or for
    every cluster it names, with every cluster's problems reported together."""
    if all_clusters and cluster is not None:
        raise ClusterConfigError("give --cluster or --all-clusters, not both")
    targets: list[str | None] = [cluster]
    if all_clusters:
        # A set naming no cluster falls through to load_manifests, which says so.
        targets = list(manifest_clusters(paths)) or [None]
    states: list[DesiredState] = []
    problems: list[ManifestProblem] = []
    for name in targets:
        try:
            states.append(load_manifests(paths, cluster=name))
        except ManifestError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ManifestError(sorted(set(problems), key=lambda p: p.sort_key()))
    return states


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
    states = _load_for_validate(manifests, cluster, all_clusters)
    for warning in sorted({w for desired in states for w in desired.warnings}):
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
