"""What a sandbox cluster says about its own nodes, asked through its brokers.

Two questions, each one short-lived kafka-python admin client:

* :func:`describe_cluster`: DescribeCluster (API 60, with fenced brokers, KIP-700):
  the cluster id and which brokers are registered, fenced or not. A broker is
  fenced until it has caught up with the metadata log, and again when its
  heartbeats stop (``broker.session.timeout.ms``, 9 s by default).
* :func:`describe_quorum`: DescribeQuorum (API 55, KIP-595; a broker forwards
  it to the active controller, KIP-836): the leader of the ``__cluster_metadata``
  partition (the active controller), its epoch and high watermark, and each
  voter's log end offset and last caught-up time.

Both return ``None`` when the cluster does not answer (yet), never raise: they
are polled while nodes start and stop.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["ClusterView", "QuorumView", "VoterState", "describe_cluster", "describe_quorum"]

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """DescribeCluster's answer.

    Attributes:
        cluster_id: the KRaft cluster id.
        unfenced: node ids of the registered, unfenced brokers (they serve clients).
        fenced: node ids of the registered, fenced brokers (stopped, or not yet
            caught up with the metadata log).
    """

    cluster_id: str | None
    unfenced: frozenset[int]
    fenced: frozenset[int]


@dataclass(frozen=True, slots=True)
class VoterState:
    """One voter of the metadata quorum, as the leader sees it.

    Attributes:
        log_end_offset: its last known log end offset (-1: unknown).
        last_caught_up_ms: the leader's wall clock (epoch ms) when it last had
            fetched everything; the leader reports its own current time; -1: unknown.
    """

    log_end_offset: int
    last_caught_up_ms: int


@dataclass(frozen=True, slots=True)
class QuorumView:
    """DescribeQuorum's answer for ``__cluster_metadata`` partition 0.

    Attributes:
        leader_id: node id of the active controller, -1 when there is none.
        leader_epoch: the quorum's epoch (each election raises it).
        high_watermark: the committed end of the metadata log.
        voters: ``{node id: VoterState}`` of the controllers.
    """

    leader_id: int
    leader_epoch: int
    high_watermark: int
    voters: Mapping[int, VoterState]


@contextlib.contextmanager
def _admin(bootstrap: str, timeout_ms: int, security: Mapping[str, Any]) -> Iterator[Any]:
    from kafka import KafkaAdminClient  # slow import; only needed here

    admin = KafkaAdminClient(
        bootstrap_servers=bootstrap,
        client_id="quotaform-sandbox-probe",
        request_timeout_ms=timeout_ms,
        bootstrap_timeout_ms=timeout_ms,
        **security,
    )
    try:
        yield admin
    finally:
        admin.close()


def describe_cluster(
    bootstrap: str, *, timeout_ms: int, security: Mapping[str, Any] | None = None
) -> ClusterView | None:
    """DescribeCluster through ``bootstrap`` (``host:port[,host:port...]``).

    Args:
        timeout_ms: bootstrap and request timeout, milliseconds.
        security: extra kafka-python settings (SASL), none for PLAINTEXT.

    Returns:
        The view, or ``None`` when nobody answered.
    """
    try:
        with _admin(bootstrap, timeout_ms, security or {}) as admin:
            answer = admin.describe_cluster()
    except Exception as exc:  # any failure means "not answering (yet)"
        log.debug("DescribeCluster through %s: %s", bootstrap, exc)
        return None
    brokers = answer.get("brokers") or []
    cluster_id = answer.get("cluster_id")
    return ClusterView(
        cluster_id=str(cluster_id) if cluster_id else None,
        unfenced=frozenset(int(b["broker_id"]) for b in brokers if not b.get("is_fenced")),
        fenced=frozenset(int(b["broker_id"]) for b in brokers if b.get("is_fenced")),
    )


def describe_quorum(
    bootstrap: str, *, timeout_ms: int, security: Mapping[str, Any] | None = None
) -> QuorumView | None:
    """DescribeQuorum through ``bootstrap`` (a broker forwards it to the active
    controller).

    Returns:
        The view, or ``None`` when nobody answered or the quorum reported an
        error (no leader yet, an election under way).
    """
    try:
        with _admin(bootstrap, timeout_ms, security or {}) as admin:
            answer = admin.describe_metadata_quorum()
        partition = answer["topics"][0]["partitions"][0]
    except Exception as exc:  # any failure means "not answering (yet)"
        log.debug("DescribeQuorum through %s: %s", bootstrap, exc)
        return None
    if partition.get("error"):
        log.debug("DescribeQuorum through %s: %s", bootstrap, partition["error"])
        return None
    return QuorumView(
        leader_id=int(partition["leader_id"]),
        leader_epoch=int(partition["leader_epoch"]),
        high_watermark=int(partition["high_watermark"]),
        voters={
            int(v["replica_id"]): VoterState(
                int(v["log_end_offset"]), int(v.get("last_caught_up_timestamp", -1))
            )
            for v in partition["current_voters"]
        },
    )
