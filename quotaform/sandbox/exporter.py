"""Prometheus JMX exporter configs and the exporter's standalone HTTP server.

Two jobs for the live-metrics tests and recordings:

- :func:`exporter_config` builds an exporter config from a published rule set
  (a plain jmx_exporter config, or Strimzi's metrics ConfigMap whose
  ``kafka-metrics-config.yml`` holds it) with a rules snippet put first
  (quotaform's ``examples/prometheus/`` files: a plain rules list, or a
  ConfigMap in Strimzi's form). Read and written with ruamel.yaml.
- :func:`start_exporter_server` runs ``jmx_prometheus_httpserver`` (the same
  collector as the java agent) against a broker's remote JMX port, so one
  broker can be scraped under several rule sets at once. Remote JMX reads
  every MBean per scrape unless ``includeObjectNames`` narrows it, which
  :data:`QUOTA_OBJECT_NAMES` does (it changes no metric name).
"""

from __future__ import annotations

import http.client
import io
import logging
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from quotaform.errors import InputError, SandboxError
from quotaform.inputs.files import read_text, shown
from quotaform.inputs.http import receive_body
from quotaform.inputs.limits import LIMITS
from quotaform.inputs.yamlsource import check_structure, describe_yaml_error
from quotaform.sandbox.jars import JMX_EXPORTER_VERSION, ensure_jmx_exporter, find_java
from quotaform.sandbox.processes import (
    CHILDREN,
    cmdline,
    free_port,
    is_alive,
    spawn_group,
    terminate_group,
    wait_for,
)

__all__ = [
    "QUOTA_OBJECT_NAMES",
    "STRIMZI_CONFIG_KEY",
    "ExporterServer",
    "exporter_config",
    "exporter_url",
    "load_exporter_config",
    "load_rules",
    "sandbox_exporter_config",
    "scrape",
    "start_exporter_server",
    "stop_exporter_server",
]

log = logging.getLogger(__name__)

#: The key of Strimzi's metrics ConfigMap that holds the exporter config.
STRIMZI_CONFIG_KEY = "kafka-metrics-config.yml"
#: The MBeans holding Kafka's client-quota metrics (``includeObjectNames``).
QUOTA_OBJECT_NAMES = (
    "kafka.server:type=Produce,*",
    "kafka.server:type=Fetch,*",
    "kafka.server:type=Request,*",
    "kafka.server:type=ControllerMutation,*",
    "kafka.server:type=socket-server-metrics,*",
)


def _yaml() -> YAML:
    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    return yaml


def _rules_text(path: Path) -> str:
    """An exporter rules file's text, read within bounds and checked for
    aliases and depth before ruamel's recursive loader sees it."""
    try:
        text = read_text(path, LIMITS["exporter-rules"], nul=True)
        check_structure(text)
    except InputError as exc:
        raise SandboxError(str(exc)) from None
    except YAMLError as exc:
        line, message = describe_yaml_error(exc, text)
        raise SandboxError(f"{shown(path)}:{line}: {message}") from None
    return text


def load_exporter_config(path: Path) -> dict[str, Any]:
    """Read a JMX exporter config: a plain one (``rules:``, ``lowercaseOutputName``
    ...), or the one inside a Strimzi metrics ConfigMap (any document of the
    file with ``data.kafka-metrics-config.yml``, e.g. Strimzi's
    ``kafka-metrics.yaml`` with its Kafka and KafkaNodePool documents).

    Returns:
        The config mapping (``rules`` a list of rule mappings).

    Raises:
        SandboxError: unreadable YAML, or neither form.
    """
    yaml = _yaml()
    try:
        documents = [d for d in yaml.load_all(_rules_text(path)) if d is not None]
    except SandboxError:
        raise
    except Exception as exc:  # ruamel raises several unrelated classes
        raise SandboxError(f"{shown(path)}: not readable YAML: {exc}") from exc
    for document in documents:
        data = document.get("data") if isinstance(document, dict) else None
        if isinstance(data, dict) and STRIMZI_CONFIG_KEY in data:
            inner_text = str(data[STRIMZI_CONFIG_KEY])
            try:
                check_structure(inner_text)
            except YAMLError as exc:
                _, message = describe_yaml_error(exc, inner_text)
                raise SandboxError(
                    f"{shown(path)}: data.{STRIMZI_CONFIG_KEY}: {message}"
                ) from None
            inner = yaml.load(inner_text)
            if isinstance(inner, dict):
                return inner
    for document in documents:
        if isinstance(document, dict) and "rules" in document:
            return dict(document)
    raise SandboxError(
        f"{path}: neither a JMX exporter config (rules:) nor a Strimzi metrics "
        f"ConfigMap (data.{STRIMZI_CONFIG_KEY})"
    )


def load_rules(path: Path) -> list[dict[str, Any]]:
    """Read a rules snippet: a plain YAML list of rules, or any form
    :func:`load_exporter_config` reads (its ``rules``).

    Raises:
        SandboxError: unreadable, or no list of rule mappings.
    """
    yaml = _yaml()
    try:
        loaded = yaml.load(_rules_text(path))
    except SandboxError:
        raise
    except Exception as exc:
        raise SandboxError(f"{shown(path)}: not readable YAML: {exc}") from exc
    rules = loaded if isinstance(loaded, list) else load_exporter_config(path).get("rules")
    if not isinstance(rules, list) or not all(isinstance(r, dict) for r in rules):
        raise SandboxError(f"{path}: expected a list of exporter rules")
    return rules


def exporter_url(port: int) -> str:
    """``http://127.0.0.1:PORT/metrics``: where a JMX exporter on ``port`` answers."""
    return f"http://127.0.0.1:{port}/metrics"


def sandbox_exporter_config(path: Path) -> str:
    """The JMX exporter config text ``quotaform sandbox up --exporter PATH``
    runs on each broker: ``PATH``'s own config when it is one (plain, or a
    Strimzi metrics ConfigMap), else its list of rules (a snippet such as
    ``examples/prometheus/jmx-exporter-quota-rules.yml``) under
    ``lowercaseOutputName: true``, which those rules need; only the MBeans of
    :data:`QUOTA_OBJECT_NAMES` are read when the rules are a snippet (a scrape
    in milliseconds instead of every broker MBean).

    Raises:
        SandboxError: unreadable, or neither a config nor a list of rules.
    """
    loaded = _yaml().load(_rules_text(path))
    if isinstance(loaded, list):
        if not all(isinstance(r, dict) for r in loaded):
            raise SandboxError(f"{path}: expected a list of exporter rules")
        config: dict[str, Any] = {
            "lowercaseOutputName": True,
            "includeObjectNames": list(QUOTA_OBJECT_NAMES),
            "rules": loaded,
        }
    else:
        config = load_exporter_config(path)
    out = io.StringIO()
    _yaml().dump(config, out)
    return out.getvalue()


def exporter_config(
    base: Path,
    *,
    snippet: Path | None = None,
    overrides: Mapping[str, Any] | None = None,
) -> str:
    """The YAML text of ``base``'s exporter config with ``snippet``'s rules put
    first (first match wins) and top-level ``overrides`` applied.

    Args:
        base: a plain exporter config or a Strimzi metrics ConfigMap file.
        snippet: a rules list to put before ``base``'s rules.
        overrides: top-level settings replaced or added (``hostPort``,
            ``startDelaySeconds``, ``includeObjectNames``, ...).

    Raises:
        SandboxError: a file is unreadable or of neither form.
    """
    config = load_exporter_config(base)
    if snippet is not None:
        config["rules"] = [*load_rules(snippet), *(config.get("rules") or [])]
    config.update(overrides or {})
    out = io.StringIO()
    _yaml().dump(config, out)
    return out.getvalue()


# -- the standalone exporter ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExporterServer:
    """A running ``jmx_prometheus_httpserver``.

    Attributes:
        port: its loopback HTTP port (``http://127.0.0.1:PORT/metrics``).
        pid: its process id (= process group id).
        config: its config file.
        log_path: its stdout and stderr.
    """

    port: int
    pid: int
    config: Path
    log_path: Path

    @property
    def target(self) -> str:
        """``127.0.0.1:PORT``, a Prometheus scrape target."""
        return f"127.0.0.1:{self.port}"


def start_exporter_server(
    jmx_port: int,
    config_text: str,
    *,
    state_dir: Path,
    name: str = "exporter",
    timeout_s: float = 60.0,
) -> ExporterServer:
    """Start ``jmx_prometheus_httpserver`` reading a broker's loopback JMX port
    with ``config_text`` (``hostPort`` is set to ``127.0.0.1:jmx_port``) and
    return once ``/metrics`` answers.

    Args:
        jmx_port: the broker's JMX/RMI port (``BrokerOptions(jmx_port=0)``).
        config_text: an exporter config (see :func:`exporter_config`).
        state_dir: where ``<name>.yaml`` and ``<name>.log`` are written.
        name: file stem, unique within ``state_dir``.
        timeout_s: seconds allowed until the first answer.

    Raises:
        SandboxError: no Java 17+, the jar fetch failed, or the server exited
            or did not answer in time (with its log's tail).
    """
    java = find_java()
    jar = ensure_jmx_exporter() / f"jmx_prometheus_httpserver-{JMX_EXPORTER_VERSION}.jar"
    yaml = _yaml()
    config = yaml.load(config_text) or {}
    config["hostPort"] = f"127.0.0.1:{jmx_port}"
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / f"{name}.yaml"
    with path.open("w", encoding="utf-8") as fh:
        yaml.dump(config, fh)
    log_path = state_dir / f"{name}.log"
    port = free_port()
    command = [
        java,
        "-Xmx128m",
        "-XX:+UseSerialGC",
        "-jar",
        str(jar),
        f"127.0.0.1:{port}",
        str(path),
    ]
    pid = spawn_group(command, None, log_path)
    server = ExporterServer(port, pid, path, log_path)
    try:
        wait_for(
            lambda: _answers(server),
            pid,
            log_path,
            time.monotonic() + timeout_s,
            "the JMX exporter",
        )
    except BaseException:
        stop_exporter_server(server)
        raise
    return server


def stop_exporter_server(server: ExporterServer, *, timeout_s: float = 10.0) -> None:
    """Stop ``server`` (SIGTERM, then SIGKILL); a reused pid is never signalled.

    Raises:
        SandboxError: it survived SIGKILL.
    """
    ours = server.pid in CHILDREN or str(server.config) in (cmdline(server.pid) or "")
    if ours and is_alive(server.pid):
        terminate_group(server.pid, timeout_s)
    CHILDREN.pop(server.pid, None)


def scrape(port: int, *, timeout_s: float = 10.0) -> str:
    """The text of ``http://127.0.0.1:PORT/metrics`` (Prometheus text format).

    Raises:
        SandboxError: no answer or a non-200 status.
    """
    url = f"http://127.0.0.1:{port}/metrics"
    body = io.BytesIO()
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as r:
            receive_body(
                r,
                body,
                source=url,
                limits=LIMITS["exporter-answer"],
                deadline=time.monotonic() + timeout_s,
            )
    except InputError as exc:
        raise SandboxError(f"scraping {exc}") from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        raise SandboxError(f"scraping 127.0.0.1:{port}/metrics failed: {exc}") from exc
    return body.getvalue().decode("utf-8", errors="replace")


def _answers(server: ExporterServer) -> bool:
    try:
        scrape(server.port, timeout_s=5)
    except SandboxError:
        return False
    return True
