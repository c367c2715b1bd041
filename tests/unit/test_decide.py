"""Read, then think: plan and drift decided from the manifests and one
value of the cluster's facts, without a broker (the reads themselves:
tests/integration, and test_principals.py for the principal checks)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from quotaform.kafka.entity import Entity
from quotaform.plan.decide import decide_drift, decide_plan, scale_for_storage
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.facts import BrokerSuperUsers, ClusterFacts, PrincipalFacts, ScramUsers
from quotaform.plan.principals import SuperUser
from quotaform.plan.state import DesiredState
from quotaform.plan.storage_types import StoragePolicy
from tests.unit.builders import desired_state, live_state, reviewed

ALICE = Entity.of(user="alice")
DEFAULT_USER = Entity.of(user=None)
ENFORCEMENT = QuotaEnforcement(("1", "2"), {"1": None, "2": None})


def test_the_plan_from_facts_is_the_diff_and_review_of_the_same_states() -> None:
    desired = desired_state({ALICE: {"producer_byte_rate": 2048.0}})
    live = live_state({ALICE: {"producer_byte_rate": 1024.0}}, cluster_id="c1")
    decided = decide_plan(desired, ClusterFacts(live, ENFORCEMENT))
    plan, review = reviewed(desired, live)
    assert decided.plan.changes == plan.changes
    assert decided.review == review
    assert decided.plan.enforcement == ENFORCEMENT
    assert decided.notes == ()


def test_principal_warnings_and_notes_come_from_the_facts_alone() -> None:
    desired = desired_state(
        {ALICE: {"producer_byte_rate": 2048.0}, DEFAULT_USER: {"producer_byte_rate": 1024.0}}
    )
    facts = ClusterFacts(
        live_state({}),
        ENFORCEMENT,
        PrincipalFacts(
            ScramUsers(("alicia",)),
            BrokerSuperUsers(principals={"User:admin": ("1",)}),
        ),
    )
    decided = decide_plan(desired, facts, super_users=[SuperUser("Group:ops", "--super-user")])
    warnings = "\n".join(decided.plan.warnings)
    assert 'no SCRAM user named "alice"' in warnings and 'did you mean "alicia"' in warnings
    assert "would throttle super user User:admin (super.users of broker 1)" in warnings
    assert decided.notes == (
        "super user Group:ops (--super-user) is not a User principal, the only type Kafka's "
        "default principal builder makes: not checked",
    )
    unread = ClusterFacts(live_state({}), ENFORCEMENT, PrincipalFacts(ScramUsers(None, "denied")))
    assert decide_plan(desired, unread).notes[0] == (
        "user quotas not checked against the cluster's SCRAM users: denied"
    )


def test_drift_from_facts_and_a_storage_policy_needs_its_volumes() -> None:
    desired = desired_state({ALICE: {"producer_byte_rate": 2048.0}})
    live = live_state({ALICE: {"producer_byte_rate": 1024.0}})
    report = decide_drift(desired, ClusterFacts(live))
    assert [c.entity for c in report.changed] == [ALICE]
    assert scale_for_storage(desired, ClusterFacts(live)) == (desired, None)
    with pytest.raises(ValueError, match="gather the volumes"):
        scale_for_storage(_with_policy(desired), ClusterFacts(live))


def _with_policy(desired: DesiredState) -> DesiredState:
    """``desired`` declaring a storage policy (its fields are not read here)."""
    return replace(desired, storage=object.__new__(StoragePolicy))
