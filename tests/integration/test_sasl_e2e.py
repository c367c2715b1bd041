"""Credentials and authorization on a real SASL_PLAINTEXT / SCRAM-SHA-512
broker with the StandardAuthorizer: a wrong password is named at the first
refusal (never printed), a principal without DESCRIBE_CONFIGS is refused at
plan and one without ALTER_CONFIGS at the validate_only pre-check, each
naming the operation and resource it lacks, with nothing applied."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.sandbox import BrokerOptions, SandboxBroker, parse_quota_describe, run_config_command
from tests.conftest import sandbox_broker
from tests.integration.helpers import quota, write_manifest

pytestmark = pytest.mark.broker

#: admin is the super user; alice gets ACLs in a test; bob never has any.
USERS = {"admin": "admin-secret-7f3a", "alice": "alice-secret-9c1d", "bob": "bob-secret-2e8b"}
runner = CliRunner()


@pytest.fixture(scope="module")
def sasl_broker() -> Iterator[SandboxBroker]:
    options = BrokerOptions(scram_users=USERS)
    with sandbox_broker(f"pytest-sasl-{os.getpid()}", options=options) as broker:
        yield broker


def properties(tmp_path: Path, user: str, password: str) -> Path:
    path = tmp_path / f"{user}.properties"
    path.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{user}" password="{password}";\n',
        encoding="utf-8",
    )
    path.chmod(0o600)
    return path


def manifest(tmp_path: Path) -> Path:
    return write_manifest(
        tmp_path / "m.yaml",
        "sasl",
        [quota({"user": "sasl-orders"}, producer_byte_rate="1MiB")],
        scope=[{"shape": "user", "prefixes": {"user": ["sasl-"]}}],
    )


def admin_client(broker: SandboxBroker) -> KafkaAdminClient:
    return KafkaAdminClient(
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
        sasl_plain_username="admin",
        sasl_plain_password=USERS["admin"],
    )


def quotas_on(broker: SandboxBroker, tmp_path: Path) -> dict[str, dict[str, float]]:
    admin = properties(tmp_path, "admin", USERS["admin"])
    proc = run_config_command(
        ["--command-config", str(admin), "--describe", "--entity-type", "users"],
        bootstrap=broker.bootstrap,
        version=broker.version,
    )
    return parse_quota_describe(proc.stdout)


def test_a_wrong_password_is_named_at_the_first_refusal(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    wrong = "not-the-password-5e2b"
    config = properties(tmp_path, "alice", wrong)
    start = time.monotonic()
    result = runner.invoke(
        app,
        [
            "plan",
            str(manifest(tmp_path)),
            "--bootstrap-server",
            sasl_broker.bootstrap,
            "--command-config",
            str(config),
        ],
    )
    elapsed = time.monotonic() - start
    assert result.exit_code == 1, result.output
    assert "Error: authentication failed for SCRAM-SHA-512 user 'alice'" in result.output
    # The cause is said once (kafka-python wraps the error in one of its own class).
    assert result.output.count("SaslAuthenticationFailedError") <= 1, result.output
    assert wrong not in result.output and USERS["alice"] not in result.output
    # It stops at the first refusal instead of retrying for the 15 s connect budget.
    assert elapsed < 10, elapsed


def test_without_describe_configs_plan_names_what_is_missing(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    config = properties(tmp_path, "alice", USERS["alice"])
    result = runner.invoke(
        app,
        [
            "plan",
            str(manifest(tmp_path)),
            "--bootstrap-server",
            sasl_broker.bootstrap,
            "--command-config",
            str(config),
        ],
    )
    assert result.exit_code == 1, result.output
    assert "DescribeClientQuotas was refused: not authorized" in result.output
    assert "needs the DESCRIBE_CONFIGS operation on the CLUSTER resource" in result.output


def test_without_alter_configs_apply_is_refused_at_the_pre_check(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    admin = admin_client(sasl_broker)
    try:
        admin.create_acls(
            [
                ACL(
                    "User:alice",
                    "*",
                    ACLOperation.DESCRIBE_CONFIGS,
                    ACLPermissionType.ALLOW,
                    ResourcePattern(ResourceType.CLUSTER, "kafka-cluster"),
                )
            ]
        )
    finally:
        admin.close()
    config = properties(tmp_path, "alice", USERS["alice"])
    args = ["--bootstrap-server", sasl_broker.bootstrap, "--command-config", str(config)]
    deadline = time.monotonic() + 15  # the ACL reaches the authorizer through metadata
    while True:
        plan = runner.invoke(app, ["plan", str(manifest(tmp_path)), *args])
        if plan.exit_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert plan.exit_code == 0, plan.output
    assert "Plan: 1 to create" in plan.output
    locked = runner.invoke(app, ["apply", str(manifest(tmp_path)), *args, "--auto-approve"])
    assert locked.exit_code == 1, locked.output
    assert "cannot take the apply lock: the principal may not create topic" in locked.output
    result = runner.invoke(
        app, ["apply", str(manifest(tmp_path)), *args, "--auto-approve", "--no-lock"]
    )
    assert result.exit_code == 1, result.output
    assert "AlterClientQuotas was refused: not authorized" in result.output
    assert "needs the ALTER_CONFIGS operation on the CLUSTER resource" in result.output
    assert quotas_on(sasl_broker, tmp_path) == {}


def test_the_right_password_plans_and_applies(sasl_broker: SandboxBroker, tmp_path: Path) -> None:
    config = properties(tmp_path, "admin", USERS["admin"])
    args = ["--bootstrap-server", sasl_broker.bootstrap, "--command-config", str(config)]
    result = runner.invoke(app, ["apply", str(manifest(tmp_path)), *args, "--auto-approve"])
    assert result.exit_code == 0, result.output
    assert USERS["admin"] not in result.output
    assert quotas_on(sasl_broker, tmp_path) == {
        "user-principal 'sasl-orders'": {"producer_byte_rate": 1048576.0}
    }


def test_a_broker_refusing_describe_configs_leaves_the_callback_unknown(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    """bob has no ACLs: DescribeConfigs of the broker is refused, so whether
    it uses a custom quota callback is unknown (named with the broker's error),
    never taken for "no callback"."""
    from quotaform.cluster.brokers import read_quota_enforcement
    from quotaform.cluster.wire import load_connection_settings, open_admin
    from quotaform.kafka.keys import QUOTA_KEYS
    from quotaform.words import enforcement_warning

    settings = load_connection_settings(
        bootstrap_server=sasl_broker.bootstrap,
        command_config=properties(tmp_path, "bob", USERS["bob"]),
    )
    client = open_admin(settings, read_only=True)
    try:
        found = read_quota_enforcement(client)
    finally:
        client.close()
    assert (found.brokers, found.callbacks) == (("1",), {})
    assert found.unreadable["1"].startswith("ClusterAuthorizationFailedError"), found.unreadable
    assert found.resolution_enforced is None
    said = enforcement_warning(found, QUOTA_KEYS)
    assert said is not None and said.startswith(
        "Could not read client.quota.callback.class of broker 1 (ClusterAuthorizationFailedError"
    )
