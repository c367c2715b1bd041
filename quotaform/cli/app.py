"""The ``quotaform`` command line.

Commands are thin: parse options, call one library function, render, return.
Every :class:`~quotaform.errors.QuotaformError` is caught once, here, printed to
standard error (every line starting with ``Error:``) and turned into its
documented exit code. Usage errors (an unknown option, a missing argument)
exit 1 like every other error, never 2, which ``--detailed-exitcode`` and
``drift`` reserve for "changes present" (see :mod:`quotaform.errors`).

Commands are registered lazily: ``quotaform --help`` and a command import only
what that command needs.
"""

from __future__ import annotations

import gc
import importlib
import os
import sys
from pathlib import Path
from typing import Annotated, Any, get_args

import typer
from typer.core import TyperGroup

from quotaform import __version__
from quotaform.cli.output import disable_colour, make_console, say
from quotaform.errors import EXIT_ERROR, EXIT_OK, QuotaformError

__all__ = ["app", "main"]

#: Command name -> (module under quotaform.cli, one-line summary). Summaries
#: are written here so ``--help`` lists them without importing the commands.
COMMANDS: dict[str, tuple[str, str]] = {
    "validate": ("validate", "Check manifests offline: syntax, fields, values, scope."),
    "plan": ("plan", "Show what apply would change (read-only)."),
    "apply": ("apply", "Apply manifests or a saved plan, safely."),
    "show": ("show", "Show a saved plan file (like terraform show)."),
    "drift": ("drift", "Report how the cluster differs from the manifests (read-only)."),
    "describe": ("describe", "Show live quotas in kafka-configs terms (read-only)."),
    "explain": ("explain", "What quota a client really gets, from where, shared with whom."),
    "analyze": ("analyze", "Fleet analytics: utilisation, plan impact, recommendations."),
    "snapshot": ("analyze", "Write the live quotas as JSON Lines, for analyze (read-only)."),
    "monitor": ("monitor", "Prometheus rules and a Grafana dashboard: usage against real quotas."),
    "export": ("export", "Write a manifest of the live quotas (read-only)."),
    "import": ("export", "Add live entities to an existing manifest (read-only)."),
    "storage": ("storage", "Storage-aware producer quotas: volume usage, state, watch."),
    "unlock": ("unlock", "Release the apply lock a killed apply left behind."),
    "sandbox": ("sandbox", "Run a local single-node Kafka broker."),
}


class _QuotaformGroup(TyperGroup):
    """Lazily registered commands; QuotaformError and usage errors become a
    message and an exit code."""

    def list_commands(self, ctx: Any) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: Any, name: str) -> Any:
        if name not in COMMANDS:
            return None
        if name not in self.commands:
            module = importlib.import_module(_module_of(name))
            one = typer.Typer(rich_markup_mode=None, add_completion=False)
            module.register(one)
            command = typer.main.get_group(one).commands[name]
            command.short_help = COMMANDS[name][1]
            _plain_metavars(command)
            self.commands[name] = command
        return self.commands[name]

    def format_commands(self, ctx: Any, formatter: Any) -> None:
        rows = [(name, summary) for name, (_, summary) in COMMANDS.items()]
        with formatter.section("Commands"):
            formatter.write_dl(rows)

    def parse_args(self, ctx: Any, args: list[str]) -> list[str]:
        return super().parse_args(ctx, _hoist_global_flags(args))

    def make_context(self, info_name: Any, args: Any, parent: Any = None, **extra: Any) -> Any:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except typer.TyperException as exc:
            _as_usage_error(exc)
            raise

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except typer.TyperException as exc:
            _as_usage_error(exc)
            raise
        except QuotaformError as exc:
            say(make_console(stderr=True), str(exc), style="bold red", prefix="Error: ")
            raise typer.Exit(exc.exit_code) from None


#: Root options also accepted after the command (``plan x -no-color``, as in Terraform).
GLOBAL_FLAGS = frozenset({"-v", "--verbose", "--no-color", "-no-color"})


def _module_of(command: str) -> str:
    """The module that defines ``command`` (a key of :data:`COMMANDS`)."""
    return f"quotaform.cli.{COMMANDS[command][0]}"


def _command_index(args: list[str]) -> int | None:
    """Where the command name is in ``args`` (the first word that names one),
    or None."""
    return next((i for i, a in enumerate(args) if a in COMMANDS), None)


def _hoist_global_flags(args: list[str]) -> list[str]:
    """``args`` with the global flags found after the command name moved in
    front of it, so they work on either side (up to a ``--``)."""
    command = _command_index(args)
    if command is None:
        return args
    head, tail = args[: command + 1], args[command + 1 :]
    end = tail.index("--") if "--" in tail else len(tail)
    moved = [a for a in tail[:end] if a in GLOBAL_FLAGS]
    kept = [a for a in tail[:end] if a not in GLOBAL_FLAGS] + tail[end:]
    return moved + head + kept


def _plain_metavars(command: Any) -> None:
    """Give every option and argument of ``command`` (and its subcommands) a
    metavar a person reads (``FILE``, ``N``, ``text|json``), never a Python
    type name such as ``<list[Path]>``, unless the option names its own."""
    for sub in getattr(command, "commands", {}).values():
        _plain_metavars(sub)
    for param in command.params:
        if getattr(param, "is_flag", False):
            continue
        if param.metavar is None:
            param.metavar = _metavar_of(param)
        if param.param_type_name == "argument":
            # typer would print "{PATH}..." and "PATH <list[Path]>"; show "PATH..." in both.
            shown = param.metavar + ("..." if param.nargs != 1 else "")
            shown = shown if param.required else f"[{shown}]"
            param._usage_display_name = lambda shown=shown: shown
            param._rich_display_name = lambda shown=shown: shown
            param.display_type_rich = lambda ctx: None


def _metavar_of(param: Any) -> str:
    kind = param.type_descriptor
    base = kind.annotation
    if kind.is_list:
        (base,) = get_args(base)
    if kind.choices is not None:
        return "|".join(str(getattr(c, "value", c)) for c in kind.choices)
    if base is Path or kind.is_path:
        return str(kind.path_type).upper()
    if base is int:
        return "N"
    if base is float:
        return "SECONDS" if "timeout" in (param.name or "") else "NUMBER"
    return str(param.name or "value").upper().replace("_", "-")


#: click's exit code for usage errors, which quotaform turns into 1.
_CLICK_USAGE = 2


def _as_usage_error(exc: Any) -> None:
    """A usage error (click's exit 2) exits 1: 2 means "changes present". An
    option given before the command gets a hint saying where it goes."""
    if getattr(exc, "exit_code", None) != _CLICK_USAGE:
        return
    exc.exit_code = EXIT_ERROR
    message = exc.format_message()
    ctx = getattr(exc, "ctx", None)
    if ctx is not None and ctx.parent is None and "No such option" in message:
        option = message.split("No such option:", 1)[1].split()[0]
        exc.message = (
            f"{message}. Options of a command go after it, e.g. "
            f"quotaform plan MANIFESTS {option} ... (only -v, --no-color and --version "
            "come before the command)"
        )


app = typer.Typer(
    cls=_QuotaformGroup,
    name="quotaform",
    help="Quota-as-code for Apache Kafka client quotas: manifests, plan, apply.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"quotaform {__version__}")
        raise typer.Exit(EXIT_OK)


@app.callback()
def _root(
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose",
            "-v",
            help="Log quotaform's progress (files loaded, each RPC and its time, the "
            "lock, the apply phases) and kafka-python's own lines to standard error.",
        ),
    ] = False,
    no_color: Annotated[
        bool,
        typer.Option(
            "--no-color",
            "-no-color",
            help="No colours or styles (also: the NO_COLOR environment variable).",
        ),
    ] = False,
    version: Annotated[
        bool,
        typer.Option("--version", callback=_version, is_eager=True, help="Print the version."),
    ] = False,
) -> None:
    """Quota-as-code for Apache Kafka client quotas."""
    if no_color:
        disable_colour()
    import logging  # here: --help never needs it

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    if not verbose:
        # quotaform names every failure itself; kafka-python's own retries and
        # reconnects are noise for a CLI user (shown with -v).
        logging.getLogger("kafka").setLevel(logging.CRITICAL)


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point (``argv``: the arguments, default
    ``sys.argv[1:]``); exits with the command's code."""
    # pydantic looks for plugins among every installed distribution's entry
    # points at its first model (10 ms and more on a full environment); the
    # command line uses none. A value the user set is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _import_command(sys.argv[1:] if argv is None else argv)
    if argv is None:
        app()
    else:
        app(args=argv, prog_name="quotaform")


def _import_command(args: list[str]) -> None:
    """Import the module of the command ``args`` names (if any) with Python's
    cyclic garbage collector paused, then freeze every object alive.

    Importing a command makes about 80,000 objects (classes, functions,
    pydantic's schemas) and no cyclic garbage, yet the collector would scan
    them again and again while they are made (about 100 collections), then
    once more in the interpreter's final collection at exit. Frozen
    (``gc.freeze``), they are never scanned again; the command itself runs
    with the collector as usual, so a long ``storage watch`` frees its
    garbage. ``quotaform plan`` of 100 entities: 0.47 -> 0.36 s
    (benchmarks/README.md). One command per process is the entry point's use:
    objects alive before a second call in the same process stay frozen until
    it exits."""
    index = _command_index(args)
    if index is None:
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        importlib.import_module(_module_of(args[index]))
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
