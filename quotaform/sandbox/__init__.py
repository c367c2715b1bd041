"""A local KRaft Kafka sandbox (one combined node, or several brokers and
controllers) for trying quotaform and for tests.

Built from Maven Central jars (needs Java 17+ and, on a cold cache, Maven)::

    jars.py           Java/Maven checks, jar cache, running Kafka's Java tools
    broker/           start / status / stop of a named sandbox, and of its nodes one by one
                      (model, state, config, process, readiness, lifecycle, nodes)
    quorum.py         DescribeCluster / DescribeQuorum: registered brokers, the active controller
    configcommand.py  Kafka's own kafka-configs, as an independent oracle
    prometheus.py     a Prometheus server (built once with go install, cached)
    exporter.py       JMX exporter configs (rule sets + quotaform's rules), its HTTP server
    livemetrics.py    a bounded quota scenario with SCRAM users, for live metrics
"""

from __future__ import annotations

from quotaform.sandbox.broker import (
    DEFAULT_SANDBOX_NAME,
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
    SandboxState,
    SandboxStatus,
    active_controller,
    broker_status,
    kill_broker,
    kill_node,
    restart_node,
    resume_broker,
    start_broker,
    stop_broker,
    stop_node,
    suspended_node,
    wait_for_leader,
)
from quotaform.sandbox.configcommand import parse_quota_describe, run_config_command
from quotaform.sandbox.jars import DEFAULT_KAFKA_VERSION, ensure_kafka_jars

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "DEFAULT_SANDBOX_NAME",
    "BrokerOptions",
    "SandboxBroker",
    "SandboxNode",
    "SandboxState",
    "SandboxStatus",
    "active_controller",
    "broker_status",
    "ensure_kafka_jars",
    "kill_broker",
    "kill_node",
    "parse_quota_describe",
    "restart_node",
    "resume_broker",
    "run_config_command",
    "start_broker",
    "stop_broker",
    "stop_node",
    "suspended_node",
    "wait_for_leader",
]
