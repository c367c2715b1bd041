"""Options shared by several commands: cluster selection (``--cluster``,
``--config``, ``--all-clusters``; resolve with
:func:`quotaform.clusters.resolve_target`) and the change budget of ``plan`` /
``apply`` (``--max-deletes`` ..., ``--allow-relax``; see ``quotaform.guards``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quotaform.clusters import DEFAULT_CONFIG_FILE, ENV_CONFIG

__all__ = [
    "AllClustersOption",
    "AllowDefaultRemovalOption",
    "AllowMassDeleteOption",
    "AllowRelaxOption",
    "ClusterOption",
    "ConfigOption",
    "MaxDeleteFractionOption",
    "MaxDeletesOption",
    "MaxRelaxFactorOption",
]

ClusterOption = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        help="Target this cluster: connect with its profile from the cluster profiles "
        "file and load the manifests for it (documents naming it, and shared ones). "
        "Not with --bootstrap-server / --command-config.",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar=ENV_CONFIG,
        help=f"Cluster profiles file (default: ./{DEFAULT_CONFIG_FILE}). Holds no "
        "secrets: profiles name environment variables or files instead.",
        show_default=False,
    ),
]
AllClustersOption = Annotated[
    bool,
    typer.Option(
        "--all-clusters",
        help="Plan every cluster the manifests name, each with its profile, as one "
        "report. A cluster that fails is reported and the others still run.",
    ),
]


MaxDeletesOption = Annotated[
    int | None,
    typer.Option(
        "--max-deletes",
        min=0,
        help="Refuse a plan deleting more entities than this (overrides "
        "spec.changeBudget.maxDeletes).",
        show_default=False,
    ),
]
MaxDeleteFractionOption = Annotated[
    float | None,
    typer.Option(
        "--max-delete-fraction",
        min=0.0,
        max=1.0,
        help="Refuse a plan deleting more than this share of the managed entities, e.g. 0.1.",
        show_default=False,
    ),
]
MaxRelaxFactorOption = Annotated[
    float | None,
    typer.Option(
        "--max-relax-factor",
        min=1.0,
        help="Refuse a plan raising a quota by more than this factor (default 10; a "
        "removal to unlimited always exceeds it).",
        show_default=False,
    ),
]
AllowMassDeleteOption = Annotated[
    bool, typer.Option("--allow-mass-delete", help="Allow deletes beyond the budget.")
]
AllowDefaultRemovalOption = Annotated[
    bool,
    typer.Option(
        "--allow-default-removal", help="Allow deleting a default entity or removing its keys."
    ),
]
AllowRelaxOption = Annotated[
    bool,
    typer.Option("--allow-relax", help="Allow raising or removing quotas beyond the factor."),
]
