"""``quotaform sandbox up | status | down``: a local KRaft Kafka sandbox, one
combined node by default, or ``--brokers N --controllers M`` separate processes.

``up`` prints only the bootstrap address (``127.0.0.1:PORT``, with several
brokers each one's, comma-separated) on standard output, so
``export QUOTAFORM_BOOTSTRAP_SERVER=$(quotaform sandbox up)`` works; progress
goes to standard error.

Exit codes of ``status`` (as LSB init scripts): 0 running and answering,
3 not running, 4 processes alive but not answering (still starting, or hung),
or some nodes down.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from quotaform.errors import EXIT_SANDBOX_NOT_RUNNING, EXIT_SANDBOX_UNRESPONSIVE, SandboxError
from quotaform.sandbox import (
    DEFAULT_KAFKA_VERSION,
    DEFAULT_SANDBOX_NAME,
    BrokerOptions,
    SandboxBroker,
    SandboxState,
    active_controller,
    broker_status,
    ensure_kafka_jars,
    start_broker,
    stop_broker,
)
from quotaform.sandbox.broker import default_state_dir
from quotaform.sandbox.exporter import exporter_url, sandbox_exporter_config
from quotaform.sandbox.jars import ensure_jmx_exporter
from quotaform.sandbox.jmx import jmx_url

__all__ = ["sandbox_app"]

sandbox_app = typer.Typer(
    name="sandbox",
    help="Run a local KRaft Kafka sandbox: one node, or several brokers and controllers "
    "(needs Java 17+; Maven on first use).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

_stderr = Console(stderr=True, highlight=False, soft_wrap=True)

Name = Annotated[
    str,
    typer.Option(
        "--name",
        help="Sandbox name; several named sandboxes can run side by side.",
    ),
]


@sandbox_app.command("up")
def up(
    kafka_version: Annotated[
        str, typer.Option("--kafka-version", help="Apache Kafka release to run.")
    ] = DEFAULT_KAFKA_VERSION,
    name: Name = DEFAULT_SANDBOX_NAME,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1.0,
            help="Seconds to wait for the broker to answer (jar download not included).",
        ),
    ] = 90.0,
    jmx: Annotated[
        bool,
        typer.Option(
            "--jmx",
            help="Expose the broker's metrics over JMX on a free loopback port (read them "
            "with Kafka's JmxTool; quota groups are kafka.server:type=Produce|Fetch|Request,*); "
            "with several brokers, one port per broker.",
        ),
    ] = False,
    brokers: Annotated[
        int | None,
        typer.Option(
            "--brokers",
            min=1,
            help="Broker processes. With 1 broker and 1 controller (the default) the "
            "sandbox is one combined KRaft node. Not given: as many as the running "
            "sandbox has.",
            show_default="1",
        ),
    ] = None,
    controllers: Annotated[
        int | None,
        typer.Option(
            "--controllers",
            min=1,
            help="Controller processes of the metadata quorum (3 survive the loss of one). "
            "Not given: as many as the running sandbox has.",
            show_default="1",
        ),
    ] = None,
    exporter: Annotated[
        Path | None,
        typer.Option(
            "--exporter",
            metavar="RULES",
            help="Run the Prometheus JMX exporter agent on each broker with these rules (a "
            "jmx_exporter config, a Strimzi metrics ConfigMap, or a list of rules such as "
            "examples/prometheus/jmx-exporter-quota-rules.yml) and print its /metrics URL; "
            "python -m quotaform.sandbox.prometheus --sandbox NAME scrapes it.",
        ),
    ] = None,
) -> None:
    """Start the sandbox (or find it running) and print its bootstrap address(es).\f

    (Over 80 lines: 55 of them the declarations of its seven options.)"""
    options = None
    if jmx or exporter is not None:
        rules = None
        if exporter is not None:
            text = sandbox_exporter_config(exporter)  # SandboxError: one error line
            rules = default_state_dir() / f"{name}.exporter.yaml"
            rules.parent.mkdir(parents=True, exist_ok=True)
            rules.write_text(text, encoding="utf-8")
        options = BrokerOptions(jmx_port=0 if jmx else None, prometheus_rules=rules)
    broker = start_broker(
        version=kafka_version,
        name=name,
        timeout_s=timeout,
        on_progress=lambda message: _stderr.print(message, markup=False),
        options=options,
        brokers=brokers,
        controllers=controllers,
    )
    if broker.single_node:
        _stderr.print(
            f"Sandbox {name!r}: Kafka {broker.version}, cluster id {broker.cluster_id}, "
            f"pid {broker.pid}, log {broker.log_path}",
            markup=False,
        )
        if broker.jmx_port is not None:
            _stderr.print(f"JMX: {jmx_url(broker.jmx_port)}", markup=False)
        if broker.prometheus_port is not None:
            _stderr.print(
                f"Prometheus exporter: {exporter_url(broker.prometheus_port)}", markup=False
            )
    else:
        _stderr.print(
            f"Sandbox {name!r}: Kafka {broker.version}, cluster id {broker.cluster_id}, "
            f"data {broker.data_dir}",
            markup=False,
        )
        for line in _node_lines(broker, set()):
            _stderr.print(line, markup=False)
    typer.echo(broker.bootstrap)


@sandbox_app.command("fetch")
def fetch(
    kafka_version: Annotated[
        str, typer.Option("--kafka-version", help="Apache Kafka release to fetch.")
    ] = DEFAULT_KAFKA_VERSION,
) -> None:
    """Download the broker's jars and the Prometheus JMX exporter's with Maven into
    the cache (once) and print the broker jars' folder."""
    libs = ensure_kafka_jars(
        kafka_version, on_progress=lambda message: _stderr.print(message, markup=False)
    )
    ensure_jmx_exporter(on_progress=lambda message: _stderr.print(message, markup=False))
    typer.echo(str(libs))


@sandbox_app.command("status")
def status(name: Name = DEFAULT_SANDBOX_NAME) -> None:
    """Show whether the sandbox runs (exit 0 running, 3 not running, 4 not answering or
    some nodes down)."""
    found = broker_status(name=name)
    broker = found.broker
    if broker is None:
        typer.echo(f"Sandbox {name!r} is not running.")
        raise typer.Exit(EXIT_SANDBOX_NOT_RUNNING)
    if broker.single_node:
        typer.echo(
            f"Sandbox {name!r} is {found.state.value}: {broker.bootstrap}, Kafka "
            f"{broker.version}, cluster id {broker.cluster_id}, pid {broker.pid}, data "
            f"{broker.data_dir}"
            + (f", JMX {jmx_url(broker.jmx_port)}" if broker.jmx_port is not None else "")
            + (
                f", exporter {exporter_url(broker.prometheus_port)}"
                if broker.prometheus_port is not None
                else ""
            )
        )
    else:
        leader = "unknown"
        if found.state is not SandboxState.UNRESPONSIVE:
            with contextlib.suppress(SandboxError):
                leader = str(active_controller(name=name, timeout_s=5.0))
        typer.echo(
            f"Sandbox {name!r} is {found.state.value}: {broker.bootstrap}, Kafka "
            f"{broker.version}, cluster id {broker.cluster_id}, "
            f"{len(broker.brokers)} brokers, {len(broker.controllers)} controllers "
            f"(active controller: {leader}), data {broker.data_dir}"
        )
        for line in _node_lines(broker, set(found.down)):
            typer.echo(line)
    if found.state is not SandboxState.RUNNING:
        raise typer.Exit(EXIT_SANDBOX_UNRESPONSIVE)


@sandbox_app.command("down")
def down(name: Name = DEFAULT_SANDBOX_NAME) -> None:
    """Stop the sandbox broker and delete its data (nothing to do if it is not running)."""
    broker = stop_broker(name=name)
    if broker is None:
        _stderr.print(f"Sandbox {name!r} is not running.", markup=False)
    else:
        pids = ", ".join(str(n.pid) for n in broker.nodes)
        _stderr.print(
            f"Stopped sandbox {name!r} (pid{'' if broker.single_node else 's'} {pids}) "
            f"and removed {broker.data_dir}",
            markup=False,
        )


def _node_lines(broker: SandboxBroker, down: set[int]) -> list[str]:
    """One line per node: ``  broker 2: 127.0.0.1:PORT, pid N, running, log ...``."""
    lines = []
    for node in broker.nodes:
        extra = ""
        if node.solo_port is not None:
            extra += f" (only this broker: {node.solo_address})"
        if node.jmx_port is not None:
            extra += f", JMX {jmx_url(node.jmx_port)}"
        if node.prometheus_port is not None:
            extra += f", exporter {exporter_url(node.prometheus_port)}"
        state = "down" if node.node_id in down else "running"
        lines.append(
            f"  {node.label}: {node.address}{extra}, pid {node.pid}, {state}, log {node.log_path}"
        )
    return lines


def register(app: typer.Typer) -> None:
    """Add the ``sandbox`` command group to ``app``."""
    app.add_typer(
        sandbox_app,
        name="sandbox",
        help="Run a local Kafka sandbox (one node, or several brokers and controllers).",
    )
