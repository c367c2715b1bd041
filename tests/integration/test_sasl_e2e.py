"""Credentials and authorization on a real SASL_PLAINTEXT / SCRAM-SHA-512
broker with the StandardAuthorizer: a wrong password is named at the first
refusal (never printed), a principal without DESCRIBE_CONFIGS is refused at
plan and one without ALTER_CONFIGS at the validate_only pre-check, each
naming the operation and resource it lacks, with nothing applied.

Principals (issue 22): plan warns of user quotas naming no SCRAM user and
of default user quotas that would throttle a super user (given by the
profile or --super-user: the broker hides super.users), notes what it
cannot check, and runs the commands of docs/manifests.md's principals section as shown.
The tests that give alice DESCRIBE_CONFIGS come after the one that needs
her without it."""

from __future__ import annotations

import functools
import json
import re
import shlex
import time
from pathlib import Path
from typing import Any

import kafka.errors as kerrors
import pytest
from kafka import KafkaAdminClient
from kafka.admin import ACL, ACLOperation, ACLPermissionType, ResourcePattern, ResourceType
from kafka.protocol.admin import DescribeUserScramCredentialsRequest
from ruamel.yaml import YAML
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.wire import AlterOutcome, QuotaAdminClient, QuotaAlteration
from quotaform.errors import AuthorizationError
from quotaform.kafka.entity import Entity
from quotaform.sandbox import SandboxBroker, parse_quota_describe
from tests.configcommand import run_config_command
from tests.docblocks import fenced_blocks, file_block, section
from tests.integration.helpers import DEFAULT, SCRAM_USERS, quota, write_manifest

# Under pytest-xdist one worker holds the session's SCRAM broker and the modules using it.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("scram")]

#: admin is the super user; alice gets ACLs in a test; bob never has any.
USERS = SCRAM_USERS
runner = CliRunner()


@pytest.fixture(scope="module")
def sasl_broker(scram_broker: SandboxBroker) -> SandboxBroker:
    """The session's SCRAM broker (shared with the CI workflow tests), without
    client quotas when the module starts."""
    return scram_broker


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


def admin_settings(broker: SandboxBroker) -> dict[str, Any]:
    return {
        "bootstrap_servers": broker.bootstrap,
        "security_protocol": "SASL_PLAINTEXT",
        "sasl_mechanism": "SCRAM-SHA-512",
        "sasl_plain_username": "admin",
        "sasl_plain_password": USERS["admin"],
    }


def admin_client(broker: SandboxBroker) -> KafkaAdminClient:
    return KafkaAdminClient(**admin_settings(broker))


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
    allow_alice_to_describe_configs(sasl_broker)
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


# ----------------------------------------------- principals: SCRAM users, super users

#: What the page runs: its files, commands and outputs (tests/docblocks.py).
PAGE = section("docs/manifests.md", "## Principals: user names, SCRAM users and super users")
PRINCIPALS_SCOPE = [{"shape": "user", "prefixes": {"user": ["p-", "alice", "admin"]}}]
EXEMPT_RE = re.compile(r"spec\.quotas: (- \{.*\}) \(Long\.MAX_VALUE")


def principals_manifest(tmp_path: Path, *extra: dict[str, Any]) -> Path:
    """A default user quota (line 10), a SCRAM user's quota (line 12) and a
    quota for a user the cluster has no SCRAM credentials for (line 14)."""
    return write_manifest(
        tmp_path / "p.yaml",
        "sasl",
        [
            quota({"user": DEFAULT}, producer_byte_rate="1MiB", request_percentage=50),
            quota({"user": "alice"}, producer_byte_rate="2MiB"),
            quota({"user": "p-reporting"}, consumer_byte_rate="5MiB"),
            *extra,
        ],
        scope=PRINCIPALS_SCOPE,
    )


def no_scram_user(path: Path) -> str:
    return (
        f'{path}:14: entity.user: no SCRAM user named "p-reporting" among the '
        f"cluster's {len(USERS)}; "
        'if "p-reporting" authenticates by TLS or OAuth, ignore this'
    )


def throttled_admin(path: Path, given_at: str) -> str:
    limit = 9223372036854775807
    return (
        f"{path}:10: entity: user=<default> would throttle super user User:admin ({given_at}) "
        "for producer_byte_rate, request_percentage: a default applies to every principal "
        "without a more specific entry, the operators' own included; exempt it with an entry "
        'of its own in spec.quotas: - {entity: {user: "admin"}, values: {producer_byte_rate: '
        f"{limit}, request_percentage: {limit}}}}} (Long.MAX_VALUE, what a client without any "
        "quota gets)"
    )


def warning_lines(output: str) -> list[str]:
    return [line.removeprefix("Warning: ") for line in output.splitlines() if "Warning: " in line]


def note_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("Note: ")]


HIDDEN_NOTE = (
    "Note: the brokers do not reveal super.users (broker 1 reports it as sensitive, as "
    "brokers do for the authorizer's settings): default user quotas not checked against "
    "super users; name them with superUsers in the cluster profile (quotaform.clusters.yaml) "
    "or --super-user User:NAME"
)


def test_plan_warns_of_a_user_without_scram_credentials_and_a_default_throttling_a_super_user(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    path = principals_manifest(tmp_path)
    admin = properties(tmp_path, "admin", USERS["admin"])
    profiles = tmp_path / "quotaform.clusters.yaml"
    profiles.write_text(
        f"clusters:\n  sasl:\n    bootstrapServers: {sasl_broker.bootstrap}\n"
        f"    commandConfig: {admin.name}\n    superUsers: [User:admin]\n",
        encoding="utf-8",
    )
    text = runner.invoke(app, ["plan", str(path), "--cluster", "sasl"])
    assert text.exit_code == 0, text.output
    assert warning_lines(text.stdout) == [
        no_scram_user(path),
        throttled_admin(path, f"superUsers at {profiles}:5"),
    ]
    assert note_lines(text.stderr) == []
    args = ["--bootstrap-server", sasl_broker.bootstrap, "--command-config", str(admin)]
    doc = runner.invoke(app, ["plan", str(path), *args, "--super-user", "User:admin", "-o", "json"])
    assert doc.exit_code == 0, doc.output
    assert json.loads(doc.stdout)["warnings"] == [
        no_scram_user(path),
        throttled_admin(path, "--super-user"),
    ]


def test_the_exempt_entry_plan_suggests_silences_it_and_kafka_accepts_it(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    admin = properties(tmp_path, "admin", USERS["admin"])
    args = ["--bootstrap-server", sasl_broker.bootstrap, "--command-config", str(admin)]
    suggestion = EXEMPT_RE.search(throttled_admin(Path("p.yaml"), "--super-user"))
    assert suggestion is not None
    (entry,) = YAML(typ="safe").load(suggestion.group(1))
    path = principals_manifest(tmp_path, entry)
    result = runner.invoke(app, ["plan", str(path), *args, "--super-user", "User:admin"])
    assert result.exit_code == 0, result.output
    assert warning_lines(result.stdout) == [no_scram_user(path)]
    # The controller accepts the exempt values (validate_only: nothing written).
    exempt = Entity.of(user="admin")
    values = {k: float(v) for k, v in entry["values"].items()}
    client = QuotaAdminClient(read_only=False, **admin_settings(sasl_broker))
    try:
        (answer,) = client.alter_client_quotas(
            [QuotaAlteration(exempt, values)], validate_only=True
        ).values()
    finally:
        client.close()
    assert answer.outcome is AlterOutcome.APPLIED, answer


def test_plan_notes_that_brokers_hide_super_users_when_none_are_given(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    path = principals_manifest(tmp_path)
    admin = properties(tmp_path, "admin", USERS["admin"])
    args = ["--bootstrap-server", sasl_broker.bootstrap, "--command-config", str(admin)]
    result = runner.invoke(app, ["plan", str(path), *args])
    assert result.exit_code == 0, result.output
    assert note_lines(result.stderr) == [HIDDEN_NOTE]
    assert warning_lines(result.stdout) == [no_scram_user(path)]


def allow_alice_to_describe_configs(broker: SandboxBroker) -> None:
    admin = admin_client(broker)
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


def test_a_principal_that_may_not_list_scram_users_gets_a_note_at_once(
    sasl_broker: SandboxBroker, tmp_path: Path
) -> None:
    allow_alice_to_describe_configs(sasl_broker)  # what plan needs; not DESCRIBE
    path = principals_manifest(tmp_path)
    alice = properties(tmp_path, "alice", USERS["alice"])
    args = ["plan", str(path), "--bootstrap-server", sasl_broker.bootstrap]
    args += ["--command-config", str(alice)]
    deadline = time.monotonic() + 15  # the ACL reaches the authorizer through metadata
    while True:
        start = time.monotonic()
        result = runner.invoke(app, args)
        elapsed = time.monotonic() - start
        if result.exit_code == 0 or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert result.exit_code == 0, result.output
    notes = fenced_blocks(PAGE, "text")[-1].splitlines()  # the page shows them
    assert note_lines(result.stderr) == notes
    assert notes[1] == HIDDEN_NOTE
    assert warning_lines(result.stdout) == []
    # Refused at once: never the 5 s bound, let alone the 30 s request timeout.
    assert elapsed < 5, elapsed


def test_a_refused_null_user_list_gets_no_answer_so_quotaform_sends_an_empty_one(
    sasl_broker: SandboxBroker,
) -> None:
    """Refused, Kafka's broker fails to build its error answer for a null
    user list (a NullPointerException in
    DescribeUserScramCredentialsRequest.getErrorResponse) and never answers:
    kafka-python's describe_user_scram_credentials() sends null and waits out
    its request timeout. quotaform sends an empty list (refused at once) and
    bounds the wait below the client's 30 s anyway."""
    settings = admin_settings(sasl_broker)
    settings.update(sasl_plain_username="alice", sasl_plain_password=USERS["alice"])
    client = QuotaAdminClient(read_only=True, **settings)  # 30 s per request
    try:
        start = time.monotonic()
        with pytest.raises(AuthorizationError, match="needs the DESCRIBE operation on the CLUSTER"):
            client.describe_scram_users(timeout_ms=5000)
        assert time.monotonic() - start < 2
        null = DescribeUserScramCredentialsRequest(users=None)
        start = time.monotonic()
        with pytest.raises(kerrors.RequestTimedOutError):
            client._manager.run(functools.partial(client._send, null, timeout_ms=1500))
        assert 1.4 <= time.monotonic() - start < 10
    finally:
        client.close()


def test_the_docs_plan_examples_run_as_shown(
    sasl_broker: SandboxBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    prod = tmp_path / "prod"
    prod.mkdir()
    profile = file_block(PAGE, "prod/quotaform.clusters.yaml")
    profile = re.sub(r"bootstrapServers: .*", f"bootstrapServers: {sasl_broker.bootstrap}", profile)
    (prod / "quotaform.clusters.yaml").write_text(profile, encoding="utf-8")
    properties(prod, "admin", USERS["admin"]).rename(prod / "quota-admin.properties")
    manifest = prod / "platform.yaml"
    manifest.write_text(file_block(PAGE, "prod/platform.yaml"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("QUOTAFORM_BOOTSTRAP_SERVER", raising=False)
    commands = fenced_blocks(PAGE, "bash")[1:]
    outputs = fenced_blocks(PAGE, "text")[1:3]
    assert commands == [
        "quotaform plan prod/platform.yaml\n",
        "quotaform plan prod/platform.yaml --super-user User:ops\n",
    ]
    first = runner.invoke(app, shlex.split(commands[0])[1:])
    assert first.exit_code == 0, first.output
    assert warning_lines(first.stdout) == warning_lines(outputs[0])
    # The exempt entry the page shows, added to spec.quotas, silences the warning.
    (exempt,) = [b for b in fenced_blocks(PAGE, "yaml") if b.startswith("    - entity:")]
    manifest.write_text(manifest.read_text(encoding="utf-8") + exempt, encoding="utf-8")
    second = runner.invoke(app, shlex.split(commands[0])[1:])
    assert second.exit_code == 0, second.output
    assert warning_lines(second.stdout) == warning_lines(outputs[0])[:1]
    third = runner.invoke(app, shlex.split(commands[1])[1:])
    assert third.exit_code == 0, third.output
    assert warning_lines(third.stdout) == warning_lines(outputs[1])


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
