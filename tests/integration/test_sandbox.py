"""The sandbox broker and Kafka's own ConfigCommand, against a real broker."""

from __future__ import annotations

import functools
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest
from kafka import KafkaAdminClient
from typer.testing import CliRunner

from quotaform.cli.sandbox import sandbox_app
from quotaform.errors import EXIT_SANDBOX_NOT_RUNNING, SandboxError
from quotaform.sandbox import (
    SandboxBroker,
    SandboxState,
    broker_status,
    parse_quota_describe,
    run_config_command,
    start_broker,
    stop_broker,
)
from quotaform.sandbox.broker import default_state_dir
from tests.integration.helpers import eventually

pytestmark = pytest.mark.broker

BOOTSTRAP_RE = re.compile(r"^127\.0\.0\.1:\d{1,5}$")

ConfigCommand = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]


def test_broker_answers_with_the_cluster_id_it_was_formatted_with(
    kafka_broker: SandboxBroker,
) -> None:
    assert BOOTSTRAP_RE.match(kafka_broker.bootstrap)
    admin = KafkaAdminClient(bootstrap_servers=kafka_broker.bootstrap, request_timeout_ms=10000)
    try:
        cluster = admin.describe_cluster()
    finally:
        admin.close()
    assert cluster["cluster_id"] == kafka_broker.cluster_id
    assert [b["port"] for b in cluster["brokers"]] == [kafka_broker.port]


def test_status_reports_the_session_broker_running(kafka_broker: SandboxBroker) -> None:
    status = broker_status(name=kafka_broker.name)
    assert status.state is SandboxState.RUNNING
    assert status.broker == kafka_broker


def test_up_is_idempotent_for_a_running_sandbox(kafka_broker: SandboxBroker) -> None:
    again = start_broker(version=kafka_broker.version, name=kafka_broker.name, timeout_s=30)
    assert again == kafka_broker


def test_up_refuses_another_version_under_a_running_name(kafka_broker: SandboxBroker) -> None:
    with pytest.raises(SandboxError, match=r"already runs Kafka .* sandbox down --name"):
        start_broker(version="3.9.9", name=kafka_broker.name)


@pytest.fixture
def own_jvm_config_command(kafka_broker: SandboxBroker) -> ConfigCommand:
    """quotaform's :func:`~quotaform.sandbox.run_config_command` (a JVM per
    call) on the session broker; the ``config_command`` fixture runs the same
    tool warm (``tests/configcommand.py``)."""
    return functools.partial(
        run_config_command, bootstrap=kafka_broker.bootstrap, version=kafka_broker.version
    )


def test_config_command_describes_users_on_the_printed_address(
    own_jvm_config_command: ConfigCommand,
) -> None:
    proc = own_jvm_config_command(["--describe", "--entity-type", "users"])
    assert proc.returncode == 0
    for line in proc.stdout.splitlines():
        assert line.startswith("Quota configs for "), line


@pytest.mark.parametrize("runner", ["own_jvm_config_command", "config_command"])
def test_config_command_failure_raises_with_the_tools_message(
    runner: str, request: pytest.FixtureRequest
) -> None:
    config_command: ConfigCommand = request.getfixturevalue(runner)
    with pytest.raises(SandboxError, match=r"(?s)exit 1.*Invalid entity type bogus"):
        config_command(["--describe", "--entity-type", "bogus"])


@pytest.fixture
def quota_entities(config_command: ConfigCommand) -> Iterator[dict[str, list[str]]]:
    """Sets quotas on several entity shapes with ConfigCommand; removes them after."""
    tag = uuid.uuid4().hex[:8]
    user, client = f"sbx-{tag}-alice", f"sbx-{tag}-app"
    ip = f"192.0.2.{int(tag[:2], 16) % 250 + 1}"
    user_args = ["--entity-type", "users", "--entity-name", user]
    alters: dict[str, tuple[str, list[str]]] = {
        f"user-principal '{user}'": (
            "producer_byte_rate=1024,consumer_byte_rate=10000000",
            user_args,
        ),
        "the default user-principal": (
            "request_percentage=150",
            ["--entity-type", "users", "--entity-default"],
        ),
        f"user-principal '{user}', client-id '{client}'": (
            "request_percentage=12.5",  # byte rates must be whole numbers
            [*user_args, "--entity-type", "clients", "--entity-name", client],
        ),
        f"user-principal '{user}', the default client-id": (
            "controller_mutation_rate=5",
            [*user_args, "--entity-type", "clients", "--entity-default"],
        ),
        f"ip '{ip}'": (
            "connection_creation_rate=10",
            ["--entity-type", "ips", "--entity-name", ip],
        ),
    }
    done: list[tuple[str, list[str]]] = []
    try:
        for config, entity_args in alters.values():
            config_command(["--alter", "--add-config", config, *entity_args])
            done.append((config, entity_args))
        yield {label: entity_args for label, (_, entity_args) in alters.items()}
    finally:
        for config, entity_args in done:
            keys = ",".join(item.split("=")[0] for item in config.split(","))
            config_command(["--alter", "--delete-config", keys, *entity_args])


def test_parse_quota_describe_reads_real_config_command_output(
    config_command: ConfigCommand, quota_entities: dict[str, list[str]]
) -> None:
    labels = list(quota_entities)
    user_label, default_label, pair_label, pair_default_label, ip_label = labels
    user = user_label.split("'")[1]

    def describe(*args: str) -> dict[str, dict[str, float]]:
        return parse_quota_describe(config_command(["--describe", *args]).stdout)

    got = eventually(
        lambda: describe("--entity-type", "users", "--entity-name", user),
        lambda d: user_label in d,
    )
    assert got == {user_label: {"producer_byte_rate": 1024.0, "consumer_byte_rate": 1.0e7}}

    got = describe("--entity-type", "users", "--entity-default")
    assert set(got) == {default_label}
    assert got[default_label]["request_percentage"] == 150.0

    got = describe("--entity-type", "users", "--entity-name", user, "--entity-type", "clients")
    assert got == {
        pair_label: {"request_percentage": 12.5},
        pair_default_label: {"controller_mutation_rate": 5.0},
    }

    ip = ip_label.split("'")[1]
    got = describe("--entity-type", "ips", "--entity-name", ip)
    assert got == {ip_label: {"connection_creation_rate": 10.0}}


def test_parse_quota_describe_handles_every_printed_shape() -> None:
    # Lines exactly as ConfigCommand 4.3.1 printed them against the sandbox.
    stdout = (
        "Quota configs for the default user-principal are producer_byte_rate=2048.0\n"
        "Quota configs for user-principal 'alice' are consumer_byte_rate=1.0E7, "
        "producer_byte_rate=1024.0\n"
        "Quota configs for user-principal '<default>' are producer_byte_rate=1.0\n"
        "Quota configs for user-principal 'we, are \"odd\"' are producer_byte_rate=1.0\n"
        "Quota configs for the default client-id are producer_byte_rate=4096.0\n"
        "Quota configs for user-principal 'alice', the default client-id are "
        "request_percentage=60.0\n"
        "Quota configs for the default user-principal, client-id 'app9' are "
        "request_percentage=75.0\n"
        "Quota configs for the default user-principal, the default client-id are "
        "request_percentage=70.0\n"
        "Quota configs for the default ip are connection_creation_rate=20.0\n"
        "SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-256=iterations=8192\n"
    )
    assert parse_quota_describe(stdout) == {
        "the default user-principal": {"producer_byte_rate": 2048.0},
        "user-principal 'alice'": {"consumer_byte_rate": 1.0e7, "producer_byte_rate": 1024.0},
        "user-principal '<default>'": {"producer_byte_rate": 1.0},
        "user-principal 'we, are \"odd\"'": {"producer_byte_rate": 1.0},
        "the default client-id": {"producer_byte_rate": 4096.0},
        "user-principal 'alice', the default client-id": {"request_percentage": 60.0},
        "the default user-principal, client-id 'app9'": {"request_percentage": 75.0},
        "the default user-principal, the default client-id": {"request_percentage": 70.0},
        "the default ip": {"connection_creation_rate": 20.0},
    }
    with pytest.raises(ValueError, match="unexpected"):
        parse_quota_describe("Quota configs for user-principal 'x' is broken\n")


def test_cli_up_status_down_on_a_separate_sandbox() -> None:
    name = f"pytest-cli-{os.getpid()}"
    runner = CliRunner()
    try:
        up = runner.invoke(sandbox_app, ["up", "--name", name, "--timeout", "90"])
        assert up.exit_code == 0, (up.stderr, up.exception)
        bootstrap = up.stdout.strip()
        assert BOOTSTRAP_RE.match(bootstrap), up.stdout
        assert up.stdout == bootstrap + "\n"  # the address is the only stdout line

        running = broker_status(name=name)
        assert running.broker is not None
        data_dir = running.broker.data_dir
        assert data_dir.is_dir()

        status = runner.invoke(sandbox_app, ["status", "--name", name])
        assert status.exit_code == 0, status.output
        assert "running" in status.stdout and bootstrap in status.stdout

        down = runner.invoke(sandbox_app, ["down", "--name", name])
        assert down.exit_code == 0, (down.stderr, down.exception)
        assert not data_dir.exists()
        assert not (default_state_dir() / f"{name}.json").exists()
        assert not _pid_alive(running.broker.pid)

        gone = runner.invoke(sandbox_app, ["status", "--name", name])
        assert gone.exit_code == EXIT_SANDBOX_NOT_RUNNING
        assert "not running" in gone.stdout
    finally:
        stop_broker(name=name)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
