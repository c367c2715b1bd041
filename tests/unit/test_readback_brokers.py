"""apply_plan's read-back on every broker of a cluster of several, with a
client whose brokers answer from their own copies of the quotas: one that
lags, one that catches up, one that does not answer, one that is fenced, and a
one-broker cluster that is read back exactly as before. (Against real brokers:
tests/integration/test_multinode.py.)"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from pathlib import Path

import jsonschema

from quotaform.cli.apply import EXIT_BY_STATUS
from quotaform.cluster.apply import BrokerReader, apply_plan
from quotaform.cluster.wire.types import AlterOutcome, AlterResult, FilterComponent
from quotaform.errors import BrokerError
from quotaform.formats.apply import apply_document, render_apply_json
from quotaform.kafka.brokers import BrokerNode
from quotaform.kafka.entity import Entity
from quotaform.plan.outcome import ApplyStatus, BrokerState
from quotaform.plan.review import review_plan
from quotaform.render.apply import render_apply_text

from .builders import desired_state, plan_of

SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "apply.schema.json"

A, B, C = (Entity.of(user=n) for n in "abc")
P = {"producer_byte_rate": 1024.0}
DESIRED = desired_state({A: P, B: P, C: P})
PLAN = plan_of(DESIRED, {})
NO_ANSWER = BrokerError(
    None, "KafkaTimeoutError", "Timed out after 1000 ms", api="DescribeClientQuotas"
)


class Cluster:
    """A writer whose alters land in the controller's state; each broker shows
    that state, except the brokers told to lag (for ``stale_reads`` reads they
    show nothing), not to answer, or listed fenced."""

    def __init__(
        self,
        brokers: int = 3,
        *,
        lagging: dict[int, int] | None = None,
        silent: Sequence[int] = (),
        fenced: Sequence[int] = (),
        outcome: AlterOutcome = AlterOutcome.APPLIED,
    ) -> None:
        self.nodes = [
            BrokerNode(i, "127.0.0.1", 9091 + i, fenced=i in fenced) for i in range(1, brokers + 1)
        ]
        self.stale_reads = dict(lagging or {})
        self.silent = set(silent)
        self.outcome = outcome
        self.state: dict[Entity, dict[str, float]] = {}
        self.rpc_counts: dict[str, int] = {}
        self.asked: list[int] = []
        self.fresh_listings = 0

    def alter_client_quotas(self, alterations, *, validate_only, on_batch=None):  # type: ignore[no-untyped-def]
        out = {}
        for i, a in enumerate(alterations):
            outcome = AlterOutcome.APPLIED if validate_only or i == 0 else self.outcome
            if not validate_only and outcome is AlterOutcome.APPLIED:
                self.state[a.entity] = {k: v for k, v in a.ops.items() if v is not None}
            out[a.entity] = AlterResult(a.entity, outcome, None if i == 0 else NO_ANSWER)
        return out

    def describe_client_quotas(self, components: list[FilterComponent], *, strict: bool):  # type: ignore[no-untyped-def]
        return dict(self.state)

    def brokers(self, *, fresh: bool = False, timeout_ms: int | None = None) -> list[BrokerNode]:
        self.fresh_listings += fresh
        return list(self.nodes)

    def describe_client_quotas_on(  # type: ignore[no-untyped-def]
        self, node_id, components, *, strict, timeout_ms
    ):
        self.asked.append(node_id)
        if node_id in self.silent:
            raise NO_ANSWER
        if self.stale_reads.get(node_id, 0) > 0:
            self.stale_reads[node_id] -= 1
            return {}
        return dict(self.state)


def states(result) -> dict[int, BrokerState]:  # type: ignore[no-untyped-def]
    return {b.broker.node_id: b.state for b in result.brokers}


def test_the_fake_is_a_broker_reader_and_the_plain_writer_is_not() -> None:
    assert isinstance(Cluster(), BrokerReader)
    assert not isinstance(object(), BrokerReader)


def test_every_broker_showing_the_plan_is_applied_and_exit_0() -> None:
    cluster = Cluster()
    result = apply_plan(PLAN, cluster, readback_timeout_s=1)
    assert result.status is ApplyStatus.APPLIED and EXIT_BY_STATUS[result.status] == 0
    assert states(result) == dict.fromkeys((1, 2, 3), BrokerState.MATCHED)
    assert cluster.fresh_listings == 1  # the brokers are listed afresh for the read-back
    text = render_apply_text(result).plain
    assert "read-back matched on all 3 brokers after" in text


def test_a_broker_that_still_lags_at_the_deadline_is_named_and_the_exit_is_4() -> None:
    cluster = Cluster(lagging={3: 10_000})
    start = time.monotonic()
    result = apply_plan(PLAN, cluster, readback_timeout_s=0.5, readback_interval_s=0.05)
    assert time.monotonic() - start < 3  # bounded by the read-back timeout
    assert result.status is ApplyStatus.NOT_CONVERGED and EXIT_BY_STATUS[result.status] == 4
    assert states(result) == {
        1: BrokerState.MATCHED,
        2: BrokerState.MATCHED,
        3: BrokerState.LAGGING,
    }
    (lagging,) = result.unconfirmed_brokers
    assert lagging.differing == (A, B, C)
    # An entity reads as converged only when every broker shows it: broker 3's view wins.
    assert [(r.live_after, r.converged) for r in result.entities] == [({}, False)] * 3
    text = render_apply_text(result).plain
    assert (
        "  lagging      broker 3 (127.0.0.1:9094): 3 applied entities not shown as planned: "
        'user="a", user="b", user="c"\n'
    ) in text
    assert "read-back did NOT match on 1 of 3 brokers (broker 3 (127.0.0.1:9094) lagging)" in text
    assert "Apply incomplete: 3 applied" in text


def test_a_broker_that_catches_up_within_the_timeout_is_matched() -> None:
    cluster = Cluster(lagging={2: 2})
    result = apply_plan(PLAN, cluster, readback_timeout_s=5, readback_interval_s=0.01)
    assert result.status is ApplyStatus.APPLIED
    assert cluster.asked.count(2) == 3  # two stale answers, then the plan
    assert states(result)[2] is BrokerState.MATCHED


def test_a_broker_that_does_not_answer_is_unreachable_never_matched() -> None:
    cluster = Cluster(silent=[2])
    result = apply_plan(PLAN, cluster, readback_timeout_s=0.3, readback_interval_s=0.05)
    assert result.status is ApplyStatus.NOT_CONVERGED and EXIT_BY_STATUS[result.status] == 4
    assert states(result)[2] is BrokerState.UNREACHABLE
    (silent,) = result.unconfirmed_brokers
    assert "KafkaTimeoutError" in (silent.error or "")
    assert cluster.asked.count(2) > 1  # tried again until the deadline
    text = render_apply_text(result).plain
    assert "  unreachable  broker 2 (127.0.0.1:9093): no answer (DescribeClientQuotas" in text


def test_a_fenced_broker_is_not_read_and_not_counted_as_matched() -> None:
    cluster = Cluster(fenced=[3])
    result = apply_plan(PLAN, cluster, readback_timeout_s=1)
    assert 3 not in cluster.asked
    assert states(result)[3] is BrokerState.FENCED
    assert result.status is ApplyStatus.NOT_CONVERGED
    assert "fenced: it serves no clients and could not be read" in render_apply_text(result).plain


def test_brokers_that_disagree_give_the_view_that_differs_from_the_plan() -> None:
    cluster = Cluster(lagging={2: 10_000})
    result = apply_plan(PLAN, cluster, readback_timeout_s=0.3, readback_interval_s=0.05)
    assert states(result)[2] is BrokerState.LAGGING
    assert all(r.live_after == {} and not r.converged for r in result.entities)
    cluster = Cluster(silent=[2])
    result = apply_plan(PLAN, cluster, readback_timeout_s=0.3, readback_interval_s=0.05)
    # The brokers that answered all show the plan; the silent one is named on its own.
    assert all(r.live_after == P and r.converged for r in result.entities)


def test_one_broker_is_read_back_through_the_connection_only_as_before() -> None:
    cluster = Cluster(brokers=1)
    result = apply_plan(PLAN, cluster, readback_timeout_s=1)
    assert result.status is ApplyStatus.APPLIED
    assert result.brokers == () and cluster.asked == [] and cluster.fresh_listings == 0
    text = render_apply_text(result).plain
    assert "read-back matched after" in text and "brokers" not in text


def test_a_partial_apply_still_reports_each_broker_and_exits_3() -> None:
    cluster = Cluster(lagging={1: 10_000}, outcome=AlterOutcome.UNKNOWN)
    result = apply_plan(PLAN, cluster, readback_timeout_s=0.3, readback_interval_s=0.05)
    assert result.status is ApplyStatus.PARTIAL and EXIT_BY_STATUS[result.status] == 3
    # Only entity a was confirmed applied: the brokers are judged on it alone.
    assert [b.differing for b in result.unconfirmed_brokers] == [(A,)]
    assert states(result) == {
        1: BrokerState.LAGGING,
        2: BrokerState.MATCHED,
        3: BrokerState.MATCHED,
    }


class Unlisted(Cluster):
    def brokers(self, *, fresh: bool = False, timeout_ms: int | None = None) -> list[BrokerNode]:
        if fresh:
            raise BrokerError(None, "KafkaTimeoutError", "no answer", api="DescribeCluster")
        return list(self.nodes)


def test_brokers_that_cannot_be_listed_are_a_read_back_error_not_a_match() -> None:
    result = apply_plan(PLAN, Unlisted(), readback_timeout_s=0.3)
    assert result.status is ApplyStatus.NOT_CONVERGED and EXIT_BY_STATUS[result.status] == 4
    assert result.brokers == ()
    assert "the brokers could not be listed" in (result.readback_error or "")


def test_the_json_result_has_each_broker_and_validates_against_the_schema() -> None:
    result = apply_plan(
        PLAN,
        Cluster(lagging={3: 10_000}, silent=[2]),
        readback_timeout_s=0.3,
        readback_interval_s=0.05,
    )
    document = json.loads(
        render_apply_json(apply_document(PLAN, review_plan(PLAN, DESIRED), result))
    )
    jsonschema.validate(document, json.loads(SCHEMA.read_text(encoding="utf-8")))
    assert document["status"] == "not-converged"
    assert [(b["node_id"], b["address"], b["state"]) for b in document["brokers"]] == [
        (1, "127.0.0.1:9092", "matched"),
        (2, "127.0.0.1:9093", "unreachable"),
        (3, "127.0.0.1:9094", "lagging"),
    ]
    assert document["brokers"][2]["differing"] == [{"user": "a"}, {"user": "b"}, {"user": "c"}]
    assert "KafkaTimeoutError" in document["brokers"][1]["error"]
    assert document["brokers"][0] == {
        "node_id": 1,
        "address": "127.0.0.1:9092",
        "fenced": False,
        "state": "matched",
        "differing": [],
        "error": None,
    }
