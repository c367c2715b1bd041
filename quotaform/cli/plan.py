"""``quotaform plan``: show what apply would change (read-only client).

Exit codes: 0 success, 1 error; with ``--detailed-exitcode`` 0 no changes,
1 error, 2 changes present. With ``--all-clusters`` over every cluster: 1 if
any failed, else (with ``--detailed-exitcode``) 2 if any has changes, else 0.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from quotaform.app.common import ConnectionOptions
from quotaform.app.plan import AllClustersRequest, PlanRequest, plan_all_clusters, run_plan
from quotaform.cli.options import (
    BUDGET,
    CONNECTION,
    VOLUMES,
    AllClustersOption,
    Manifests,
    Output,
    principals_option,
    with_budget,
    with_connection,
    with_volumes,
)
from quotaform.cli.output import OutputFormat, emit
from quotaform.cli.view import make_view
from quotaform.errors import plan_exit_code
from quotaform.plan.facts import VolumeSource
from quotaform.plan.model import Plan
from quotaform.plan.review import PlanReview
from quotaform.plan.state import ChangeBudget
from quotaform.render.text import render_markdown, render_plain, render_text

if TYPE_CHECKING:
    from rich.console import Console

    from quotaform.plan.multicluster import MultiClusterPlan

__all__ = ["plan", "print_multi_plan", "print_plan", "register"]


def print_plan(
    plan: Plan, review: PlanReview, output: OutputFormat, console: Console | None = None
) -> None:
    """Print a plan and its review as ``output``."""

    def json(report: tuple[Plan, PlanReview]) -> str:
        from quotaform.formats.plan import render_json  # not imported by a text plan

        return render_json(*report)

    emit(
        (plan, review),
        output,
        text=lambda p: render_text(*p),
        markdown=lambda p: render_markdown(*p),
        json=json,
        console=console,
        plain=lambda p: render_plain(*p),
    )


def print_multi_plan(report: MultiClusterPlan, output: OutputFormat) -> None:
    """Print ``--all-clusters``' report as ``output``."""
    from quotaform.formats.multicluster import render_multi_json
    from quotaform.render.multicluster import render_multi_markdown, render_multi_text

    emit(
        report,
        output,
        text=render_multi_text,
        markdown=render_multi_markdown,
        json=render_multi_json,
    )


@with_connection
@with_budget
@with_volumes
def plan(
    manifests: Manifests,
    connection: ConnectionOptions = CONNECTION,
    all_clusters: AllClustersOption = False,
    output: Output = OutputFormat.text,
    budget: ChangeBudget = BUDGET,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode",
            "-detailed-exitcode",
            help="Exit 0 with no changes, 1 on error, 2 with changes.",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-out",
            metavar="FILE",
            help="Also save the plan to this file, for `quotaform apply FILE`.",
            show_default=False,
        ),
    ] = None,
    volumes: VolumeSource = VOLUMES,
    super_users: Annotated[
        list[str] | None,
        typer.Option(
            "--super-user",
            metavar="PRINCIPAL",
            help="A principal of the brokers' super.users (User:NAME; repeatable): plan "
            "warns when a default user quota would throttle it. Brokers do not reveal "
            "super.users; the cluster profile's superUsers does the same.",
            callback=principals_option,
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show what apply would change. Reads the cluster with a read-only client.

    A plan that breaks a guard rail (protected entities, the change budget) is
    shown with every violation and exits 1; --out then saves nothing.

    With --all-clusters: every cluster the manifests name, each through its
    profile, in one report; exit 1 if any cluster failed, else with
    --detailed-exitcode 2 if any has changes, else 0.
    """
    if all_clusters:
        report = plan_all_clusters(
            AllClustersRequest(
                tuple(manifests),
                connection=connection,
                budget=budget,
                out=out,
                super_users=tuple(super_users or ()),
            )
        )
        print_multi_plan(report, output)
        failed, changes = bool(report.failed), bool(report.with_changes)
    else:
        outcome = run_plan(
            PlanRequest(
                tuple(manifests),
                connection=connection,
                budget=budget,
                volumes=volumes,
                out=out,
                show=lambda plan, review: print_plan(plan, review, output),
                view=make_view(),
                super_users=tuple(super_users or ()),
            )
        )
        failed, changes = False, outcome.plan.summary.has_changes
    code = plan_exit_code(failed=failed, changes=changes, detailed=detailed_exitcode)
    if code:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``plan`` to ``app``."""
    app.command()(plan)
