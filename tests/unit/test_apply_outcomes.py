"""apply_plan's honesty rules with a writer that fails at chosen points: once
a real alter has been sent, the result always says, per entity, applied /
failed / unknown / not applied; a lost read-back never erases what the broker
confirmed. (The same paths against the real broker, through a fault-injecting
proxy: tests/integration/test_apply_faults.py.)"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from quotaform.cli.apply import EXIT_BY_STATUS
from quotaform.cluster.apply import apply_plan
from quotaform.cluster.wire.types import AlterOutcome, AlterResult, FilterComponent, QuotaAlteration
from quotaform.errors import AuthorizationError, BrokerError
from quotaform.kafka.entity import Entity
from quotaform.plan.outcome import ApplyStatus, EntityOutcome
from quotaform.render.apply import render_apply_text

from .builders import desired_state, plan_of

A, B, C = (Entity.of(user=n) for n in "abc")
P = {"producer_byte_rate": 1024.0}
PLAN = plan_of(desired_state({A: P, B: P, C: P}), {})
LOST = BrokerError(None, "KafkaConnectionError", "socket disconnected", api="AlterClientQuotas")

Outcomes = Callable[[list[QuotaAlteration]], dict[Entity, AlterResult]]


class Writer:
    """Answers validate_only and the real alter with scripted outcomes; the
    broker state is what the real alter applied."""

    def __init__(
        self,
        real: dict[Entity, AlterOutcome],
        *,
        validate: dict[Entity, AlterResult] | None = None,
        describe_fails: bool = False,
    ) -> None:
        self.real, self.validate = real, validate
        self.describe_fails = describe_fails
        self.rpc_counts: dict[str, int] = {}
        self.state: dict[Entity, dict[str, float]] = {}

    def alter_client_quotas(self, alterations, *, validate_only, on_batch=None):  # type: ignore[no-untyped-def]
        if validate_only:
            if self.validate is not None:
                return self.validate
            return {a.entity: AlterResult(a.entity, AlterOutcome.APPLIED) for a in alterations}
        out = {}
        for a in alterations:
            outcome = self.real[a.entity]
            if outcome in (AlterOutcome.APPLIED, AlterOutcome.UNKNOWN):
                self.state[a.entity] = {k: v for k, v in a.ops.items() if v is not None}
            error = None if outcome is AlterOutcome.APPLIED else LOST
            out[a.entity] = AlterResult(a.entity, outcome, error)
        return out

    def describe_client_quotas(self, components: list[FilterComponent], *, strict: bool):  # type: ignore[no-untyped-def]
        if self.describe_fails:
            raise BrokerError(None, "NodeNotReadyError", "1", api="DescribeClientQuotas")
        return dict(self.state)


def outcomes(result) -> dict[str, EntityOutcome]:  # type: ignore[no-untyped-def]
    return {r.change.entity.name("user"): r.outcome for r in result.entities}


def test_a_connection_lost_during_the_pre_check_applies_nothing() -> None:
    lost = {e: AlterResult(e, AlterOutcome.UNKNOWN, LOST) for e in (A, B, C)}
    writer = Writer({}, validate=lost)
    result = apply_plan(PLAN, writer)
    assert result.status is ApplyStatus.NOTHING_APPLIED
    assert EXIT_BY_STATUS[result.status] == 1
    assert set(outcomes(result).values()) == {EntityOutcome.NOT_APPLIED}
    assert "validate_only pre-check" in (result.error or "")
    assert "Nothing was applied" in render_apply_text(result).plain


def test_a_real_alter_that_never_left_applies_nothing() -> None:
    writer = Writer(dict.fromkeys((A, B, C), AlterOutcome.NOT_SENT))
    result = apply_plan(PLAN, writer)
    assert result.status is ApplyStatus.NOTHING_APPLIED and writer.state == {}
    assert EXIT_BY_STATUS[result.status] == 1


def test_a_lost_batch_is_unknown_the_rest_not_applied_and_the_exit_is_3() -> None:
    writer = Writer(
        {A: AlterOutcome.APPLIED, B: AlterOutcome.UNKNOWN, C: AlterOutcome.NOT_SENT},
        describe_fails=True,
    )
    result = apply_plan(PLAN, writer, readback_timeout_s=0.1)
    assert result.status is ApplyStatus.PARTIAL and EXIT_BY_STATUS[result.status] == 3
    assert outcomes(result) == {
        "a": EntityOutcome.APPLIED,
        "b": EntityOutcome.UNKNOWN,
        "c": EntityOutcome.NOT_APPLIED,
    }
    assert result.readback_error is not None and result.uncertain
    text = render_apply_text(result).plain
    assert "1 applied, 0 failed, 1 unknown, 1 not applied; read-back FAILED" in text
    assert "run `quotaform plan` once the cluster answers again" in text


def test_a_failed_read_back_keeps_every_confirmed_entity_applied() -> None:
    writer = Writer(dict.fromkeys((A, B, C), AlterOutcome.APPLIED), describe_fails=True)
    result = apply_plan(PLAN, writer, readback_timeout_s=0.1)
    assert set(outcomes(result).values()) == {EntityOutcome.APPLIED}
    assert result.status is ApplyStatus.NOT_CONVERGED and EXIT_BY_STATUS[result.status] == 4
    assert all(r.live_after is None for r in result.entities)


def test_a_refused_pre_check_for_lack_of_alter_configs_names_it() -> None:
    denied = AuthorizationError("Cluster authorization failed.", api="AlterClientQuotas")
    writer = Writer(
        {}, validate={e: AlterResult(e, AlterOutcome.FAILED, denied) for e in (A, B, C)}
    )
    with pytest.raises(AuthorizationError, match="ALTER_CONFIGS operation on the CLUSTER"):
        apply_plan(PLAN, writer)


def test_everything_confirmed_and_read_back_is_applied() -> None:
    result = apply_plan(PLAN, Writer(dict.fromkeys((A, B, C), AlterOutcome.APPLIED)))
    assert result.status is ApplyStatus.APPLIED and EXIT_BY_STATUS[result.status] == 0
    assert not result.uncertain
