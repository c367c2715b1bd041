"""``quotaform drift``: a read-only check of the cluster against the
manifests; nothing is ever altered.

:func:`run_drift` takes one :class:`DriftRequest` and returns the
:class:`~quotaform.plan.drift.DriftReport`; :func:`detect_drift` is the step
over a client the caller opened.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from quotaform.app.common import ConnectionOptions, View, load_and_target
from quotaform.app.facts import FactsWanted, gather_facts
from quotaform.cluster.connect import connect
from quotaform.cluster.wire.client import QuotaAdminClient
from quotaform.cluster.wire.connection import ConnectionSettings
from quotaform.plan.decide import decide_drift
from quotaform.plan.drift import DriftReport
from quotaform.plan.facts import VolumeSource
from quotaform.plan.state import DesiredState

__all__ = ["DriftRequest", "detect_drift", "run_drift"]


@dataclass(frozen=True, slots=True)
class DriftRequest:
    """One ``quotaform drift`` run.

    Attributes:
        manifests: manifest files or directories.
        connection: where to connect (read-only).
        volumes: where the storage policy's volume usage comes from.
        view: warnings.
    """

    manifests: tuple[Path, ...]
    connection: ConnectionOptions = field(default_factory=ConnectionOptions)
    volumes: VolumeSource = field(default_factory=VolumeSource)
    view: View = field(default_factory=View)


def run_drift(request: DriftRequest) -> DriftReport:
    """Load the manifests (before any connection), connect read-only and
    :func:`detect_drift`.

    Raises:
        ManifestError, ClusterConfigError, ConnectionSettingsError: before
            connecting.
        ClusterMismatchError, BrokerError, StorageError: while reading.
    """
    desired, where = load_and_target(request.manifests, request.connection, request.view)
    with connect(where.settings, read_only=True, cluster_id=where.cluster_id) as client:
        return detect_drift(desired, client, volumes=request.volumes, settings=where.settings)


def detect_drift(
    desired: DesiredState,
    client: QuotaAdminClient,
    *,
    volumes: VolumeSource | None = None,
    settings: ConnectionSettings | None = None,
) -> DriftReport:
    """Read the cluster's facts in one step (:func:`~quotaform.app.facts.gather_facts`:
    the cluster id check, the live state), then compare
    (:func:`~quotaform.plan.decide.decide_drift`): ``quotaform drift``.
    With a storage policy, live is compared with the declared values times
    the current factor: a scaled quota is not drift, and a scale still to
    apply is reported as such (``DriftReport.scale_pending``). With probes
    declared, how the brokers enforce quotas is read too (DescribeConfigs,
    :func:`~quotaform.cluster.brokers.read_quota_enforcement`) for the probe view.

    ``client`` should be opened read-only: nothing here alters. Load the
    manifests first, so bad manifests fail before any connection is made.

    Raises:
        ClusterMismatchError: the manifests' ``metadata.clusterId`` names
            another cluster.
        BrokerError: a describe failed.
    """
    wanted = FactsWanted(enforcement=bool(desired.probes), volumes=volumes)
    facts = gather_facts(client, desired, wanted, settings=settings)
    return decide_drift(desired, facts)
