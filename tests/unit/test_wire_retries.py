"""Retry, batching and outcome rules of the wire layer, driven by a scripted
connection manager (the broker tests cover the real semantics; these cover
the failure paths a healthy single broker never produces)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import kafka.errors as kerrors
import pytest
from kafka.protocol.metadata import ApiVersionsRequest

from quotaform.cluster.wire import AlterOutcome, QuotaAlteration, RetryPolicy, batches
from quotaform.cluster.wire.client import ClientQuotaAdminMixin
from quotaform.errors import AuthorizationError, BrokerError, ReadOnlyError
from quotaform.kafka.entity import Entity


class Sent:
    """What a fake connection's ``send_request`` returns, shaped like kafka-python's
    ``Future``: ``failed()`` is true only for a request refused before writing."""

    def __init__(
        self, value: Any = None, exc: BaseException | None = None, *, written: bool = True
    ):
        self.value, self.exception, self.written = value, exc, written

    def failed(self) -> bool:
        return not self.written

    def __await__(self) -> Any:
        if self.exception is not None:
            raise self.exception
        return self.value
        yield  # a generator: awaitable


class Refused(Exception):
    """A scripted step: the request is refused before a byte is written."""

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class ScriptedConn:
    def __init__(self, manager: ScriptedManager) -> None:
        self.manager = manager

    def __await__(self) -> Any:
        return self
        yield

    def send_request(self, request: Any, request_timeout_ms: int | None = None) -> Sent:
        if isinstance(request, ApiVersionsRequest):
            self.manager.pings += 1
            step = self.manager.ping_steps.pop(0) if self.manager.ping_steps else None
            if step is None:
                return Sent("pong")
        else:
            self.manager.requests.append(request)
            step = self.manager.steps.pop(0)
        try:
            return Sent(step(request))
        except Refused as refused:
            return Sent(exc=refused.exc, written=False)
        except BaseException as exc:
            return Sent(exc=exc)


class ScriptedManager:
    """Answers each request with the next scripted step (a callable of the
    request); real alters are preceded by an ApiVersions ping, answered unless
    ``ping_steps`` says otherwise."""

    def __init__(self, steps: list[Callable[[Any], Any]]) -> None:
        self.steps = steps
        self.ping_steps: list[Callable[[Any], Any]] = []
        self.requests: list[Any] = []
        self.pings = 0

    def least_loaded_node(self) -> int:
        return 1

    def get_connection(self, node_id: int) -> ScriptedConn:
        return ScriptedConn(self)

    def run(self, coro_fn: Any, *args: Any) -> Any:
        return asyncio.run(coro_fn(*args))


class Client(ClientQuotaAdminMixin):
    def __init__(self, steps: list[Callable[[Any], Any]], *, read_only: bool = False) -> None:
        self._manager = ScriptedManager(steps)  # type: ignore[assignment]
        self._quota_request_timeout_ms = 1000
        self._quota_retry = RetryPolicy(attempts=3, initial_backoff_s=0.001, max_backoff_s=0.002)
        self._quota_read_only = read_only
        self._quota_max_records = 10_000
        self.rpc_counts = {}


def answer(codes: dict[str, int]) -> Callable[[Any], Any]:
    """A response giving each user entity in the request the code in ``codes``
    (default 0), in reverse request order."""

    def respond(request: Any) -> Any:
        entries = []
        for entry in reversed(request.entries):
            name = entry.entity[0].entity_name
            code = codes.get(name, 0)
            entries.append(
                SimpleNamespace(
                    error_code=code,
                    error_message=f"msg for {name}" if code else None,
                    entity=[SimpleNamespace(entity_type="user", entity_name=name)],
                )
            )
        return SimpleNamespace(entries=entries)

    return respond


def fail(exc: BaseException) -> Callable[[Any], Any]:
    """The request is written, then ``exc`` (no answer: outcome unknown)."""

    def raise_(request: Any) -> Any:
        raise exc

    return raise_


def refuse(exc: BaseException) -> Callable[[Any], Any]:
    """The request is refused before it is written (never sent)."""

    def raise_(request: Any) -> Any:
        raise Refused(exc)

    return raise_


def alt(name: str, **ops: float | None) -> QuotaAlteration:
    return QuotaAlteration(Entity.of(user=name), ops or {"producer_byte_rate": 1.0})


def test_not_controller_on_one_entity_retries_only_that_entity() -> None:
    client = Client([answer({"b": 41}), answer({})])
    results = client.alter_client_quotas([alt("a"), alt("b")], validate_only=False)
    assert {e.name("user"): r.outcome for e, r in results.items()} == {
        "a": AlterOutcome.APPLIED,
        "b": AlterOutcome.APPLIED,
    }
    second = client._manager.requests[1]  # type: ignore[attr-defined]
    assert [e.entity[0].entity_name for e in second.entries] == ["b"]
    assert client.rpc_counts == {"AlterClientQuotas": 2}


def test_non_retriable_entity_error_is_not_retried() -> None:
    client = Client([answer({"a": 42})])
    results = client.alter_client_quotas([alt("a")], validate_only=False)
    result = results[Entity.of(user="a")]
    assert result.outcome is AlterOutcome.FAILED
    assert result.error is not None and result.error.code == 42
    assert result.error.broker_message == "msg for a"
    assert client.rpc_counts == {"AlterClientQuotas": 1}


def test_lost_connection_then_success_is_applied() -> None:
    client = Client([fail(kerrors.KafkaConnectionError("reset")), answer({})])
    results = client.alter_client_quotas([alt("a")], validate_only=False)
    assert results[Entity.of(user="a")].outcome is AlterOutcome.APPLIED
    assert client.rpc_counts == {"AlterClientQuotas": 2}


def test_timeouts_until_the_tries_run_out_leave_the_outcome_unknown() -> None:
    timeout = kerrors.RequestTimedOutError("Request timed out after 1000 ms")
    client = Client([fail(timeout), fail(timeout), fail(timeout)])
    results = client.alter_client_quotas([alt("a"), alt("b")], validate_only=False)
    assert {r.outcome for r in results.values()} == {AlterOutcome.UNKNOWN}
    assert client.rpc_counts == {"AlterClientQuotas": 3}


def test_a_timeout_then_a_persistent_not_controller_is_still_unknown() -> None:
    # The first try may have committed; later NOT_CONTROLLER answers don't say.
    client = Client([fail(kerrors.RequestTimedOutError()), answer({"a": 41}), answer({"a": 41})])
    results = client.alter_client_quotas([alt("a")], validate_only=False)
    assert results[Entity.of(user="a")].outcome is AlterOutcome.UNKNOWN


def test_persistent_not_controller_without_timeouts_is_failed() -> None:
    client = Client([answer({"a": 41})] * 3)
    result = client.alter_client_quotas([alt("a")], validate_only=False)[Entity.of(user="a")]
    assert result.outcome is AlterOutcome.FAILED
    assert result.error is not None and result.error.code == 41


def test_authorization_failure_is_named() -> None:
    client = Client([answer({"a": 31})])
    result = client.alter_client_quotas([alt("a")], validate_only=False)[Entity.of(user="a")]
    assert isinstance(result.error, AuthorizationError)
    assert "ALTER_CONFIGS" in str(result.error)
    assert "CLUSTER_AUTHORIZATION_FAILED" in str(result.error)


def test_describe_top_level_error_is_typed_and_not_retried() -> None:
    response = SimpleNamespace(error_code=42, error_message="bad filter", entries=None)
    client = Client([lambda r: response])
    with pytest.raises(BrokerError) as info:
        client.describe_client_quotas([], strict=True)
    assert (info.value.code, info.value.broker_message) == (42, "bad filter")
    assert client.rpc_counts == {"DescribeClientQuotas": 1}


def test_describe_authorization_failure_names_describe_configs() -> None:
    response = SimpleNamespace(error_code=31, error_message=None, entries=None)
    client = Client([lambda r: response])
    with pytest.raises(AuthorizationError, match="DESCRIBE_CONFIGS"):
        client.describe_client_quotas([], strict=True)


def test_describe_retries_transport_errors_then_raises_typed_error() -> None:
    client = Client([fail(kerrors.KafkaConnectionError("down"))] * 3)
    with pytest.raises(BrokerError) as info:
        client.describe_client_quotas([], strict=True)
    assert info.value.api == "DescribeClientQuotas"
    assert client.rpc_counts == {"DescribeClientQuotas": 3}


def test_describe_sends_null_match_for_default_and_any() -> None:
    from quotaform.cluster.wire import FilterComponent

    response = SimpleNamespace(error_code=0, error_message=None, entries=[])
    client = Client([lambda r: response])
    client.describe_client_quotas(
        [FilterComponent.default("user"), FilterComponent.any("client-id")], strict=True
    )
    sent = client._manager.requests[0]  # type: ignore[attr-defined]
    assert [(c.match_type, c.match) for c in sent.components] == [(1, None), (2, None)]


def test_read_only_client_refuses_before_sending() -> None:
    client = Client([], read_only=True)
    with pytest.raises(ReadOnlyError):
        client.alter_client_quotas([alt("a")], validate_only=True)
    assert client._manager.requests == []  # type: ignore[attr-defined]


def test_duplicate_entities_are_refused() -> None:
    client = Client([])
    with pytest.raises(ValueError, match="twice"):
        client.alter_client_quotas([alt("a"), alt("a")], validate_only=True)


def test_remove_ops_are_sent_as_remove_with_zero_value() -> None:
    client = Client([answer({})])
    client.alter_client_quotas(
        [alt("a", producer_byte_rate=None, consumer_byte_rate=5.0)], validate_only=False
    )
    ops = client._manager.requests[0].entries[0].ops  # type: ignore[attr-defined]
    assert [(o.key, o.value, o.remove) for o in ops] == [
        ("consumer_byte_rate", 5.0, False),
        ("producer_byte_rate", 0.0, True),
    ]


def test_batches_respect_the_record_limit_and_never_split_an_entity() -> None:
    alts = [alt(f"u{i}", producer_byte_rate=1.0, consumer_byte_rate=2.0) for i in range(7)]
    got = list(batches(alts, max_records=5))
    assert [len(b) for b in got] == [2, 2, 2, 1]
    assert [a for b in got for a in b] == alts


def test_progress_callback_reports_each_batch() -> None:
    client = Client([answer({}), answer({})])
    client._quota_max_records = 2
    seen: list[tuple[int, int]] = []
    client.alter_client_quotas(
        [alt("a"), alt("b"), alt("c")],
        validate_only=False,
        on_batch=lambda d, t: seen.append((d, t)),
    )
    assert seen == [(2, 3), (3, 3)]


# ------------------------------------------------------------- never sent vs unknown


def test_a_real_alter_is_pinged_first_and_a_validate_only_is_not() -> None:
    client = Client([answer({}), answer({})])
    client.alter_client_quotas([alt("a")], validate_only=True)
    assert client._manager.pings == 0
    client.alter_client_quotas([alt("a")], validate_only=False)
    assert client._manager.pings == 1


def test_a_failed_ping_proves_the_alter_was_never_sent() -> None:
    client = Client([])
    lost = fail(kerrors.KafkaConnectionError("socket disconnected"))
    client._manager.ping_steps = [lost, lost, lost]
    result = client.alter_client_quotas([alt("a")], validate_only=False)
    assert result[Entity.of(user="a")].outcome is AlterOutcome.NOT_SENT
    assert client._manager.requests == [], "no AlterClientQuotas left the process"


def test_refused_before_writing_is_never_sent_and_retried() -> None:
    refused = refuse(kerrors.KafkaConnectionError("Node not connected"))
    client = Client([refused, refused, refused])
    result = client.alter_client_quotas([alt("a")], validate_only=False)
    assert result[Entity.of(user="a")].outcome is AlterOutcome.NOT_SENT
    again = Client([refused, answer({})])
    ok = again.alter_client_quotas([alt("a")], validate_only=False)
    assert ok[Entity.of(user="a")].outcome is AlterOutcome.APPLIED


def test_once_a_try_was_written_the_outcome_stays_unknown() -> None:
    lost = fail(kerrors.KafkaConnectionError("socket disconnected"))
    refused = refuse(kerrors.KafkaConnectionError("Node not connected"))
    client = Client([lost, refused, refused])
    result = client.alter_client_quotas([alt("a")], validate_only=False)
    assert result[Entity.of(user="a")].outcome is AlterOutcome.UNKNOWN


def test_after_a_lost_batch_the_later_batches_are_not_sent() -> None:
    lost = fail(kerrors.KafkaConnectionError("socket disconnected"))
    client = Client([answer({}), lost, lost, lost])
    client._quota_max_records = 1
    result = client.alter_client_quotas(
        [alt("a"), alt("b"), alt("c"), alt("d")], validate_only=False
    )
    outcomes = {e.name("user"): r.outcome for e, r in result.items()}
    assert outcomes == {
        "a": AlterOutcome.APPLIED,
        "b": AlterOutcome.UNKNOWN,
        "c": AlterOutcome.NOT_SENT,
        "d": AlterOutcome.NOT_SENT,
    }
    assert len(client._manager.requests) == 4, "batch b tried 3 times, c and d never"
