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
from typing import Annotated

import typer
from rich.console import Console

from quotaform.app.apply import ApplyRequest, run_apply
from quotaform.app.common import ConnectionOptions
from quotaform.cli.options import (
    BUDGET,
    CONNECTION,
    VOLUMES,
    Output,
    with_budget,
    with_connection,
    with_volumes,
)
from quotaform.cli.output import OutputFormat, emit, make_console
from quotaform.cli.plan import print_plan
from quotaform.cli.view import make_view
from quotaform.errors import (
    EXIT_ERROR,
    EXIT_LOCK_HELD,
    EXIT_NOT_CONVERGED,
    EXIT_OK,
    EXIT_PARTIAL,
    EXIT_STALE_PLAN,
    ApplyCancelledError,
)
from quotaform.formats.apply import ApplyDocument, apply_document, render_apply_json
from quotaform.plan.facts import VolumeSource
from quotaform.plan.outcome import ApplyResult, ApplyStatus
from quotaform.plan.state import ChangeBudget
from quotaform.render.apply import render_apply_text

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


ApplyAutoApprove = Annotated[
    bool,
    typer.Option(
        "--auto-approve", "-auto-approve", help="Skip the typed 'yes' (for pipelines)."
    ),
]

ApplyReadbackTimeout = Annotated[
    float,
    typer.Option(
        "--readback-timeout", help="Seconds to wait for the cluster to show the plan."
    ),
]

ApplyLockTimeout = Annotated[
    float,
    typer.Option(
        "--lock-timeout",
        min=0.0,
        help="Seconds to wait for another apply's lock on the cluster (default: fail at once).",
    ),
]

ApplyNoLock = Annotated[
    bool,
    typer.Option(
        "--no-lock",
        help="Apply without the cluster's apply lock (for principals that may not "
        "create the lock topic); concurrent applies are then not serialized.",
    ),
]


@with_connection
@with_budget
@with_volumes
def apply(
    manifests: ApplyTargets,
    connection: ConnectionOptions = CONNECTION,
    output: Output = OutputFormat.text,
    budget: ChangeBudget = BUDGET,
    auto_approve: ApplyAutoApprove = False,
    readback_timeout: ApplyReadbackTimeout = 30.0,
    lock_timeout: ApplyLockTimeout = 0.0,
    no_lock: ApplyNoLock = False,
    volumes: VolumeSource = VOLUMES,
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
    # With -o json the plan goes to standard error as text: stdout carries one document.
    plan_format = OutputFormat.text if output is OutputFormat.json else output
    run = run_apply(
        ApplyRequest(
            tuple(manifests),
            connection=connection,
            budget=budget,
            volumes=volumes,
            auto_approve=auto_approve,
            readback_timeout_s=readback_timeout,
            lock_timeout_s=lock_timeout,
            lock=not no_lock,
            show=lambda plan, review: print_plan(
                plan, review, plan_format, err if output is OutputFormat.json else console
            ),
            confirm=lambda plan, review: _confirm(
                console if output is not OutputFormat.json else err
            ),
            view=make_view(),
        )
    )
    if run.stopped is not None:
        # Nothing was sent: with -o json its document (status and reason) on standard
        # output; the error itself on standard error, always.
        _print_result(
            lambda: apply_document(run.plan, run.review, status=run.status, error=str(run.stopped)),
            None,
            output,
            console,
        )
        raise run.stopped
    _print_result(
        lambda: apply_document(
            run.plan, run.review, run.result, status=run.status, lock_error=run.lock_error
        ),
        run.result,
        output,
        console,
    )
    code = EXIT_BY_STATUS[run.status]
    if run.lock_error is not None and code == EXIT_OK:
        code = EXIT_LOCK_HELD
    if code != EXIT_OK:
        raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    """Add ``apply`` to ``app``."""
    app.command()(apply)
