"""``quotaform explain``: which quota a client really gets, from which entry,
and who shares it (the ResolveClientQuotas KIP-546 sketched and Kafka never
shipped), against manifests (offline), the live cluster, or a saved plan
(before and after).

:func:`run_explain` takes one :class:`ExplainRequest` and returns one
:class:`ExplainRun`, which the renderers and the JSON format print.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

from quotaform.app.common import ConnectionOptions, View, target
from quotaform.app.facts import gather_facts
from quotaform.cluster.connect import connect
from quotaform.errors import ClusterConfigError
from quotaform.kafka.entity import mixes_ip, present_types
from quotaform.kafka.names import normalise_ip
from quotaform.kafka.resolution import Principal, QuotaIndex
from quotaform.manifest import load_manifests
from quotaform.plan.enforcement import QuotaEnforcement
from quotaform.plan.explain import (
    ChangedKey,
    Explanation,
    explain,
    explain_change,
    unnamed_names,
)
from quotaform.words import offline_note

__all__ = ["ExplainRequest", "ExplainRun", "principal", "run_explain"]


def principal(user: str | None, client_id: str | None, ip: str | None) -> Principal:
    """The client to explain, from ``--user`` / ``--client-id`` / ``--ip``
    (a part left out is unknown; ip quotas never combine with user or
    client-id, KIP-612).

    Raises:
        ClusterConfigError: ``--ip`` with another part, an address that is
            not one, no part at all, or an empty ``--user``.
    """
    if ip is not None:
        if mixes_ip(present_types(user=user, client_id=client_id, ip=ip)):
            raise ClusterConfigError(
                "give --ip alone, or --user and/or --client-id: ip quotas never combine "
                "with user or client-id (KIP-612)"
            )
        try:
            return Principal(ip=normalise_ip(ip))
        except ValueError as exc:
            raise ClusterConfigError(f"--ip {ip!r}: {exc}") from None
    if user is None and client_id is None:
        raise ClusterConfigError(
            "name the client: --user U and/or --client-id C (a part left out is unknown), or --ip A"
        )
    if user == "":
        raise ClusterConfigError("--user must not be empty (ANONYMOUS is the unauthenticated user)")
    return Principal(user=user, client_id=client_id)


@dataclass(frozen=True, slots=True)
class ExplainRequest:
    """One ``quotaform explain`` run.

    Attributes:
        user, client_id, ip: the client (see :func:`principal`).
        manifests: explain these manifests offline (``--cluster`` picks the
            cluster of a multi-cluster set).
        plan_file: explain a saved plan, before and after (not with manifests).
        include_overrides: also list the less specific entries that match
            but are overridden.
        connection: where to connect when neither manifests nor a plan is given.
        view: warnings, and the note that connection options are not used
            offline.
    """

    user: str | None = None
    client_id: str | None = None
    ip: str | None = None
    manifests: tuple[Path, ...] = ()
    plan_file: Path | None = None
    include_overrides: bool = False
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


@dataclass(frozen=True, slots=True)
class ExplainRun:
    """An explanation and where it comes from.

    Attributes:
        explanation: the answer (after the change, for a saved plan).
        source: ``manifests``, ``cluster`` or ``plan``.
        cluster: the cluster's name (``None``: unnamed live cluster).
        where: the source in words, for the text and markdown views.
        before, changed: a saved plan's answer before the change and the
            keys whose answer changes (``None`` / empty otherwise).
        enforcement: how the brokers enforce quotas (how many, and any
            custom quota callback): read from the live cluster, or as a
            saved plan recorded it; ``None`` offline.
    """

    explanation: Explanation
    source: str
    cluster: str | None
    where: str
    before: Explanation | None = None
    changed: tuple[ChangedKey, ...] = ()
    enforcement: QuotaEnforcement | None = None


def run_explain(request: ExplainRequest) -> ExplainRun:
    """Explain the client against the saved plan, the manifests, or the live
    cluster (read-only, with how its brokers enforce quotas: DescribeCluster
    and DescribeConfigs), in that order of preference.

    Raises:
        ClusterConfigError: bad client options, or manifests with a plan file.
        PlanFileError, PlanKeyError, ManifestError: unusable input.
        ConnectionSettingsError, BrokerError: reading the live cluster.
    """
    who = principal(request.user, request.client_id, request.ip)
    overrides = request.include_overrides
    if request.plan_file is not None:
        if request.manifests:
            raise ClusterConfigError("give manifests or --plan FILE, not both")
        from quotaform.formats.planfile import load_saved_plan  # only for --plan

        _note_unused_connection(request, "--plan")
        saved = load_saved_plan(request.plan_file, purpose="explain")
        after_index = QuotaIndex(saved.plan.after_entries())
        before, after, changed = explain_change(
            QuotaIndex(saved.plan.before_entries()),
            after_index,
            who,
            include_overrides=overrides,
        )
        after = replace(after, unnamed=unnamed_names(after_index, who))
        where = f"saved plan {request.plan_file} for cluster {saved.plan.cluster!r}"
        if not saved.plan.sees_whole_cluster:
            where += "; live entities outside its scope are not in it"
        return ExplainRun(
            after,
            "plan",
            saved.plan.cluster,
            where,
            before,
            tuple(changed),
            saved.plan.enforcement,
        )
    if request.manifests:
        _note_unused_connection(request, "manifests")
        desired = load_manifests(request.manifests, cluster=request.connection.cluster)
        where = (
            f"the manifests for cluster {desired.cluster!r}, offline: entities outside "
            "their scope are not known"
        )
        return ExplainRun(
            _explain(QuotaIndex(desired.quotas), who, overrides),
            "manifests",
            desired.cluster,
            where,
        )
    found = target(request.connection, request.view)
    with connect(found.settings, read_only=True, cluster_id=found.cluster_id) as client:
        facts = gather_facts(client, None)
    live, enforcement = facts.live, facts.enforcement
    where = f"the live cluster {facts.cluster_id} ({len(live.entities)} entities)"
    return ExplainRun(
        _explain(QuotaIndex(live.entities), who, overrides),
        "cluster",
        found.cluster,
        where,
        enforcement=enforcement,
    )


def _explain(index: QuotaIndex, who: Principal, overrides: bool) -> Explanation:
    explanation = explain(index, who, include_overrides=overrides)
    return replace(explanation, unnamed=unnamed_names(index, who))


def _note_unused_connection(request: ExplainRequest, source: str) -> None:
    """Say which connection options an offline answer leaves unused (silence
    would read as an answer from the cluster they name)."""
    connection = request.connection
    unused = [
        flag
        for flag in connection.flags_given()
        if not (flag == "--cluster" and source == "manifests")  # it picks the manifests' cluster
    ]
    if unused:
        request.view.note(offline_note(source, unused))
