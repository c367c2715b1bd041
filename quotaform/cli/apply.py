"""``quotaform apply``: plan, confirm, then validate_only pre-check, alter, read-back.

Exit codes: 0 applied and read back (or nothing to do); 1 error with nothing
applied (bad manifests, connection, wrong cluster, deletes not allowed, guard
rails, validate_only pre-check rejected, cancelled, unusable plan file);
3 partial failure (some entities applied, others failed or unknown); 4 every
alter succeeded but the read-back did not match within
``--readback-timeout``; 5 a saved plan is stale. See :mod:`quotaform.errors`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from quotaform.cli.options import (
    AllowDefaultRemovalOption,
    AllowDeletes,
    AllowMassDeleteOption,
    AllowRelaxOption,
    BootstrapServer,
    ClusterOption,
    CommandConfig,
    ConfigOption,
    MaxDeleteFractionOption,
    MaxDeletesOption,
    MaxRelaxFactorOption,
    Output,
    budget_flags,
    target,
)
from quotaform.cli.output import OutputFormat, emit, make_console, say
from quotaform.cli.plan import print_plan
from quotaform.cluster.apply import ApplyResult, ApplyStatus, apply_plan, check_not_stale
from quotaform.cluster.connect import connect
from quotaform.cluster.lock import apply_lock
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.errors import (
    EXIT_ERROR,
    EXIT_NOT_CONVERGED,
    EXIT_OK,
    EXIT_PARTIAL,
    PlanFileError,
)
from quotaform.formats.apply import render_apply_json
from quotaform.formats.planfile import is_plan_file, read_plan_file
from quotaform.manifest import load_manifests
from quotaform.plan.model import Plan
from quotaform.plan.review import PlanReview
from quotaform.plan.state import ChangeBudget, DesiredState
from quotaform.render.apply import render_apply_text
from quotaform.workflow import plan_desired, refuse_unless_allowed, review_saved_plan

__all__ = ["apply", "register"]

ApplyTargets = Annotated[
    list[Path],
    typer.Argument(
        help="Manifest files or directories (searched recursively for *.yaml, *.yml), "
        "or a saved plan file from `plan --out` followed by the manifests whose settings "
        "(protection, change budget) judge it.",
        show_default=False,
    ),
]

#: The exit code of each way an apply ends.
EXIT_BY_STATUS = {
    ApplyStatus.NOTHING_TO_DO: EXIT_OK,
    ApplyStatus.APPLIED: EXIT_OK,
    ApplyStatus.REJECTED: EXIT_ERROR,
    ApplyStatus.NOTHING_APPLIED: EXIT_ERROR,
    ApplyStatus.PARTIAL: EXIT_PARTIAL,
    ApplyStatus.NOT_CONVERGED: EXIT_NOT_CONVERGED,
}


def _confirm(console: Console) -> bool:
    console.print(
        "\nDo you want to perform these actions?\n"
        "  quotaform will perform the actions described above.\n"
        "  Only 'yes' will be accepted to approve.\n"
    )
    answer: str = typer.prompt("  Enter a value", default="", show_default=False)
    return answer.strip() == "yes"


class _progress:
    """A rich progress bar on standard error while apply runs (a TTY only)."""

    def __init__(self, console: Console) -> None:
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> Callable[[str, int, int], None]:
        self.bar.start()

        def update(stage: str, done: int, total: int) -> None:
            if stage not in self.tasks:
                self.tasks[stage] = self.bar.add_task(stage, total=total)
            self.bar.update(self.tasks[stage], completed=done, total=total)

        return update

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()


def _print_result(result: ApplyResult, output: OutputFormat, console: Console) -> None:
    emit(
        result,
        output,
        text=render_apply_text,
        markdown=lambda r: render_apply_text(r).plain,
        json=render_apply_json,
        console=console,
    )


def apply(
    manifests: ApplyTargets,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    output: Output = OutputFormat.text,
    allow_deletes: AllowDeletes = False,
    max_deletes: MaxDeletesOption = None,
    max_delete_fraction: MaxDeleteFractionOption = None,
    max_relax_factor: MaxRelaxFactorOption = None,
    allow_mass_delete: AllowMassDeleteOption = False,
    allow_default_removal: AllowDefaultRemovalOption = False,
    allow_relax: AllowRelaxOption = False,
    auto_approve: Annotated[
        bool, typer.Option("--auto-approve", help="Skip the typed 'yes' (for pipelines).")
    ] = False,
    readback_timeout: Annotated[
        float,
        typer.Option(
            "--readback-timeout", help="Seconds to wait for the cluster to show the plan."
        ),
    ] = 30.0,
    lock_timeout: Annotated[
        float,
        typer.Option(
            "--lock-timeout",
            min=0.0,
            help="Seconds to wait for another apply's lock on the cluster (default: fail at once).",
        ),
    ] = 0.0,
    no_lock: Annotated[
        bool,
        typer.Option(
            "--no-lock",
            help="Apply without the cluster's apply lock (for principals that may not "
            "create the lock topic); concurrent applies are then not serialized.",
        ),
    ] = False,
) -> None:
    """Plan, ask for 'yes', then apply: validate_only pre-check, alter, read-back.

    Takes the cluster's apply lock first (one apply at a time; see `quotaform
    unlock`). With a saved plan file (from `plan --out FILE`) instead of
    manifests, apply exactly that plan without asking, after checking that it
    is intact, for this cluster, and not stale; it is judged again by the
    guard rails and the flags given here, and by the manifests' settings when
    they follow the plan file (`apply plan.json manifests/`).

    Exit codes: 0 applied, 1 nothing applied (error, rejected, guard rails,
    cancelled, bad plan file, lock held), 3 partial (some entities failed, are
    unknown or were not sent), 4 applied but the read-back did not match in
    time or could not be made, 5 the saved plan is stale (the cluster changed
    since it was made).
    """
    console = make_console()
    err = make_console(stderr=True)
    saved = is_plan_file(manifests[0])
    flags = budget_flags(
        allow_deletes=allow_deletes,
        max_deletes=max_deletes,
        max_delete_fraction=max_delete_fraction,
        max_relax_factor=max_relax_factor,
        allow_mass_delete=allow_mass_delete,
        allow_default_removal=allow_default_removal,
        allow_relax=allow_relax,
    )
    where = target(cluster, config, bootstrap_server, command_config)
    # The files are read before the lock is taken: they say nothing about the cluster.
    saved_plan = read_plan_file(manifests[0])[0] if saved else None
    policy = manifests[1:] if saved else manifests
    desired = None
    if policy:
        for_cluster = where.cluster or (saved_plan.cluster if saved_plan else None)
        desired = load_manifests(policy, cluster=for_cluster)
    with (
        connect(where.settings, read_only=False, cluster_id=where.cluster_id) as client,
        apply_lock(client, where.settings, timeout_s=lock_timeout, enabled=not no_lock) as lock,
    ):
        if saved_plan is not None:
            the_plan = saved_plan
            review = _judge_saved(
                saved_plan, manifests[0], desired, where.cluster, flags, client, err
            )
        else:
            assert desired is not None
            the_plan, review = plan_desired(desired, client, flags=flags)
        print_plan(the_plan, review, output, console if output is OutputFormat.text else err)
        if not the_plan.summary.has_changes:
            return
        refuse_unless_allowed(review)
        if not saved and not auto_approve and not _confirm(console):
            say(err, "Apply cancelled.", style="bold red")
            raise typer.Exit(EXIT_ERROR)
        with _progress(err) as on_progress:
            result = apply_plan(
                the_plan, client, on_progress=on_progress, readback_timeout_s=readback_timeout
            )
    _print_result(result, output, console)
    if lock.release_error is not None:
        say(err, lock.release_error, style="bold yellow", prefix="Warning: ")
    raise typer.Exit(EXIT_BY_STATUS[result.status])


def _judge_saved(
    the_plan: Plan,
    planfile: Path,
    desired: DesiredState | None,
    cluster: str | None,
    flags: ChangeBudget,
    client: QuotaAdminClient,
    err: Console,
) -> PlanReview:
    """A saved plan (read intact, signed when a key is set), checked for this
    cluster and not stale, and judged again (by ``desired``, the manifests
    given after it, when given)."""
    if cluster is not None and the_plan.cluster != cluster:
        raise PlanFileError(
            f"{planfile} is a plan for cluster {the_plan.cluster!r}, not {cluster!r}"
        )
    check_not_stale(the_plan, client, client.cluster_id())
    if desired is None:
        say(
            err,
            "the manifests were not given, so spec.protect, preventDestroy and the "
            "manifests' change budget were not checked; pass them after the plan file "
            f"(quotaform apply {planfile} MANIFESTS...)",
            style="yellow",
            prefix="Note: ",
        )
    return review_saved_plan(the_plan, desired, flags)


def register(app: typer.Typer) -> None:
    """Add ``apply`` to ``app``."""
    app.command()(apply)
