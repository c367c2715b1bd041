"""A local single-node KRaft Kafka broker for trying quotaform and for tests.

Built from Maven Central jars (needs Java 17+ and, on a cold cache, Maven)::

    jars.py           Java/Maven checks, jar cache, running Kafka's Java tools
    broker.py         start / status / stop of a named sandbox broker
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
    SandboxState,
    SandboxStatus,
    broker_status,
    kill_broker,
    resume_broker,
    start_broker,
    stop_broker,
)
from quotaform.sandbox.configcommand import parse_quota_describe, run_config_command
from quotaform.sandbox.jars import DEFAULT_KAFKA_VERSION, ensure_kafka_jars

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "DEFAULT_SANDBOX_NAME",
    "BrokerOptions",
    "SandboxBroker",
    "SandboxState",
    "SandboxStatus",
    "broker_status",
    "ensure_kafka_jars",
    "kill_broker",
    "parse_quota_describe",
    "resume_broker",
    "run_config_command",
    "start_broker",
    "stop_broker",
]
