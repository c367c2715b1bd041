"""Read a broker's quota metrics over JMX with Kafka's own ``JmxTool``.

The sandbox broker exposes JMX on a loopback port when started with
``BrokerOptions(jmx_port=...)`` (``quotaform sandbox up --jmx``). Each read runs
``org.apache.kafka.tools.JmxTool --one-time true --report-format tsv`` from
the ``kafka-tools`` jar (fetched with the broker's jars), about 0.2-0.6 s per
read: JmxTool resolves its ObjectName patterns once per run, so a fresh run
per read sees quota groups that appeared since the last one.

Lines look like ``kafka.server:type=Produce,user=ANONYMOUS:byte-rate<TAB>1048576.0``;
the ``tsv`` format is used because a JMX-quoted client id (``"app:1,x\\*y"``)
breaks the default CSV header. Names are read with
:func:`quotaform.kafka.metrics.parse_object_name`.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from quotaform.errors import SandboxError
from quotaform.kafka.metrics import parse_object_name
from quotaform.sandbox.jars import DEFAULT_KAFKA_VERSION, run_kafka_tool

__all__ = ["JMX_TOOL", "MBeanReading", "java_message", "jmx_url", "read_mbeans"]

log = logging.getLogger(__name__)

#: Kafka's JMX reader (``kafka-jmx.sh``), from the ``kafka-tools`` jar.
JMX_TOOL = "org.apache.kafka.tools.JmxTool"
_NO_MATCH = "No matched attributes"


def java_message(output: str) -> str:
    """The one line of a Java tool's stderr a person needs: the root cause
    (the last ``Caused by:``, its class name shortened), else the first line
    that is not a stack frame."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    causes = [line.removeprefix("Caused by: ") for line in lines if line.startswith("Caused by: ")]
    if causes:
        name, _, message = causes[-1].partition(": ")
        return f"{name.rpartition('.')[2]}: {message}" if message else name
    for line in lines:
        if not line.startswith(("at ", "... ", "Trying to connect")):
            return line
    return "no message"


def jmx_url(port: int, host: str = "127.0.0.1") -> str:
    """The JMX service URL of a broker's RMI connector on ``host:port``."""
    return f"service:jmx:rmi:///jndi/rmi://{host}:{port}/jmxrmi"


@dataclass(frozen=True, slots=True)
class MBeanReading:
    """The attributes read from one MBean.

    Attributes:
        object_name: as JmxTool printed it.
        domain: e.g. ``kafka.server``.
        properties: the key properties, unquoted (``type``, ``user``, ``client-id``, ``ip``).
        values: attribute -> value (``NaN`` kept: "nothing throttled lately").
    """

    object_name: str
    domain: str
    properties: Mapping[str, str]
    values: Mapping[str, float] = field(default_factory=dict)

    def get(self, attribute: str) -> float:
        """The value of ``attribute``, NaN when it was not read."""
        return self.values.get(attribute, math.nan)


def read_mbeans(
    port: int,
    patterns: Sequence[str],
    attributes: Sequence[str],
    *,
    version: str = DEFAULT_KAFKA_VERSION,
    timeout_s: float = 60.0,
) -> dict[str, MBeanReading]:
    """Read ``attributes`` of every MBean matching ``patterns`` once.

    Args:
        port: the broker's loopback JMX port.
        patterns: ObjectName patterns, e.g. ``kafka.server:type=Produce,*``.
        attributes: attribute names, e.g. ``byte-rate``, ``throttle-time``.

    Returns:
        ObjectName (as printed) -> its reading; empty when nothing matches yet
        (a quota group exists only once a client used it).

    Raises:
        SandboxError: JmxTool could not run or connect (its stderr tail).
    """
    args = ["--jmx-url", jmx_url(port), "--one-time", "true", "--report-format", "tsv"]
    for pattern in patterns:
        args += ["--object-name", pattern]
    args += ["--attributes", ",".join(attributes)]
    proc = run_kafka_tool(JMX_TOOL, args, version=version, timeout_s=timeout_s)
    if proc.returncode != 0:
        if _NO_MATCH in proc.stderr + proc.stdout:
            return {}
        output = proc.stderr or proc.stdout
        cause = java_message(output)
        if "Could not connect to JMX url" in output or "ConnectException" in output:
            raise SandboxError(
                f"JmxTool could not connect to the JMX port 127.0.0.1:{port} (loopback): {cause}; "
                "check that the broker runs with JMX on that port (quotaform sandbox up --jmx "
                "prints it) and give it as --jmx-port"
            )
        raise SandboxError(f"JmxTool on 127.0.0.1:{port} failed (exit {proc.returncode}): {cause}")
    found: dict[str, dict[str, float]] = {}
    for line in proc.stdout.splitlines():
        name, sep, raw = line.rpartition("\t")
        if not sep or name == "time" or ":" not in name:
            continue
        object_name, _, attribute = name.rpartition(":")
        try:
            value = float(raw)
        except ValueError:
            log.debug("JmxTool: not a number for %s: %r", name, raw)
            continue
        found.setdefault(object_name, {})[attribute] = value
    readings = {}
    for object_name, values in found.items():
        domain, props = parse_object_name(object_name)
        readings[object_name] = MBeanReading(object_name, domain, props, values)
    return readings
