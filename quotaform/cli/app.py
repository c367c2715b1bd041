"""The ``quotaform`` command line.

Commands are thin: parse options, call one library function, render, return.
Every :class:`~quotaform.errors.QuotaformError` is caught once, here, printed to
standard error and turned into its documented exit code.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer
from typer.core import TyperGroup

from quotaform import __version__
from quotaform.cli.output import make_console, say
from quotaform.errors import EXIT_OK, QuotaformError

__all__ = ["app", "main"]


class _QuotaformGroup(TyperGroup):
    """Turns a QuotaformError from any subcommand into a message and an exit code."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except QuotaformError as exc:
            say(make_console(stderr=True), str(exc), style="bold red", prefix="Error: ")
            raise typer.Exit(exc.exit_code) from None


app = typer.Typer(
    cls=_QuotaformGroup,
    name="quotaform",
    help="Quota-as-code for Apache Kafka client quotas: manifests, plan, apply.",
    no_args_is_help=True,
    pretty_exceptions_show_locals=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"quotaform {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    verbose: Annotated[
        bool, typer.Option("--verbose", "-v", help="Log progress and RPCs to standard error.")
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Quota-as-code for Apache Kafka client quotas."""
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # quotaform names every failure itself; kafka-python's own retries and
        # reconnects are noise for a CLI user (shown with -v).
        logging.getLogger("kafka").setLevel(logging.CRITICAL)


def _register() -> None:
    from quotaform.cli import apply, drift, export, plan, unlock, validate
    from quotaform.cli.sandbox import sandbox_app

    for module in (validate, plan, apply, drift, export, unlock):
        module.register(app)
    app.add_typer(sandbox_app, name="sandbox", help="Run a local single-node Kafka broker.")


_register()


def main() -> None:
    """Console-script entry point."""
    app()
