"""``plan``'s checks of the declared quotas against the cluster's principals:
the reads (:func:`read_principal_facts`: SCRAM users, the brokers'
``super.users``), then the judgement, a function of the manifests and what
was read (:func:`quotaform.plan.principals.principal_findings`).

The findings are warnings of the plan (:attr:`~quotaform.plan.model.Plan.warnings`);
what could not be checked is a ``Note:`` through the view, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from quotaform.app.common import View
from quotaform.cluster.brokers import BrokerConfigs
from quotaform.cluster.principals import read_scram_users, read_super_users
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.errors import BrokerError
from quotaform.plan.facts import PrincipalFacts
from quotaform.plan.model import Plan
from quotaform.plan.principals import (
    SuperUser,
    default_user_entities,
    named_user_entities,
    principal_findings,
)
from quotaform.plan.state import DesiredState

__all__ = ["principal_warnings", "read_principal_facts"]


def read_principal_facts(
    client: QuotaAdminClient,
    desired: DesiredState,
    *,
    super_users: bool = True,
    broker_configs: BrokerConfigs | None = None,
) -> PrincipalFacts:
    """The cluster's SCRAM users (DescribeUserScramCredentials, at most 5 s;
    only when a declared quota names a user) and, with ``super_users``, the
    brokers' ``super.users`` (from ``broker_configs`` when already read, else
    DescribeConfigs). A failure is kept as a reason, never raised."""
    scram = read_scram_users(client) if named_user_entities(desired) else None
    if not super_users:
        return PrincipalFacts(scram)
    try:
        return PrincipalFacts(scram, read_super_users(client, broker_configs))
    except BrokerError as exc:
        return PrincipalFacts(scram, super_users_problem=str(exc))


def principal_warnings(
    desired: DesiredState,
    plan: Plan,
    client: QuotaAdminClient,
    *,
    super_users: Sequence[SuperUser] = (),
    view: View | None = None,
    broker_configs: BrokerConfigs | None = None,
) -> tuple[str, ...]:
    """The plan's warnings about principals, read through ``client``
    (:func:`read_principal_facts`; the brokers' ``super.users`` only when the
    configuration after the plan has a default user quota), judged by
    :func:`~quotaform.plan.principals.principal_findings`; its notes go to
    ``view.note``.

    Returns:
        Warnings (``path:line: field: message``), SCRAM ones first.
    """
    view = view or View()
    after = plan.after_entries()
    facts = read_principal_facts(
        client,
        desired,
        super_users=bool(default_user_entities(after)),
        broker_configs=broker_configs,
    )
    warnings, notes = principal_findings(desired, after, facts, super_users=super_users)
    for note in notes:
        view.note(note)
    return warnings
