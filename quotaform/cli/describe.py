"""``quotaform describe``: the live quotas, in ``kafka-configs`` terms.

For people who think in ``kafka-configs --describe``: the same options
(``--entity-type users|clients|ips`` with ``--entity-name NAME`` or
``--entity-default``, or the shorthands ``--user``, ``--client`` (also
``--client-id``, as ``explain`` spells it), ``--ip``,
``--user-defaults``, ``--client-defaults``, ``--ip-defaults``), the same
strict filter (exactly the entities of the given types, as ``ConfigCommand``
sends it), and in text the very lines it prints. Without any entity option,
every live entity. Reads with a read-only client; manifests play no part.

Exit codes: 0 shown (also when nothing matched), 1 error.
"""

from __future__ import annotations

from typing import Annotated

import typer

from quotaform.app.common import ConnectionOptions
from quotaform.app.describe import DescribeRequest, run_describe
from quotaform.cli.options import (
    CONNECTION,
    Output,
    with_connection,
)
from quotaform.cli.output import OutputFormat, emit, make_console, say
from quotaform.cli.view import make_view
from quotaform.cluster.wire.types import FilterComponent
from quotaform.errors import ClusterConfigError
from quotaform.formats.describe import describe_document, render_describe_json
from quotaform.kafka.entity import CLIENT_ID, CONFIG_COMMAND_TYPES, IP, USER, mixes_ip
from quotaform.render.describe import render_describe_markdown, render_describe_text

__all__ = ["describe", "register", "selection"]

_TYPE_NAMES = "|".join(CONFIG_COMMAND_TYPES)


def selection(
    entity_types: list[str],
    entity_names: list[str],
    entity_default: bool,
    shorthands: dict[str, tuple[str | None, bool]],
) -> list[FilterComponent] | None:
    """The strict filter the options ask for (``None``: every entity).

    Args:
        entity_types: ``--entity-type`` values in order (``users``, ``clients``, ``ips``).
        entity_names: ``--entity-name`` values, one per type, paired in order
            (none: every entity of the types).
        entity_default: ``--entity-default``: the default entity of the one type.
        shorthands: entity type -> (``--user``/``--client``/``--ip`` name,
            ``--*-defaults`` given).

    Raises:
        ClusterConfigError: an unknown entity type, a type given twice, a
            number of names other than the types', ``--entity-default`` with
            more than one type (ambiguous: the shorthands say which), or both
            forms for one type.
    """
    chosen: dict[str, FilterComponent] = {}

    def add(entity_type: str, component: FilterComponent) -> None:
        if entity_type in chosen:
            raise ClusterConfigError(f"entity type {entity_type} is given twice")
        chosen[entity_type] = component

    types = []
    for given in entity_types:
        if given not in CONFIG_COMMAND_TYPES:
            raise ClusterConfigError(
                f"--entity-type {given!r}: client quotas have entity types {_TYPE_NAMES}"
            )
        types.append(CONFIG_COMMAND_TYPES[given])
    if entity_names and len(entity_names) != len(types):
        raise ClusterConfigError(
            "give one --entity-name per --entity-type, or none (every entity of the types)"
            + (
                "; for a user and a client id, --user/--client say which is which"
                if len(types) > 1
                else ""
            )
        )
    if entity_default and (len(types) != 1 or entity_names):
        raise ClusterConfigError(
            "--entity-default goes with exactly one --entity-type and no --entity-name; "
            "for a user and a client id use --user/--user-defaults with "
            "--client/--client-defaults"
        )
    unnamed = types[len(entity_names) :]
    for entity_type, name in zip(types, entity_names, strict=False):
        add(entity_type, FilterComponent.exact(entity_type, name))
    for entity_type in unnamed:
        add(
            entity_type,
            FilterComponent.default(entity_type)
            if entity_default
            else FilterComponent.any(entity_type),
        )
    for entity_type, (short_name, default) in shorthands.items():
        if short_name is not None and default:
            raise ClusterConfigError(f"give a {entity_type} name or its defaults option, not both")
        if short_name is not None:
            add(entity_type, FilterComponent.exact(entity_type, short_name))
        elif default:
            add(entity_type, FilterComponent.default(entity_type))
    if not chosen:
        return None
    if mixes_ip(chosen):
        raise ClusterConfigError("ips cannot be combined with users or clients (KIP-612)")
    order = (USER, CLIENT_ID, IP)
    return [chosen[t] for t in order if t in chosen]


@with_connection
def describe(
    entity_type: Annotated[
        list[str] | None,
        typer.Option(
            "--entity-type",
            metavar=_TYPE_NAMES,
            help="Entity type, as for kafka-configs (repeat for users and clients together).",
            show_default=False,
        ),
    ] = None,
    entity_name: Annotated[
        list[str] | None,
        typer.Option(
            "--entity-name",
            metavar="NAME",
            help="Entity name, paired with the --entity-type options in order; without "
            "one, every entity of the type.",
            show_default=False,
        ),
    ] = None,
    entity_default: Annotated[
        bool,
        typer.Option("--entity-default", help="The default entity of the --entity-type."),
    ] = False,
    user: Annotated[
        str | None, typer.Option("--user", metavar="NAME", help="This user principal.")
    ] = None,
    user_defaults: Annotated[
        bool, typer.Option("--user-defaults", help="The default user.")
    ] = False,
    client: Annotated[
        str | None,
        typer.Option(
            "--client",
            "--client-id",
            metavar="NAME",
            help="This client id (--client-id, as explain spells it, is the same option).",
        ),
    ] = None,
    client_defaults: Annotated[
        bool, typer.Option("--client-defaults", help="The default client id.")
    ] = False,
    ip: Annotated[str | None, typer.Option("--ip", metavar="ADDRESS", help="This IP.")] = None,
    ip_defaults: Annotated[bool, typer.Option("--ip-defaults", help="The default IP.")] = False,
    output: Output = OutputFormat.text,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Show live quotas in kafka-configs terms (read-only client).

    Same options and strict filter as `kafka-configs --describe`; text output
    is its lines ("Quota configs for user-principal 'alice' are ..."),
    markdown a table in readable units, JSON schemas/describe.schema.json.
    Without entity options: every live entity.
    """
    components = selection(
        entity_type or [],
        entity_name or [],
        entity_default,
        {USER: (user, user_defaults), CLIENT_ID: (client, client_defaults), IP: (ip, ip_defaults)},
    )
    live = run_describe(
        DescribeRequest(
            None if components is None else tuple(components),
            connection=connection,
            view=make_view(),
        )
    )
    if not live.entities and output is OutputFormat.text:
        # Like kafka-configs: nothing on standard output; a note for the person.
        say(make_console(stderr=True), "No client quotas match.")
        return
    document = describe_document(live, components)
    emit(
        live,
        output,
        text=render_describe_text,
        markdown=render_describe_markdown,
        json=lambda _: render_describe_json(document),
    )


def register(app: typer.Typer) -> None:
    """Add ``describe`` to ``app``."""
    app.command()(describe)
