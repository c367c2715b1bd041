"""``quotaform explain``: which quota a client really gets, from which entry,
and who shares it (the ResolveClientQuotas KIP-546 sketched and Kafka never
shipped).

Against manifests (``explain PATHS...``, offline), the live cluster (no
PATHS: ``--bootstrap-server`` / ``--cluster``), or a saved plan (``--plan
FILE``: before and after side by side). Exit codes: 0 explained, 1 error.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from quotaform.cli.options import (
    BootstrapServer,
    ClusterOption,
    CommandConfig,
    ConfigOption,
    Output,
    Timeout,
    target,
)
from quotaform.cli.output import OutputFormat, emit
from quotaform.cluster.connect import connect
from quotaform.cluster.read import describe_matching
from quotaform.errors import ClusterConfigError
from quotaform.formats.explain import explain_document, render_explain_json
from quotaform.formats.planfile import load_saved_plan
from quotaform.kafka.names import normalise_ip
from quotaform.kafka.resolution import Principal, QuotaIndex
from quotaform.manifest import load_manifests
from quotaform.plan.explain import explain, explain_change
from quotaform.render.explain import render_explain_markdown, render_explain_text

__all__ = ["explain_command", "register"]


def _principal(user: str | None, client_id: str | None, ip: str | None) -> Principal:
    if ip is not None:
        if user is not None or client_id is not None:
            raise ClusterConfigError(
                "give --ip alone, or --user and/or --client-id: ip quotas never combine "
                "with user or client-id (KIP-612)"
            )
        try:
            return Principal(ip=normalise_ip(ip))
        except ValueError as exc:
            raise ClusterConfigError(f"--ip {ip!r}: {exc}") from None
    if user is None and client_id is None:
        raise ClusterConfigError(
            "name the client: --user U and/or --client-id C (a part left out is unknown), or --ip A"
        )
    if user == "":
        raise ClusterConfigError("--user must not be empty (ANONYMOUS is the unauthenticated user)")
    return Principal(user=user, client_id=client_id)


def explain_command(
    manifests: Annotated[
        list[Path] | None,
        typer.Argument(
            help="Manifest files or directories to explain offline; without them, the live "
            "cluster is read.",
            metavar="PATH",
            show_default=False,
        ),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option(
            "--user", metavar="NAME", help="The user principal (ANONYMOUS when unauthenticated)."
        ),
    ] = None,
    client_id: Annotated[
        str | None,
        typer.Option(
            "--client-id",
            metavar="ID",
            help='The client.id it sends ("" for none). Left out: unknown, and the answer '
            "covers what is certain.",
        ),
    ] = None,
    ip: Annotated[
        str | None, typer.Option("--ip", metavar="ADDRESS", help="A client address (ip quotas).")
    ] = None,
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            metavar="PLANFILE",
            help="Explain a saved plan: before and after, side by side (offline).",
            show_default=False,
        ),
    ] = None,
    include_overrides: Annotated[
        bool,
        typer.Option(
            "--include-overrides",
            help="Also list the less specific entries that match but are overridden (*).",
        ),
    ] = False,
    output: Output = OutputFormat.text,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
) -> None:
    """Which quota a client really gets per key, from which entry (level), and
    which quota group (metric tags) it shares on each broker.

    Sources: manifests (PATHS, offline; --cluster picks a cluster of a
    multi-cluster set), a saved plan (--plan FILE: before -> after), or the
    live cluster (no PATHS). JSON: schemas/explain.schema.json.
    """
    principal = _principal(user, client_id, ip)
    name: str | None
    if plan_file is not None:
        if manifests:
            raise ClusterConfigError("give manifests or --plan FILE, not both")
        saved = load_saved_plan(plan_file)
        before_index = QuotaIndex(saved.plan.before_entries())
        after_index = QuotaIndex(saved.plan.after_entries())
        before, after, changed = explain_change(
            before_index, after_index, principal, include_overrides=include_overrides
        )
        where = f"saved plan {plan_file} for cluster {saved.plan.cluster!r}"
        if not saved.plan.sees_whole_cluster:
            where += "; live entities outside its scope are not in it"
        document = explain_document(
            after, source="plan", cluster=saved.plan.cluster, before=before, changed=changed
        )
        emit(
            document,
            output,
            text=lambda _: render_explain_text(after, where=where, before=before, changed=changed),
            markdown=lambda _: render_explain_markdown(
                after, where=where, before=before, changed=changed
            ),
            json=render_explain_json,
        )
        return
    if manifests:
        desired = load_manifests(manifests, cluster=cluster)
        index = QuotaIndex(desired.quotas)
        where = (
            f"the manifests for cluster {desired.cluster!r}, offline: entities outside "
            "their scope are not known"
        )
        source, name = "manifests", desired.cluster
    else:
        found = target(cluster, config, bootstrap_server, command_config, timeout=timeout)
        with connect(found.settings, read_only=True, cluster_id=found.cluster_id) as client:
            cluster_id = client.cluster_id()
            live = describe_matching(client, None, cluster_id=cluster_id)
        index = QuotaIndex(live.entities)
        name = found.cluster
        where = f"the live cluster {cluster_id} ({len(live.entities)} entities)"
        source = "cluster"
    explanation = explain(index, principal, include_overrides=include_overrides)
    emit(
        explain_document(explanation, source=source, cluster=name),
        output,
        text=lambda _: render_explain_text(explanation, where=where),
        markdown=lambda _: render_explain_markdown(explanation, where=where),
        json=render_explain_json,
    )


def register(app: typer.Typer) -> None:
    """Add ``explain`` to ``app``."""
    app.command("explain")(explain_command)
