"""``quotaform storage status|snapshot|watch``: storage-aware producer quotas
(the Strimzi volume-usage policy, run from outside the broker).

Exit codes: 0 success, 1 error (bad manifests or snapshots, no policy, no
connection); ``watch`` runs until interrupted (or ``--iterations``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quotaform.app.common import ConnectionOptions
from quotaform.app.storage import (
    SnapshotRequest,
    StatusRequest,
    WatchLevel,
    WatchRequest,
    run_snapshot,
    run_status,
    run_watch,
)
from quotaform.cli.options import (
    CONNECTION,
    VOLUMES,
    Manifests,
    Output,
    with_connection,
    with_volumes,
)
from quotaform.cli.output import OutputFormat, make_console, say
from quotaform.cli.view import make_view
from quotaform.errors import StorageError
from quotaform.formats.storage import records_json_lines, render_status_json, status_document
from quotaform.manifest.models import parse_duration
from quotaform.plan.facts import VolumeSource
from quotaform.render.storage import status_markdown, status_text

__all__ = ["register", "storage_app"]

Publish = Annotated[
    str | None,
    typer.Option(
        "--publish",
        metavar="TOPIC",
        help="Publish the Volume Metrics snapshots (snapshot: the records; watch: each "
        "evaluation's live snapshots) to this compacted topic, keyed by broker id.",
    ),
]
CreateTopic = Annotated[
    bool,
    typer.Option(
        "--create-topic",
        help="Create the --publish topic (cleanup.policy=compact) when it is missing.",
    ),
]

storage_app = typer.Typer(
    help="Storage-aware producer quotas: volume usage, the policy's state and factor.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)


@storage_app.command("status", short_help="The policy's state and factor, per broker and volume.")
@with_connection
@with_volumes
def status(
    manifests: Manifests,
    connection: ConnectionOptions = CONNECTION,
    output: Output = OutputFormat.text,
    volumes: VolumeSource = VOLUMES,
) -> None:
    """Per broker and volume: capacity, consumed, free, the limit that binds,
    state, factor, snapshot age; the cluster's state and factor, and what each
    scaled entity's producer_byte_rate becomes (read-only).

    Volume usage: --snapshots PATH (offline unless a cluster is named too),
    --from-topic TOPIC, or the cluster's DescribeLogDirs (default).
    """
    run = run_status(
        StatusRequest(
            tuple(manifests),
            connection=connection,
            volumes=volumes,
            view=make_view(),
        )
    )
    policy, evaluation, scaling = run.policy, run.evaluation, run.scaling
    cluster, source = run.cluster, run.source
    if output is OutputFormat.json:
        document = status_document(policy, evaluation, scaling, cluster=cluster, source=source)
        typer.echo(render_status_json(document), nl=False)
    elif output is OutputFormat.markdown:
        text = status_markdown(policy, evaluation, scaling, cluster=cluster, source=source)
        typer.echo(text, nl=False)
    else:
        text = status_text(policy, evaluation, scaling, cluster=cluster, source=source)
        typer.echo(text, nl=False)


@storage_app.command(
    "snapshot", short_help="Write (or publish) one Volume Metrics snapshot per broker."
)
@with_connection
def snapshot(
    manifests: Manifests,
    connection: ConnectionOptions = CONNECTION,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Append the records to this file (JSON Lines)."),
    ] = None,
    publish: Publish = None,
    create_topic: CreateTopic = False,
) -> None:
    """Write one Volume Metrics snapshot per broker (DescribeLogDirs: capacity =
    TotalBytes, consumed = TotalBytes - UsableBytes) to standard output, --out
    FILE, or --publish TOPIC: a cron job can be the proposal's data source
    without a broker plug-in. The limits written are the manifests' policy."""
    err = make_console(stderr=True)
    run = run_snapshot(
        SnapshotRequest(
            tuple(manifests),
            connection=connection,
            publish=publish,
            create_topic=create_topic,
            view=make_view(),
        )
    )
    records = list(run.records)
    text = records_json_lines(records)
    if out is not None:
        with out.open("a", encoding="utf-8") as fh:
            fh.write(text)
        say(err, f"appended {len(records)} record(s) to {out}")
    elif publish is None:
        typer.echo(text, nl=False)


@storage_app.command(
    "watch", short_help="Re-evaluate on an interval and apply the rescaled quotas."
)
@with_connection
@with_volumes
def watch(
    manifests: Manifests,
    connection: ConnectionOptions = CONNECTION,
    volumes: VolumeSource = VOLUMES,
    interval: Annotated[
        str,
        typer.Option("--interval", help="Seconds between evaluations (30s, 1m, 30, PT30S)."),
    ] = "30s",
    iterations: Annotated[
        int | None,
        typer.Option("--iterations", min=1, help="Stop after this many evaluations."),
    ] = None,
    publish: Publish = None,
    create_topic: CreateTopic = False,
) -> None:
    """Re-evaluate the storage policy every --interval and apply the rescaled
    producer_byte_rate values only when the state changes or the factor moves
    by more than the hysteresis step (the plan holds the live factor within
    one step). Only rescales of existing quotas are applied; creating an
    entity or any other change is logged and left for a reviewed `quotaform
    apply`. Every write is logged before it is sent. Survives a lost
    connection or a restarted broker (the next evaluation reconnects).

    Exit codes: 0 when the last evaluation succeeded, 1 when it failed (or a
    wrong cluster id, which stops the watch at once), so a one-shot
    `--iterations 1` from cron reports a failure."""
    try:
        every = parse_duration(interval)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--interval") from None
    err = make_console(stderr=True)
    styles = {WatchLevel.CHANGE: None, WatchLevel.WARNING: "yellow", WatchLevel.QUIET: "dim"}
    run = run_watch(
        WatchRequest(
            tuple(manifests),
            connection=connection,
            volumes=volumes,
            interval_s=every,
            iterations=iterations,
            publish=publish,
            create_topic=create_topic,
            log=lambda message, level: say(err, message, style=styles[level]),
            view=make_view(),
        )
    )
    if run.last_error is not None:
        raise StorageError(
            f"the last evaluation failed ({run.failed} of {run.evaluations} failed): "
            f"{run.last_error}"
        )


def register(app: typer.Typer) -> None:
    """Add the ``storage`` command group to ``app``."""
    app.add_typer(storage_app, name="storage", help="Storage-aware producer quotas.")
