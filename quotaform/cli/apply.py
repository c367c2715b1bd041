"""``quotaform apply``: plan, confirm, then validate_only pre-check, alter, read-back.

Exit codes: 0 applied and read back (or nothing to do); 1 error with nothing
applied (bad manifests, connection, wrong cluster, deletes not allowed, guard
rails, validate_only pre-check rejected, cancelled, unusable plan file);
3 partial failure (some entities applied, others failed or unknown); 4 every
alter succeeded but the read-back did not match within
``--readback-timeout``; 5 a saved plan is stale; 6 done as reported, but the
apply lock could not be released. See :mod:`quotaform.errors`.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, NoReturn

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
    FromTopicOption,
    MaxDeleteFractionOption,
    MaxDeletesOption,
    MaxRelaxFactorOption,
    Output,
    SnapshotsOption,
    Timeout,
    budget_flags,
    target,
    volume_source,
)
from quotaform.cli.output import OutputFormat, emit, make_console, say
from quotaform.cli.plan import print_plan
from quotaform.cluster.apply import ApplyResult, ApplyStatus, apply_plan, check_not_stale
from quotaform.cluster.connect import connect
from quotaform.cluster.lock import HeldLock, apply_lock
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.errors import (
    EXIT_ERROR,
    EXIT_LOCK_HELD,
    EXIT_NOT_CONVERGED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_STALE_PLAN,
    ApplyCancelledError,
    GuardRefusedError,
    PlanFileError,
    QuotaformError,
    StalePlanError,
)
from quotaform.formats.apply import ApplyDocument, apply_document, render_apply_json
from quotaform.formats.planfile import is_plan_file, read_plan_file
from quotaform.manifest import load_manifests
from quotaform.plan.model import Plan
from quotaform.plan.review import PlanReview
from quotaform.plan.state import ChangeBudget, DesiredState
from quotaform.render.apply import render_apply_text
from quotaform.workflow import (
    check_storage_holds,
    plan_desired,
    refuse_unless_allowed,
    review_saved_plan,
)

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
    ApplyStatus.REFUSED: EXIT_ERROR,
    ApplyStatus.CANCELLED: EXIT_ERROR,
    ApplyStatus.STALE: EXIT_STALE_PLAN,
    ApplyStatus.NOTHING_TO_DO: EXIT_OK,
    ApplyStatus.APPLIED: EXIT_OK,
    ApplyStatus.REJECTED: EXIT_ERROR,
    ApplyStatus.NOTHING_APPLIED: EXIT_ERROR,
    ApplyStatus.PARTIAL: EXIT_PARTIAL,
    ApplyStatus.NOT_CONVERGED: EXIT_NOT_CONVERGED,
}


def _confirm(console: Console) -> None:
    """Ask for a typed ``yes`` on ``console`` and read one line of standard
    input (standard output stays clean for ``-o json``).

    Raises:
        ApplyCancelledError: any other answer, or no input to read (standard
            input closed or empty without ``--auto-approve``): the message
            says how to skip the question.
    """
    console.print(
        "\nDo you want to perform these actions?\n"
        "  quotaform will perform the actions described above.\n"
        "  Only 'yes' will be accepted to approve.\n"
    )
    console.print("  Enter a value: ", end="")
    console.file.flush()
    answer = sys.stdin.readline()
    if not sys.stdin.isatty():
        console.print()  # a terminal echoed the Enter; a pipe did not
    if not answer:
        raise ApplyCancelledError(
            "apply needs a typed 'yes' to go ahead, but there is no input to read "
            "(standard input is closed or not a terminal): pass --auto-approve "
            "(-auto-approve) to apply without asking, or save a reviewed plan with "
            "`quotaform plan ... --out plan.json` and run `quotaform apply plan.json`"
        )
    if answer.strip() != "yes":
        raise ApplyCancelledError("apply cancelled: only 'yes' approves; nothing was applied")


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


def _print_result(
    document: Callable[[], ApplyDocument],
    result: ApplyResult | None,
    output: OutputFormat,
    console: Console,
) -> None:
    """The apply's one report on standard output: the JSON document (the plan
    inside it; built only for JSON output), or the result in text (nothing
    more when nothing was sent)."""
    if output is OutputFormat.json:
        sys.stdout.write(render_apply_json(document()))
    elif result is not None:
        emit(
            result,
            output,
            text=render_apply_text,
            markdown=lambda r: render_apply_text(r).plain,
            json=lambda r: render_apply_json(document()),
            console=console,
        )


def apply(
    manifests: ApplyTargets,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
    output: Output = OutputFormat.text,
    allow_deletes: AllowDeletes = False,
    max_deletes: MaxDeletesOption = None,
    max_delete_fraction: MaxDeleteFractionOption = None,
    max_relax_factor: MaxRelaxFactorOption = None,
    allow_mass_delete: AllowMassDeleteOption = False,
    allow_default_removal: AllowDefaultRemovalOption = False,
    allow_relax: AllowRelaxOption = False,
    auto_approve: Annotated[
        bool,
        typer.Option(
            "--auto-approve", "-auto-approve", help="Skip the typed 'yes' (for pipelines)."
        ),
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
    snapshots: SnapshotsOption = None,
    from_topic: FromTopicOption = None,
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
    since it was made), 6 done as reported but the apply lock is still held
    (run quotaform unlock).
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
    # The files are read before connecting: they say nothing about the cluster.
    saved_plan = read_plan_file(manifests[0])[0] if saved else None
    policy = manifests[1:] if saved else manifests
    desired = None
    if policy:
        for_cluster = cluster or (saved_plan.cluster if saved_plan else None)
        desired = load_manifests(policy, cluster=for_cluster)
    implied = saved_plan.cluster if saved_plan is not None else None
    if desired is not None:
        implied = implied or desired.cluster
    where = target(
        cluster,
        config,
        bootstrap_server,
        command_config,
        implied=implied,
        near=manifests,
        timeout=timeout,
    )
    volumes = volume_source(snapshots, from_topic)
    plan_to = err if output is OutputFormat.json else console
    held: HeldLock | None = None
    try:
        with (
            connect(where.settings, read_only=False, cluster_id=where.cluster_id) as client,
            apply_lock(client, where.settings, timeout_s=lock_timeout, enabled=not no_lock) as held,
        ):
            if saved_plan is not None:
                the_plan = saved_plan
                try:
                    review = _judge_saved(
                        saved_plan, manifests[0], desired, where.cluster, flags, client, err
                    )
                    check_storage_holds(
                        saved_plan, desired, client, volumes=volumes, settings=where.settings
                    )
                except StalePlanError as exc:
                    the_review = review_saved_plan(saved_plan, desired, flags)
                    _stop(the_plan, the_review, ApplyStatus.STALE, exc, output, console)
            else:
                assert desired is not None
                the_plan, review = plan_desired(
                    desired, client, flags=flags, volumes=volumes, settings=where.settings
                )
            # With -o json the plan goes to standard error as text: stdout carries one document.
            print_plan(
                the_plan,
                review,
                OutputFormat.text if output is OutputFormat.json else output,
                plan_to,
            )
            result: ApplyResult | None = None
            if the_plan.summary.has_changes:
                try:
                    refuse_unless_allowed(review)
                    if not saved and not auto_approve:
                        _confirm(console if output is not OutputFormat.json else err)
                except GuardRefusedError as exc:
                    _stop(the_plan, review, ApplyStatus.REFUSED, exc, output, console)
                except ApplyCancelledError as exc:
                    _stop(the_plan, review, ApplyStatus.CANCELLED, exc, output, console)
                with _progress(err) as on_progress:
                    result = apply_plan(
                        the_plan,
                        client,
                        on_progress=on_progress,
                        readback_timeout_s=readback_timeout,
                    )
    finally:
        # Said even when apply stopped with an error: the next run would be blocked.
        lock_error = held.release_error if held is not None else None
        if lock_error is not None:
            say(err, lock_error, style="bold yellow", prefix="Warning: ")
    status = result.status if result is not None else ApplyStatus.NOTHING_TO_DO
    _print_result(
        lambda: apply_document(the_plan, review, result, status=status, lock_error=lock_error),
        result,
        output,
        console,
    )
    code = EXIT_BY_STATUS[status]
    if lock_error is not None and code == EXIT_OK:
        code = EXIT_LOCK_HELD
    if code != EXIT_OK:
        raise typer.Exit(code)


def _stop(
    the_plan: Plan,
    review: PlanReview,
    status: ApplyStatus,
    exc: QuotaformError,
    output: OutputFormat,
    console: Console,
) -> NoReturn:
    """End an apply that sent nothing: with ``-o json`` its document (status and
    reason) on standard output; the error itself on standard error, always."""
    _print_result(
        lambda: apply_document(the_plan, review, status=status, error=str(exc)),
        None,
        output,
        console,
    )
    raise exc


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
