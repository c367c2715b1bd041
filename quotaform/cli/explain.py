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

from quotaform.app.common import ConnectionOptions
from quotaform.app.explain import ExplainRequest, run_explain
from quotaform.cli.options import (
    CONNECTION,
    Output,
    with_connection,
)
from quotaform.cli.output import OutputFormat, emit, make_console
from quotaform.cli.view import make_view
from quotaform.formats.explain import explain_document, render_explain_json
from quotaform.render.explain import WIDTH, render_explain_markdown, render_explain_text

__all__ = ["explain_command", "register"]


ExplainManifests = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Manifest files or directories to explain offline; without them, the live "
        "cluster is read.",
        metavar="PATH",
        show_default=False,
    ),
]

ExplainUser = Annotated[
    str | None,
    typer.Option(
        "--user", metavar="NAME", help="The user principal (ANONYMOUS when unauthenticated)."
    ),
]

ExplainClientId = Annotated[
    str | None,
    typer.Option(
        "--client-id",
        metavar="ID",
        help='The client.id it sends ("" for none). Left out: unknown, and the answer '
        "covers what is certain.",
    ),
]

ExplainIp = Annotated[
    str | None, typer.Option("--ip", metavar="ADDRESS", help="A client address (ip quotas).")
]

ExplainPlanFile = Annotated[
    Path | None,
    typer.Option(
        "--plan",
        metavar="PLANFILE",
        help="Explain a saved plan: before and after, side by side (offline).",
        show_default=False,
    ),
]

ExplainIncludeOverrides = Annotated[
    bool,
    typer.Option(
        "--include-overrides",
        help="Also list the less specific entries that match but are overridden (*).",
    ),
]


@with_connection
def explain_command(
    manifests: ExplainManifests = None,
    user: ExplainUser = None,
    client_id: ExplainClientId = None,
    ip: ExplainIp = None,
    plan_file: ExplainPlanFile = None,
    include_overrides: ExplainIncludeOverrides = False,
    output: Output = OutputFormat.text,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Which quota a client really gets per key, from which entry (level), and
    which quota group (metric tags) it shares on each broker. Live: on how
    many brokers, and whether a custom quota callback decides instead.

    Sources: manifests (PATHS, offline; --cluster picks a cluster of a
    multi-cluster set), a saved plan (--plan FILE: before -> after), or the
    live cluster (no PATHS). JSON: schemas/explain.schema.json.
    """
    run = run_explain(
        ExplainRequest(
            user=user,
            client_id=client_id,
            ip=ip,
            manifests=tuple(manifests or ()),
            plan_file=plan_file,
            include_overrides=include_overrides,
            connection=connection,
            view=make_view(),
        )
    )
    console = make_console()
    # Wrapped to the terminal, or to 80 columns in a pipe or a log.
    width = console.width if console.is_terminal else WIDTH
    emit(
        explain_document(
            run.explanation,
            source=run.source,
            cluster=run.cluster,
            before=run.before,
            changed=run.changed,
            enforcement=run.enforcement,
        ),
        output,
        text=lambda _: render_explain_text(
            run.explanation,
            where=run.where,
            before=run.before,
            changed=run.changed,
            width=width,
            enforcement=run.enforcement,
        ),
        markdown=lambda _: render_explain_markdown(
            run.explanation,
            where=run.where,
            before=run.before,
            changed=run.changed,
            enforcement=run.enforcement,
        ),
        json=render_explain_json,
        console=console,
    )


def register(app: typer.Typer) -> None:
    """Add ``explain`` to ``app``."""
    app.command("explain")(explain_command)
