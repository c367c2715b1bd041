"""``quotaform describe``: the live quotas matching a strict filter, read
with a read-only client (manifests play no part)."""

from __future__ import annotations

from dataclasses import dataclass, field

from quotaform.app.common import ConnectionOptions, View, target
from quotaform.cluster.connect import connect
from quotaform.cluster.read import describe_matching
from quotaform.cluster.wire.types import FilterComponent
from quotaform.plan.state import LiveState

__all__ = ["DescribeRequest", "run_describe"]


@dataclass(frozen=True, slots=True)
class DescribeRequest:
    """One ``quotaform describe`` run.

    Attributes:
        components: the strict filter (``None``: every entity), as
            ``kafka-configs --describe`` sends it.
        connection: where to connect (read-only).
        view: warnings.
    """

    components: tuple[FilterComponent, ...] | None = None
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    view: View = field(default_factory=View)


def run_describe(request: DescribeRequest) -> LiveState:
    """DescribeClientQuotas with the request's filter, strict.

    Raises:
        ClusterConfigError, ConnectionSettingsError, BrokerError: as the
            connection and the describe raise them.
    """
    components = None if request.components is None else list(request.components)
    where = target(request.connection, request.view)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        return describe_matching(client, components, cluster_id=client.cluster_id())
