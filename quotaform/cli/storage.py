"""``quotaform storage status|snapshot|watch``: storage-aware producer quotas
(the Strimzi volume-usage policy, run from outside the broker).

Exit codes: 0 success, 1 error (bad manifests or snapshots, no policy, no
connection); ``watch`` runs until interrupted (or ``--iterations``).
"""

from __future__ import annotations

import logging
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from quotaform.cli.options import (
    BootstrapServer,
    ClusterOption,
    CommandConfig,
    ConfigOption,
    FromTopicOption,
    Manifests,
    Output,
    SnapshotsOption,
    Timeout,
    manifests_and_target,
    volume_source,
)
from quotaform.cli.output import OutputFormat, make_console, say
from quotaform.cluster.apply import ApplyStatus, apply_plan
from quotaform.cluster.connect import check_cluster, connect
from quotaform.cluster.profiles import ClusterTarget
from quotaform.cluster.read import read_live_state
from quotaform.cluster.storage import read_volumes
from quotaform.errors import QuotaformError, StorageError
from quotaform.formats.storage import (
    records_json_lines,
    render_status_json,
    snapshot_record,
    status_document,
)
from quotaform.manifest import load_manifests
from quotaform.manifest.models import parse_duration
from quotaform.plan.state import DesiredState
from quotaform.plan.storage import StoragePolicy, scale_desired
from quotaform.render.storage import scaling_lines, status_markdown, status_text
from quotaform.storage import VolumeSource, evaluate_storage, publish_snapshots
from quotaform.workflow import plan_desired, storage_only

__all__ = ["register", "storage_app"]

log = logging.getLogger("quotaform.storage.watch")

storage_app = typer.Typer(
    help="Storage-aware producer quotas: volume usage, the policy's state and factor.",
    no_args_is_help=True,
    rich_markup_mode=None,
    add_completion=False,
)


def _policy(desired: DesiredState) -> StoragePolicy:
    if desired.storage is None:
        raise StorageError(
            "the manifests declare no spec.storagePolicy (see README 'Storage-aware quotas')"
        )
    return desired.storage


@storage_app.command("status")
def status(
    manifests: Manifests,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
    output: Output = OutputFormat.text,
    snapshots: SnapshotsOption = None,
    from_topic: FromTopicOption = None,
) -> None:
    """Per broker and volume: capacity, consumed, free, the limit that binds,
    state, factor, snapshot age; the cluster's state and factor, and what each
    scaled entity's producer_byte_rate becomes (read-only).

    Volume usage: --snapshots PATH (offline unless a cluster is named too),
    --from-topic TOPIC, or the cluster's DescribeLogDirs (default).
    """
    source = volume_source(snapshots, from_topic)
    offline = bool(snapshots) and not (bootstrap_server or cluster or command_config)
    if offline:
        desired = load_manifests(manifests, cluster=cluster)
        policy = _policy(desired)
        evaluation = evaluate_storage(policy, source, client=None)
        _, scaling = scale_desired(desired, policy, evaluation, {})
    else:
        desired, where = manifests_and_target(
            manifests, cluster, config, bootstrap_server, command_config, timeout
        )
        policy = _policy(desired)
        with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
            cluster_id = check_cluster(desired, client)
            evaluation = evaluate_storage(policy, source, client=client, settings=where.settings)
            live = read_live_state(client, desired.scope, cluster_id=cluster_id)
            _, scaling = scale_desired(desired, policy, evaluation, live)
    if output is OutputFormat.json:
        typer.echo(render_status_json(status_document(policy, evaluation, scaling)), nl=False)
    elif output is OutputFormat.markdown:
        typer.echo(status_markdown(policy, evaluation), nl=False)
    else:
        typer.echo(status_text(policy, evaluation) + "\n" + "\n".join(scaling_lines(scaling)))


@storage_app.command("snapshot")
def snapshot(
    manifests: Manifests,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", metavar="FILE", help="Append the records to this file (JSON Lines)."),
    ] = None,
    publish: Annotated[
        str | None,
        typer.Option(
            "--publish",
            metavar="TOPIC",
            help="Publish the records to this compacted topic, keyed by broker id.",
        ),
    ] = None,
    create_topic: Annotated[
        bool,
        typer.Option(
            "--create-topic",
            help="Create the --publish topic (cleanup.policy=compact) when it is missing.",
        ),
    ] = False,
) -> None:
    """Write one Volume Metrics snapshot per broker (DescribeLogDirs: capacity =
    TotalBytes, consumed = TotalBytes - UsableBytes) to standard output, --out
    FILE, or --publish TOPIC: a cron job can be the proposal's data source
    without a broker plug-in. The limits written are the manifests' policy."""
    desired, where = manifests_and_target(
        manifests, cluster, config, bootstrap_server, command_config, timeout
    )
    policy = _policy(desired)
    err = make_console(stderr=True)
    with connect(where.settings, read_only=publish is None, cluster_id=where.cluster_id) as client:
        found, _ = read_volumes(client, now=datetime.now(UTC))
        records = [snapshot_record(s, policy) for s in found]
        if publish is not None:
            errors = publish_snapshots(
                client, where.settings, publish, found, policy, create=create_topic
            )
            for error in errors:
                say(err, f"publication error: {error}", style="yellow", prefix="Warning: ")
            say(err, f"published {len(found) - len(errors)} of {len(found)} record(s) to {publish}")
            if errors:
                raise StorageError(f"{len(errors)} record(s) could not be published to {publish}")
    text = records_json_lines(records)
    if out is not None:
        with out.open("a", encoding="utf-8") as fh:
            fh.write(text)
        say(err, f"appended {len(records)} record(s) to {out}")
    elif publish is None:
        typer.echo(text, nl=False)


@storage_app.command("watch")
def watch(
    manifests: Manifests,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
    snapshots: SnapshotsOption = None,
    from_topic: FromTopicOption = None,
    interval: Annotated[
        str,
        typer.Option("--interval", help="Seconds between evaluations (30s, 1m, 30)."),
    ] = "30s",
    iterations: Annotated[
        int | None,
        typer.Option("--iterations", min=1, help="Stop after this many evaluations."),
    ] = None,
    publish: Annotated[
        str | None,
        typer.Option(
            "--publish",
            metavar="TOPIC",
            help="Also publish each evaluation's live snapshots to this compacted topic "
            "(created with cleanup.policy=compact when missing).",
        ),
    ] = None,
) -> None:
    """Re-evaluate the storage policy every --interval and apply the scaled
    producer_byte_rate values only when the state changes or the factor moves
    by more than the hysteresis step (the plan holds the live factor within
    one step). Only storage scalings are applied; any other change is logged
    and left for a reviewed `quotaform apply`. Survives a lost connection or a
    restarted broker (the next evaluation reconnects) and logs every change."""
    try:
        every = parse_duration(interval)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint="--interval") from None
    err = make_console(stderr=True)
    source = volume_source(snapshots, from_topic)
    desired, where = manifests_and_target(
        manifests, cluster, config, bootstrap_server, command_config, timeout
    )
    _policy(desired)
    done = 0
    while True:
        started = time.monotonic()
        try:
            _watch_once(desired, where, source, publish, err)
        except QuotaformError as exc:
            say(err, f"{_now()} evaluation failed, retrying in {every:g} s: {exc}", style="yellow")
        done += 1
        if iterations is not None and done >= iterations:
            return
        time.sleep(max(0.0, every - (time.monotonic() - started)))


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _watch_once(
    desired: DesiredState,
    where: ClusterTarget,
    source: VolumeSource,
    publish: str | None,
    err: Console,
) -> None:
    with connect(where.settings, read_only=False, cluster_id=where.cluster_id) as client:
        if publish is not None and desired.storage is not None:
            found, _ = read_volumes(client, now=datetime.now(UTC))
            errors = publish_snapshots(
                client, where.settings, publish, found, desired.storage, create=True
            )
            for error in errors:
                say(err, f"{_now()} publication error: {error}", style="yellow")
            if source.live:
                source = replace(source, read=tuple(found))  # one DescribeLogDirs per round
        plan, _ = plan_desired(desired, client, volumes=source, settings=where.settings)
        assert plan.storage is not None
        scaling = plan.storage
        mine, others = storage_only(plan)
        if others:
            say(
                err,
                f"{_now()} {len(others)} other change(s) pending, not applied by watch "
                "(review them with quotaform plan / apply)",
                style="yellow",
            )
        if not mine.pending:
            say(
                err,
                f"{_now()} {scaling.state.value} factor {scaling.factor:.2f} "
                f"(volumes {scaling.computed:.3f}): no change",
                style="dim",
            )
            return
        result = apply_plan(mine, client)
        for change in mine.pending:
            for kc in change.key_changes:
                say(
                    err,
                    f"{_now()} {scaling.state.value} factor {scaling.factor:.2f}: "
                    f"{change.entity.label()} {kc.key} {kc.before:g} -> {kc.after:g} "
                    f"({scaling.reason or 'every volume within its soft limit'})",
                )
        if result.status is not ApplyStatus.APPLIED:
            raise StorageError(f"applying the storage scaling ended {result.status.value}")


def register(app: typer.Typer) -> None:
    """Add the ``storage`` command group to ``app``."""
    app.add_typer(storage_app, name="storage", help="Storage-aware producer quotas.")
