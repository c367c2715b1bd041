"""Apply never misreports what it did: the connection to a real broker is cut
at chosen points by a fault-injecting proxy (tests/faultproxy.py), and each
apply's per-entity report and exit code are judged by what Kafka's own
ConfigCommand shows once the network is back.

(a) after the validate_only answer, (b) after a real batch is sent and before
its answer, (c) between batches, (d) during read-back.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cli.apply import EXIT_BY_STATUS
from quotaform.cluster.apply import apply_plan
from quotaform.cluster.lock import release
from quotaform.cluster.wire import (
    QuotaAdminClient,
    RetryPolicy,
    load_connection_settings,
    open_admin,
)
from quotaform.kafka.entity import Entity
from quotaform.plan.diff import compute_plan
from quotaform.plan.outcome import ApplyResult, ApplyStatus, EntityOutcome
from quotaform.plan.state import (
    DesiredEntity,
    DesiredState,
    LiveState,
    Scope,
    ScopeRule,
    SourceLocation,
)
from quotaform.sandbox import BrokerOptions, SandboxBroker, parse_quota_describe
from tests.configcommand import run_config_command
from tests.faultproxy import (
    ALTER_CLIENT_QUOTAS,
    API_VERSIONS,
    CUT,
    DESCRIBE_CLIENT_QUOTAS,
    FORWARD,
    FaultProxy,
    Request,
)
from tests.integration.helpers import quota, write_manifest

# Under pytest-xdist one worker runs the whole module: its module fixture starts once.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("faults")]

QUOTAS = {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def proxied(sandbox_broker: Any) -> Iterator[tuple[SandboxBroker, FaultProxy]]:
    """A broker whose clients, after bootstrap, talk through a fault proxy."""
    port = _free_port()
    proxy = FaultProxy(port)
    proxy.up()
    options = BrokerOptions(port=port, advertised_port=proxy.port)
    with sandbox_broker(f"pytest-faults-{os.getpid()}", options=options) as broker:
        yield broker, proxy
    proxy.down()


@pytest.fixture
def proxy(proxied: tuple[SandboxBroker, FaultProxy]) -> Iterator[FaultProxy]:
    _, proxy = proxied
    proxy.reset()
    if not proxy.is_up:
        proxy.up()
    yield proxy
    proxy.reset()
    if not proxy.is_up:
        proxy.up()


def live_users(broker: SandboxBroker, prefix: str) -> dict[str, dict[str, float]]:
    """What Kafka's ConfigCommand shows for users named ``prefix*``."""
    proc = run_config_command(
        ["--describe", "--entity-type", "users"],
        bootstrap=broker.bootstrap,
        version=broker.version,
    )
    found = {}
    for label, quotas in parse_quota_describe(proc.stdout).items():
        name = label.split("'")[1]
        if name.startswith(prefix):
            found[name] = quotas
    return found


def plan_for(prefix: str, n: int = 6):  # type: ignore[no-untyped-def]
    users = [Entity.of(user=f"{prefix}{i}") for i in range(n)]
    desired = DesiredState.build(
        cluster="faults",
        cluster_id=None,
        scope=Scope((ScopeRule.build(("user",)),)),
        entities=[DesiredEntity(e, QUOTAS, False, SourceLocation("m.yaml", 1)) for e in users],
    )
    return compute_plan(desired, LiveState({}))


def client(broker: SandboxBroker) -> QuotaAdminClient:
    """Batches of 2 entities (4 records), few quick retries."""
    return open_admin(
        load_connection_settings(bootstrap_server=broker.bootstrap, env={}),
        read_only=False,
        max_records=4,
        retry=RetryPolicy(attempts=3, initial_backoff_s=0.05, max_backoff_s=0.2),
    )


def apply_with(broker: SandboxBroker, prefix: str) -> ApplyResult:
    admin = client(broker)
    try:
        return apply_plan(plan_for(prefix), admin, readback_timeout_s=5)
    finally:
        admin.close()


def by_name(result: ApplyResult) -> dict[str, EntityOutcome]:
    return {r.change.entity.name("user") or "": r.outcome for r in result.entities}


def real_alters(proxy: FaultProxy) -> list[Request]:
    return [r for r in proxy.forwarded if r.validate_only is False]


def test_a_connection_lost_after_the_validate_only_answer_applies_nothing(
    proxied, proxy: FaultProxy, uniq: str
) -> None:  # type: ignore[no-untyped-def]
    broker, _ = proxied
    validated = []

    def on_response(request: Request) -> str:
        if request.validate_only:
            validated.append(request)
        return FORWARD

    def on_request(request: Request) -> str:
        # the ping before the first real alter
        return CUT if validated and request.api_key == API_VERSIONS else FORWARD

    proxy.on_response, proxy.on_request = on_response, on_request
    result = apply_with(broker, uniq)
    assert proxy.cuts == 1 and real_alters(proxy) == []
    assert result.status is ApplyStatus.NOTHING_APPLIED
    assert EXIT_BY_STATUS[result.status] == 1
    assert set(by_name(result).values()) == {EntityOutcome.NOT_APPLIED}
    proxy.reset()
    proxy.up()
    assert live_users(broker, uniq) == {}


def test_a_batch_sent_without_its_answer_is_unknown_and_the_rest_not_applied(
    proxied, proxy: FaultProxy, uniq: str
) -> None:  # type: ignore[no-untyped-def]
    broker, _ = proxied
    proxy.on_response = lambda r: CUT if r.validate_only is False else FORWARD
    result = apply_with(broker, uniq)
    outcomes = by_name(result)
    unknown = {n for n, o in outcomes.items() if o is EntityOutcome.UNKNOWN}
    assert unknown == {f"{uniq}0", f"{uniq}1"}, outcomes
    assert {n for n, o in outcomes.items() if o is EntityOutcome.NOT_APPLIED} == {
        f"{uniq}{i}" for i in range(2, 6)
    }
    assert len(real_alters(proxy)) == 1
    assert result.status is ApplyStatus.PARTIAL and EXIT_BY_STATUS[result.status] == 3
    assert result.readback_error is not None
    proxy.reset()
    proxy.up()
    # The unanswered batch did commit: "unknown" was the honest answer.
    assert set(live_users(broker, uniq)) == unknown


def test_a_connection_lost_between_batches_keeps_the_applied_ones(
    proxied, proxy: FaultProxy, uniq: str
) -> None:  # type: ignore[no-untyped-def]
    broker, _ = proxied
    answered = []

    def on_response(request: Request) -> str:
        if request.validate_only is False:
            answered.append(request)
        return FORWARD

    proxy.on_response = on_response
    proxy.on_request = lambda r: CUT if answered and r.api_key == API_VERSIONS else FORWARD
    result = apply_with(broker, uniq)
    outcomes = by_name(result)
    applied = {n for n, o in outcomes.items() if o is EntityOutcome.APPLIED}
    assert applied == {f"{uniq}0", f"{uniq}1"}, outcomes
    assert {n for n, o in outcomes.items() if o is EntityOutcome.NOT_APPLIED} == {
        f"{uniq}{i}" for i in range(2, 6)
    }
    assert result.status is ApplyStatus.PARTIAL and EXIT_BY_STATUS[result.status] == 3
    assert result.readback_error is not None
    proxy.reset()
    proxy.up()
    assert set(live_users(broker, uniq)) == applied


def test_a_connection_lost_during_read_back_keeps_every_confirmed_entity(
    proxied, proxy: FaultProxy, uniq: str
) -> None:  # type: ignore[no-untyped-def]
    broker, _ = proxied
    answered = []

    def on_response(request: Request) -> str:
        if request.validate_only is False:
            answered.append(request)
        return FORWARD

    proxy.on_response = on_response
    proxy.on_request = lambda r: (
        CUT if len(answered) == 3 and r.api_key == DESCRIBE_CLIENT_QUOTAS else FORWARD
    )
    result = apply_with(broker, uniq)
    assert set(by_name(result).values()) == {EntityOutcome.APPLIED}
    assert result.status is ApplyStatus.NOT_CONVERGED and EXIT_BY_STATUS[result.status] == 4
    assert result.readback_error is not None
    proxy.reset()
    proxy.up()
    assert set(live_users(broker, uniq)) == {f"{uniq}{i}" for i in range(6)}


def test_the_cli_prints_the_per_entity_json_result_when_an_answer_is_lost(
    proxied, proxy: FaultProxy, uniq: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    broker, _ = proxied
    manifest = write_manifest(
        tmp_path / "m.yaml",
        "faults",
        [quota({"user": f"{uniq}x"}, producer_byte_rate="1MiB")],
        scope=[{"shape": "user", "prefixes": {"user": [uniq]}}],
    )
    proxy.on_response = lambda r: (
        CUT if r.api_key == ALTER_CLIENT_QUOTAS and r.validate_only is False else FORWARD
    )
    result = CliRunner().invoke(
        app,
        [
            "apply",
            str(manifest),
            "--bootstrap-server",
            broker.bootstrap,
            "--auto-approve",
            "-o",
            "json",
            "--readback-timeout",
            "3",
        ],
    )
    assert result.exit_code == 3, result.output
    doc = json.loads(result.stdout[result.stdout.rindex('{\n  "format_version"') :])
    assert doc["status"] == "partial"
    assert [(e["entity"], e["outcome"]) for e in doc["entities"]] == [
        ({"user": f"{uniq}x"}, "unknown")
    ]
    assert doc["readback_error"]
    proxy.reset()
    proxy.up()
    assert set(live_users(broker, uniq)) == {f"{uniq}x"}


DELETE_TOPICS = 20


def test_an_apply_that_cannot_release_its_lock_says_so_in_its_exit_code(
    proxied, proxy: FaultProxy, uniq: str, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    # Everything applies, then the lock's release (DeleteTopics) is lost: the
    # apply must not exit 0 while the next run would be blocked.
    broker, _ = proxied
    # An earlier test's cut connection may have left the lock held: start free.
    admin = client(broker)
    try:
        release(admin)
    finally:
        admin.close()
    manifest = write_manifest(
        tmp_path / "m.yaml",
        "faults",
        [quota({"user": f"{uniq}lock"}, producer_byte_rate="1MiB")],
        scope=[{"shape": "user", "prefixes": {"user": [uniq]}}],
    )
    proxy.on_request = lambda r: CUT if r.api_key == DELETE_TOPICS else FORWARD
    args = ["apply", str(manifest), "--bootstrap-server", broker.bootstrap, "--auto-approve"]
    result = CliRunner().invoke(app, [*args, "-o", "json"])
    assert result.exit_code == 6, result.output
    doc = json.loads(result.stdout[result.stdout.rindex('{\n  "format_version"') :])
    assert doc["status"] == "applied"
    assert "could not be released" in doc["lock_error"]
    warning = [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]
    assert len(warning) == 1 and "quotaform unlock --lock-id" in warning[0], result.stderr
    proxy.reset()
    proxy.up()
    assert live_users(broker, uniq) == {f"{uniq}lock": {"producer_byte_rate": 1048576.0}}
    # The next apply is blocked until the lock is released, as the line said.
    blocked = CliRunner().invoke(app, args)
    assert blocked.exit_code == 1 and "lock" in blocked.output, blocked.output
    lock_id = warning[0].split("--lock-id ")[1].rstrip(")")
    unlocked = CliRunner().invoke(
        app, ["unlock", "--bootstrap-server", broker.bootstrap, "--lock-id", lock_id]
    )
    assert unlocked.exit_code == 0, unlocked.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 0, again.output
