"""``quotaform export`` and ``quotaform import``: live quotas into manifests.

Exit codes (both commands): 0 success, 1 error (bad options, an output file
that exists without ``--force``, invalid manifests, wrong cluster, broker
errors, edited manifests that would not load).
"""

from __future__ import annotations

import enum
import sys
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from quotaform.app.common import ConnectionOptions
from quotaform.app.export import ExportRequest, ImportRequest, run_export, run_import
from quotaform.cli.options import (
    CONNECTION,
    with_connection,
)
from quotaform.cli.output import make_console, say
from quotaform.cli.view import make_view
from quotaform.export.build import Skipped
from quotaform.kafka.entity import SHAPE_NAMES

__all__ = ["Shape", "register"]

#: Entity shapes, spelled as in ``spec.scope[].shape`` (from the one shape table).
Shape = enum.StrEnum("Shape", {name: name for name in SHAPE_NAMES})  # type: ignore[misc]


def _warn_skipped(skipped: tuple[Skipped, ...], err: Console) -> None:
    for item in skipped:
        say(
            err,
            f"left out {item.entity.label()}: {item.reason}",
            style="yellow",
            prefix="Warning: ",
        )


@with_connection
def export(
    cluster_name: Annotated[
        str | None,
        typer.Option(
            "--cluster-name",
            help="metadata.cluster of the manifest (default: the --cluster name).",
            show_default=False,
        ),
    ] = None,
    shape: Annotated[
        list[Shape] | None,
        typer.Option(
            "--shape",
            help="Entity shape to export (repeatable). Default: all four.",
            show_default=False,
        ),
    ] = None,
    prefix: Annotated[
        list[str] | None,
        typer.Option(
            "--prefix",
            metavar="TYPE=PREFIX",
            help="Export only names of TYPE starting with PREFIX, e.g. user=svc- "
            "(repeatable; written into spec.scope).",
            show_default=False,
        ),
    ] = None,
    include_defaults: Annotated[
        bool,
        typer.Option(
            "--include-defaults/--exclude-defaults",
            help="Whether default entities ({default: true}) are exported and owned.",
        ),
    ] = True,
    pin_cluster_id: Annotated[
        bool,
        typer.Option(
            "--pin-cluster-id",
            help="Write the live cluster id as metadata.clusterId, so plan refuses "
            "any other cluster.",
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write to this file. Default: standard output.", dir_okay=False),
    ] = None,
    force: Annotated[bool, typer.Option("--force", help="Overwrite --out if it exists.")] = False,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Write a manifest declaring the live quotas in scope (read-only client).

    Planning the written file against the same cluster shows no changes.
    Exit codes: 0 written, 1 error (including an existing --out without --force).
    """
    run = run_export(
        ExportRequest(
            cluster_name=cluster_name,
            shapes=tuple(str(s.value) for s in shape or ()),
            prefixes=tuple(prefix or ()),
            include_defaults=include_defaults,
            pin_cluster_id=pin_cluster_id,
            out=out,
            force=force,
            connection=connection,
            view=make_view(),
        )
    )
    err = make_console(stderr=True)
    _warn_skipped(run.result.skipped, err)
    if run.written_to is None:
        sys.stdout.write(run.result.text)
    count = len(run.result.entities)
    say(
        err,
        f"Exported {count} entit{'y' if count == 1 else 'ies'} ({run.scope}) to "
        f"{run.written_to or 'standard output'}.",
    )


@with_connection
def import_(
    manifests: Annotated[
        list[Path],
        typer.Argument(
            help="The manifest set: files or directories (as for plan).", show_default=False
        ),
    ],
    into: Annotated[
        Path,
        typer.Option(
            "--into",
            help="The manifest file (one of the set) to append new entries to.",
            dir_okay=False,
            show_default=False,
        ),
    ],
    update: Annotated[
        bool,
        typer.Option(
            "--update",
            help="Also overwrite declared values that differ from live (adopt drift), "
            "in the files that declare them.",
        ),
    ] = False,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Add live entities in the manifests' scope that no manifest declares.

    Comments, ordering and quoting of the edited files are kept; the set is
    loaded again after writing and restored if it would not load.
    Exit codes: 0 success (also when nothing was missing), 1 error.
    """
    result = run_import(
        ImportRequest(
            tuple(manifests),
            into=into,
            update=update,
            connection=connection,
            view=make_view(),
        )
    )
    err = make_console(stderr=True)
    _warn_skipped(result.skipped, err)
    for path in result.reformatted:
        say(
            err,
            f"{path} was re-indented to the examples/ layout while editing it.",
            style="yellow",
            prefix="Note: ",
        )
    if not result.changed:
        typer.echo("Nothing to import: the manifests declare every live entity in their scope.")
        return
    out = make_console()
    for entity in result.added:
        say(out, f"  + {entity.label()}")
    for entity, path in result.updated:
        say(out, f"  ~ {entity.label()} ({path})")
    say(
        out,
        f"Imported {len(result.added)} entit{'y' if len(result.added) == 1 else 'ies'} into "
        f"{result.into}; updated {len(result.updated)}.",
    )


def register(app: typer.Typer) -> None:
    """Add export and import to ``app``."""
    app.command()(export)
    app.command("import")(import_)
