"""The brokers of a cluster, as DescribeCluster lists them.

Client quotas live in the controller quorum's metadata log; every broker
applies them from its own copy of that log, with a lag, and answers
DescribeClientQuotas from it (``ClientQuotaMetadataManager``). So a change is
shown by the whole cluster only once every broker shows it, and each broker
enforces a quota on its own (a client reaching three brokers can use three
times its quota).

DescribeCluster (API 60) lists the registered brokers; since KIP-700 it also
lists *fenced* brokers (``include_fenced_brokers``): a broker the controller
took out of service (stopped, its heartbeats timed out, or not yet caught up
with the metadata log). A fenced broker is not in Metadata responses, so no
client can reach it through the cluster.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["BrokerNode"]


@dataclass(frozen=True, slots=True, order=True)
class BrokerNode:
    """One broker as DescribeCluster lists it; sorts by node id.

    Attributes:
        node_id: its ``node.id`` (``broker.id``).
        host: its advertised host for the listener the client uses.
        port: its advertised port.
        fenced: the controller has fenced it (it serves no clients).
    """

    node_id: int
    host: str
    port: int
    fenced: bool = False

    @property
    def address(self) -> str:
        """``host:port`` (``[host]:port`` for an IPv6 address)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def label(self) -> str:
        """``broker 3 (127.0.0.1:9094)``."""
        return f"broker {self.node_id} ({self.address})"
