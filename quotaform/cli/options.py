"""Options shared by several commands: the manifests, the connection
(``--bootstrap-server``, ``--command-config``), cluster selection
(``--cluster``, ``--config``, ``--all-clusters``; gathered into one
:class:`~quotaform.app.common.ConnectionOptions` by :func:`connection`),
``--output``, and the
change budget of ``plan`` / ``apply`` (``--allow-deletes``, ``--max-deletes``
..., ``--allow-relax``), gathered into one
:class:`~quotaform.plan.state.ChangeBudget` by :func:`budget_flags`.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer

from quotaform.app.common import ConnectionOptions
from quotaform.cli.output import OutputFormat
from quotaform.cluster.profiles import DEFAULT_CONFIG_FILE, ENV_CONFIG
from quotaform.cluster.wire.connection import ENV_BOOTSTRAP, ENV_COMMAND_CONFIG
from quotaform.plan.facts import VolumeSource
from quotaform.plan.state import ChangeBudget

__all__ = [
    "BUDGET",
    "CONNECTION",
    "VOLUMES",
    "AllClustersOption",
    "AllowDefaultRemovalOption",
    "AllowDeletes",
    "AllowMassDeleteOption",
    "AllowRelaxOption",
    "BootstrapServer",
    "ClusterOption",
    "CommandConfig",
    "ConfigOption",
    "Manifests",
    "MaxDeleteFractionOption",
    "MaxDeletesOption",
    "MaxRelaxFactorOption",
    "Output",
    "Timeout",
    "budget_flags",
    "connection",
    "expands",
    "principals_option",
    "volume_source",
    "with_budget",
    "with_connection",
    "with_volumes",
]

Manifests = Annotated[
    list[Path],
    typer.Argument(
        help="Manifest files or directories (searched recursively for *.yaml, *.yml).",
        metavar="PATH",
        show_default=False,
    ),
]
BootstrapServer = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        envvar=ENV_BOOTSTRAP,
        metavar="HOST:PORT",
        help="Kafka bootstrap server(s), HOST:PORT[,HOST:PORT].",
        show_default=False,
    ),
]
CommandConfig = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        envvar=ENV_COMMAND_CONFIG,
        metavar="FILE",
        help="Kafka client properties file (security.protocol, sasl.*, ssl.*), as for "
        "kafka-configs. Secrets may come from QUOTAFORM_SASL_USERNAME / "
        "QUOTAFORM_SASL_PASSWORD instead.",
        show_default=False,
    ),
]
Timeout = Annotated[
    float | None,
    typer.Option(
        "--timeout",
        min=0.1,
        metavar="SECONDS",
        help="Give up reaching a bootstrap server, and any one request, after this "
        "long (default: 15 s to connect, 30 s per request).",
        show_default=False,
    ),
]
Output = Annotated[
    OutputFormat,
    typer.Option("--output", "-o", metavar="text|json|markdown", help="How to print the report."),
]
AllowDeletes = Annotated[
    bool,
    typer.Option(
        "--allow-deletes",
        help="Allow deleting in-scope entities that no manifest declares "
        "(same as spec.allowDeletes: true).",
    ),
]
ClusterOption = Annotated[
    str | None,
    typer.Option(
        "--cluster",
        metavar="NAME",
        help="Target this cluster: connect with its profile from the cluster profiles "
        "file and load the manifests for it (documents naming it, and shared ones). "
        "Not with --bootstrap-server / --command-config.",
        show_default=False,
    ),
]
ConfigOption = Annotated[
    Path | None,
    typer.Option(
        "--config",
        envvar=ENV_CONFIG,
        metavar="FILE",
        help=f"Cluster profiles file (default: ./{DEFAULT_CONFIG_FILE}). Holds no "
        "secrets: profiles name environment variables or files instead.",
        show_default=False,
    ),
]
AllClustersOption = Annotated[
    bool,
    typer.Option(
        "--all-clusters",
        help="Plan every cluster the manifests name, each with its profile, as one "
        "report. A cluster that fails is reported and the others still run.",
    ),
]


MaxDeletesOption = Annotated[
    int | None,
    typer.Option(
        "--max-deletes",
        min=0,
        metavar="N",
        help="Refuse a plan deleting more entities than this (overrides "
        "spec.changeBudget.maxDeletes).",
        show_default=False,
    ),
]
MaxDeleteFractionOption = Annotated[
    float | None,
    typer.Option(
        "--max-delete-fraction",
        min=0.0,
        max=1.0,
        metavar="FRACTION",
        help="Refuse a plan deleting more than this share of the managed entities, e.g. 0.1.",
        show_default=False,
    ),
]
MaxRelaxFactorOption = Annotated[
    float | None,
    typer.Option(
        "--max-relax-factor",
        min=1.0,
        metavar="FACTOR",
        help="Refuse a plan raising a quota by more than this factor (default 10; a "
        "removal to unlimited always exceeds it).",
        show_default=False,
    ),
]
AllowMassDeleteOption = Annotated[
    bool, typer.Option("--allow-mass-delete", help="Allow deletes beyond the budget.")
]
AllowDefaultRemovalOption = Annotated[
    bool,
    typer.Option(
        "--allow-default-removal", help="Allow deleting a default entity or removing its keys."
    ),
]
AllowRelaxOption = Annotated[
    bool,
    typer.Option("--allow-relax", help="Allow raising or removing quotas beyond the factor."),
]


SnapshotsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--snapshots",
        metavar="PATH",
        help="Storage policy: volume usage from snapshot files or directories (the "
        "Strimzi Volume Metrics snapshot, JSON / JSON Lines; "
        "schemas/volume-snapshot.schema.json) instead of DescribeLogDirs. Repeatable.",
        show_default=False,
    ),
]
FromTopicOption = Annotated[
    str | None,
    typer.Option(
        "--from-topic",
        metavar="TOPIC",
        help="Storage policy: volume usage from this compacted snapshot topic (keyed by "
        "broker id; the latest record per broker wins) instead of DescribeLogDirs.",
        show_default=False,
    ),
]


def volume_source(
    snapshots: SnapshotsOption = None, from_topic: FromTopicOption = None
) -> VolumeSource:
    """The storage policy's volume usage source from ``--snapshots`` /
    ``--from-topic`` (neither: the cluster's DescribeLogDirs).

    Raises:
        typer.BadParameter: both given.
    """
    if snapshots and from_topic:
        raise typer.BadParameter("give --snapshots or --from-topic, not both")
    return VolumeSource(snapshots=tuple(snapshots or ()), topic=from_topic)


def budget_flags(
    *,
    allow_deletes: AllowDeletes = False,
    max_deletes: MaxDeletesOption = None,
    max_delete_fraction: MaxDeleteFractionOption = None,
    max_relax_factor: MaxRelaxFactorOption = None,
    allow_mass_delete: AllowMassDeleteOption = False,
    allow_default_removal: AllowDefaultRemovalOption = False,
    allow_relax: AllowRelaxOption = False,
) -> ChangeBudget:
    """The budget the flags of one run give: a flag not passed is ``None``
    (the manifests' value or the default applies)."""
    return ChangeBudget(
        max_deletes=max_deletes,
        max_delete_fraction=max_delete_fraction,
        max_relax_factor=max_relax_factor,
        allow_deletes=allow_deletes or None,
        allow_mass_delete=allow_mass_delete or None,
        allow_default_removal=allow_default_removal or None,
        allow_relax=allow_relax or None,
    )


def connection(
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    timeout: Timeout = None,
) -> ConnectionOptions:
    """The connection options of one run as one value."""
    return ConnectionOptions(
        cluster=cluster,
        config=config,
        bootstrap_server=bootstrap_server,
        command_config=command_config,
        timeout_s=timeout,
    )


F = TypeVar("F", bound=Callable[..., Any])

#: The defaults a command declares for the values :func:`expands` builds
#: (typer never sees them: the decorator puts the options in their place).
CONNECTION = ConnectionOptions()
BUDGET = ChangeBudget()
VOLUMES = VolumeSource()


def expands(name: str, build: Callable[..., Any]) -> Callable[[F], F]:
    """A decorator for a command taking one value ``name`` that the command
    line spells as several options: typer sees the parameters of ``build``
    (each an ``Annotated`` typer option with its default) where ``name``
    stood, and the command gets ``build(**their values)`` as ``name``. So a
    group of options (the connection, the change budget, the volume source)
    is declared once, by the function that reads it, and every command
    receives one request value."""
    options = [
        p.replace(kind=p.POSITIONAL_OR_KEYWORD)
        for p in inspect.signature(build, eval_str=True).parameters.values()
    ]

    def decorate(command: F) -> F:
        signature = inspect.signature(command, eval_str=True)
        parameters: list[inspect.Parameter] = []
        for parameter in signature.parameters.values():
            parameters += options if parameter.name == name else [parameter]

        @functools.wraps(command)
        def run(**kwargs: Any) -> Any:
            kwargs[name] = build(**{option.name: kwargs.pop(option.name) for option in options})
            return command(**kwargs)

        run.__signature__ = signature.replace(parameters=parameters)  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return decorate


#: ``connection: ConnectionOptions`` becomes the options of :func:`connection`.
with_connection = expands("connection", connection)
#: ``budget: ChangeBudget`` becomes the flags of :func:`budget_flags`.
with_budget = expands("budget", budget_flags)
#: ``volumes: VolumeSource`` becomes ``--snapshots`` and ``--from-topic``.
with_volumes = expands("volumes", volume_source)


def principals_option(values: list[str] | None) -> list[str] | None:
    """Each value of a principal option (``--super-user``) as ``Type:name``
    (:func:`~quotaform.kafka.names.parse_principal`).

    Raises:
        typer.BadParameter: a value that is not ``Type:name``.
    """
    from quotaform.kafka.names import parse_principal

    try:
        return None if values is None else [":".join(parse_principal(v)) for v in values]
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
