"""``quotaform sandbox up | status | down``: a local single-node Kafka broker.

``up`` prints only the bootstrap address (``127.0.0.1:PORT``) on standard
output, so ``export QUOTAFORM_BOOTSTRAP_SERVER=$(quotaform sandbox up)`` works;
progress goes to standard error.

Exit codes of ``status`` (as LSB init scripts): 0 running and answering,
3 not running, 4 process alive but not answering (still starting, or hung).
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from quotaform.errors import EXIT_SANDBOX_NOT_RUNNING, EXIT_SANDBOX_UNRESPONSIVE
from quotaform.sandbox import (
    DEFAULT_KAFKA_VERSION,
    DEFAULT_SANDBOX_NAME,
    BrokerOptions,
    SandboxState,
    broker_status,
    ensure_kafka_jars,
    start_broker,
    stop_broker,
)
from quotaform.sandbox.jars import ensure_jmx_exporter
from quotaform.sandbox.jmx import jmx_url

__all__ = ["sandbox_app"]

sandbox_app = typer.Typer(
    name="sandbox",
    help="Run a local single-node KRaft Kafka broker (needs Java 17+; Maven on first use).",
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
            "with Kafka's JmxTool; quota groups are kafka.server:type=Produce|Fetch|Request,*).",
        ),
    ] = False,
) -> None:
    """Start the sandbox broker (or find it running) and print its bootstrap address."""
    broker = start_broker(
        version=kafka_version,
        name=name,
        timeout_s=timeout,
        on_progress=lambda message: _stderr.print(message, markup=False),
        options=BrokerOptions(jmx_port=0) if jmx else None,
    )
    _stderr.print(
        f"Sandbox {name!r}: Kafka {broker.version}, cluster id {broker.cluster_id}, "
        f"pid {broker.pid}, log {broker.log_path}",
        markup=False,
    )
    if broker.jmx_port is not None:
        _stderr.print(f"JMX: {jmx_url(broker.jmx_port)}", markup=False)
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
    """Show whether the sandbox runs (exit 0 running, 3 not running, 4 not answering)."""
    found = broker_status(name=name)
    broker = found.broker
    if broker is None:
        typer.echo(f"Sandbox {name!r} is not running.")
        raise typer.Exit(EXIT_SANDBOX_NOT_RUNNING)
    typer.echo(
        f"Sandbox {name!r} is {found.state.value}: {broker.bootstrap}, Kafka {broker.version}, "
        f"cluster id {broker.cluster_id}, pid {broker.pid}, data {broker.data_dir}"
        + (f", JMX {jmx_url(broker.jmx_port)}" if broker.jmx_port is not None else "")
    )
    if found.state is not SandboxState.RUNNING:
        raise typer.Exit(EXIT_SANDBOX_UNRESPONSIVE)


@sandbox_app.command("down")
def down(name: Name = DEFAULT_SANDBOX_NAME) -> None:
    """Stop the sandbox broker and delete its data (nothing to do if it is not running)."""
    broker = stop_broker(name=name)
    if broker is None:
        _stderr.print(f"Sandbox {name!r} is not running.", markup=False)
    else:
        _stderr.print(
            f"Stopped sandbox {name!r} (pid {broker.pid}) and removed {broker.data_dir}",
            markup=False,
        )


def register(app: typer.Typer) -> None:
    """Add the ``sandbox`` command group to ``app``."""
    app.add_typer(sandbox_app, name="sandbox", help="Run a local single-node Kafka broker.")
