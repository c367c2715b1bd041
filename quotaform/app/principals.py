"""``plan``'s checks of the declared quotas against the cluster's principals,
once connected: user quotas naming no SCRAM user, and default user quotas
that would throttle a super user (given by the cluster profile's
``superUsers``, ``--super-user``, or revealed by the brokers' ``super.users``).

The findings are warnings of the plan (:attr:`~quotaform.plan.model.Plan.warnings`);
what could not be checked is a ``Note:`` through the view, never an error.
"""

from __future__ import annotations

from collections.abc import Sequence

from quotaform.app.common import View
from quotaform.cluster.brokers import BrokerConfigs
from quotaform.cluster.principals import SUPER_USERS, read_scram_users, read_super_users
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.errors import BrokerError
from quotaform.kafka.entity import USER
from quotaform.plan.model import Plan
from quotaform.plan.principals import (
    SuperUser,
    default_user_entities,
    super_user_warnings,
    unknown_scram_users,
)
from quotaform.plan.state import DesiredState

__all__ = ["principal_warnings"]

_GIVE_THEM = (
    "name them with superUsers in the cluster profile (quotaform.clusters.yaml) or "
    "--super-user User:NAME"
)


def _scram_warnings(desired: DesiredState, client: QuotaAdminClient, view: View) -> tuple[str, ...]:
    named = [
        d
        for d in desired.entities.values()
        if USER in d.entity.types and d.entity.name(USER) is not None
    ]
    if not named:
        return ()
    scram = read_scram_users(client)
    if scram.names is None:
        view.note(f"user quotas not checked against the cluster's SCRAM users: {scram.problem}")
        return ()
    if not scram.names:
        return ()  # no SCRAM at all: the users authenticate otherwise
    return unknown_scram_users(named, scram.names)


def _super_users(
    client: QuotaAdminClient,
    given: Sequence[SuperUser],
    view: View,
    configs: BrokerConfigs | None,
) -> list[SuperUser]:
    """``given``, then those the brokers reveal; Notes for what stays unknown."""
    found = {s.principal: s for s in given}
    try:
        brokers = read_super_users(client, configs)
    except BrokerError as exc:
        if not given:
            view.note(f"default user quotas not checked against super users: {exc}; {_GIVE_THEM}")
        return list(found.values())
    for principal, ids in brokers.principals.items():
        where = f"{SUPER_USERS} of broker{'s' if len(ids) > 1 else ''} {', '.join(ids)}"
        found.setdefault(principal, SuperUser(principal, where))
    if not found and brokers.hidden:
        which = ("brokers {} report" if len(brokers.hidden) > 1 else "broker {} reports").format(
            ", ".join(brokers.hidden)
        )
        view.note(
            f"the brokers do not reveal {SUPER_USERS} ({which} it as sensitive, as brokers do "
            "for the authorizer's settings): default user quotas not checked against super "
            f"users; {_GIVE_THEM}"
        )
    elif not found and brokers.errors:
        reasons = "; ".join(f"broker {b}: {r}" for b, r in sorted(brokers.errors.items()))
        view.note(
            f"default user quotas not checked against super users: {SUPER_USERS} could "
            f"not be read ({reasons}); {_GIVE_THEM}"
        )
    for superuser in found.values():
        if superuser.user_name is None:
            view.note(
                f"super user {superuser.principal} ({superuser.given_at}) is not a User "
                "principal, the only type Kafka's default principal builder makes: not checked"
            )
    return list(found.values())


def principal_warnings(
    desired: DesiredState,
    plan: Plan,
    client: QuotaAdminClient,
    *,
    super_users: Sequence[SuperUser] = (),
    view: View | None = None,
    broker_configs: BrokerConfigs | None = None,
) -> tuple[str, ...]:
    """The plan's warnings about principals, read through ``client``.

    * When the manifests declare user quotas for named users: the cluster's
      SCRAM users (DescribeUserScramCredentials, at most 5 s); when it lists
      any, :func:`~quotaform.plan.principals.unknown_scram_users`.
    * When the configuration after the plan has a default user quota: the
      super users (``super_users``, and the brokers' ``super.users`` when a
      broker reveals it), then
      :func:`~quotaform.plan.principals.super_user_warnings`.

    Args:
        desired: the manifests' desired state.
        plan: the plan (its after-state is judged).
        client: an open client (read-only is fine).
        super_users: the super users given (profile, ``--super-user``).
        view: ``Note:`` lines for what could not be checked: the SCRAM users
            not listed (refused: DESCRIBE on CLUSTER is needed; too old a
            broker; no answer), the super users hidden by the brokers and none
            given, a super user that is not a ``User`` principal.
        broker_configs: the brokers' DescribeConfigs answer with
            ``super.users`` among its names, when already read.

    Returns:
        Warnings (``path:line: field: message``), SCRAM ones first.
    """
    view = view or View()
    warnings = _scram_warnings(desired, client, view)
    entries = plan.after_entries()
    if default_user_entities(entries):
        found = _super_users(client, super_users, view, broker_configs)
        sources = {e: d.source for e, d in desired.entities.items()}
        warnings += super_user_warnings(entries, sources, found, in_scope=desired.scope.contains)
    return warnings
