"""Builders of plan inputs shared by the unit tests: desired and live states,
plans and their reviews, without YAML or a broker."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any

from quotaform.formats.plan import PlanDocument, plan_data, render_json
from quotaform.kafka.entity import SHAPES, Entity
from quotaform.plan.diff import compute_plan
from quotaform.plan.model import Plan
from quotaform.plan.review import PlanReview, review_plan
from quotaform.plan.state import (
    ChangeBudget,
    DesiredEntity,
    DesiredState,
    LiveState,
    Probe,
    Scope,
    ScopeRule,
    SourceLocation,
)

Quotas = Mapping[Entity, Mapping[str, float]]

#: The ``golden`` fixture (tests/unit/conftest.py): ``golden(name, text)``.
Golden = Callable[[str, str], None]

#: A scope owning every shape, defaults included.
ALL_SHAPES = Scope.build(ScopeRule.build(shape) for shape in SHAPES)


def desired_state(
    entities: Quotas,
    *,
    cluster: str = "test",
    cluster_id: str | None = None,
    scope: Scope = ALL_SHAPES,
    allow_deletes: bool = False,
    budget: ChangeBudget | None = None,
    prevent_destroy: Iterable[Entity] = (),
    protected: Mapping[Entity, SourceLocation] | None = None,
    path: str = "m.yaml",
    first_line: int = 1,
    line_step: int = 1,
    warnings: Iterable[str] = (),
    probes: Iterable[Probe] = (),
) -> DesiredState:
    """A desired state declaring ``entities``, each at ``path:line`` with lines
    ``first_line``, ``first_line + line_step``, ... in the given order."""
    guarded = set(prevent_destroy)
    declared = budget or ChangeBudget()
    if allow_deletes:
        declared = ChangeBudget(allow_deletes=True).over(declared)
    return DesiredState.build(
        cluster=cluster,
        cluster_id=cluster_id,
        scope=scope,
        entities=[
            DesiredEntity(
                e, dict(q), e in guarded, SourceLocation(path, first_line + line_step * i)
            )
            for i, (e, q) in enumerate(entities.items())
        ],
        warnings=warnings,
        protected=protected,
        budget=declared,
        probes=probes,
    )


def live_state(
    entities: Quotas,
    *,
    cluster_id: str | None = None,
    unmanaged_by_shape: Mapping[str, int] | None = None,
    rpc_counts: Mapping[str, int] | None = None,
    outside: Quotas | None = None,
) -> LiveState:
    """A live state holding ``entities`` (and ``outside`` the scope)."""
    return LiveState(
        entities={e: dict(q) for e, q in entities.items()},
        unmanaged_by_shape=dict(unmanaged_by_shape or {}),
        cluster_id=cluster_id,
        rpc_counts=dict(rpc_counts or {}),
        outside={e: dict(q) for e, q in (outside or {}).items()},
    )


def plan_of(desired: DesiredState, live: LiveState | Quotas) -> Plan:
    """The plan from ``live`` (a state, or just its entities) to ``desired``."""
    state = live if isinstance(live, LiveState) else live_state(live)
    return compute_plan(desired, state)


def reviewed(
    desired: DesiredState, live: LiveState | Quotas, flags: ChangeBudget | None = None
) -> tuple[Plan, PlanReview]:
    """The plan and its review (``flags`` over the desired state's budget)."""
    plan = plan_of(desired, live)
    return plan, review_plan(plan, desired, flags)


def example_plan(*, allow_deletes: bool = True) -> tuple[Plan, PlanReview]:
    """The examples' plan and its review: every action, every key action,
    a fallback, a literal "<default>" user."""
    declared = {
        Entity.of(user=None): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        Entity.of(user="svc-orders"): {
            "producer_byte_rate": 10485760.0,
            "request_percentage": 150.0,
        },
        Entity.of(user="<default>"): {"consumer_byte_rate": 1536.0},
        Entity.of(user="svc-orders", client_id=None): {"consumer_byte_rate": 524288.0},
        Entity.of(ip="192.0.2.10"): {"connection_creation_rate": 100.0},
        Entity.of(client_id="reporting|batch"): {"controller_mutation_rate": 2.5},
    }
    live = {
        Entity.of(user=None): {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        Entity.of(user="svc-orders"): {
            "producer_byte_rate": 5242880.0,
            "consumer_byte_rate": 1000000.0,
        },
        Entity.of(ip="192.0.2.99"): {"connection_creation_rate": 5.0},
    }
    desired = desired_state(
        declared,
        cluster="sandbox",
        cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
        allow_deletes=allow_deletes,
        path="examples/teams.yaml",
        first_line=10,
    )
    return reviewed(
        desired,
        live_state(
            live,
            unmanaged_by_shape={"user": 4},
            cluster_id="MkU3OEVBNTcwNTJENDM2Qk",
            rpc_counts={"DescribeClientQuotas": 4},
        ),
    )


def assert_plan_data_is_its_model(plan: Plan, review: PlanReview) -> None:
    """plan_data (built without models, for speed) is exactly what the
    PlanDocument model validates and dumps: the model stays the one shape."""
    data = plan_data(plan, review)
    modelled = PlanDocument.model_validate(data).model_dump(mode="json", by_alias=True)
    assert data == modelled
    assert json.dumps(data, sort_keys=False) == json.dumps(modelled, sort_keys=False)  # order
    assert render_json(plan, review) == json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def data_paths(data: Any, loc: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every path into plain data (dict keys and list indexes), the root first."""
    yield loc
    if isinstance(data, dict):
        for key, value in data.items():
            yield from data_paths(value, (*loc, key))
    elif isinstance(data, list):
        for index, value in enumerate(data):
            yield from data_paths(value, (*loc, index))
