"""Session fixtures shared by all tests: one real sandbox Kafka broker, one
multi-node sandbox cluster (3 brokers, 3 controllers), one local
SparkSession, one Spark standalone cluster and one Spark Connect server (the
last two from the pip pyspark package, started on first use only), and the
Prometheus binary (built once with ``go install``, cached).

The broker is started on first use by the same code as ``quotaform sandbox up``
(named ``pytest-<pid>``, free loopback ports) and stopped when the session ends.
If it cannot start, every test that needs it FAILS with the reason; it is never
skipped, so a missing Java or Maven cannot turn a red run green.

Set ``QUOTAFORM_TEST_KAFKA_VERSION`` to run against another Kafka release.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from quotaform.sandbox import (
    DEFAULT_KAFKA_VERSION,
    SandboxBroker,
    broker_status,
    start_broker,
    stop_broker,
)
from quotaform.sandbox.broker import default_state_dir
from quotaform.sandbox.processes import is_alive
from tests.configcommand import run_config_command

ConfigCommand = Callable[[Sequence[str]], "subprocess.CompletedProcess[str]"]

_SESSION_PREFIX = "pytest-"


def _stop_orphans() -> None:
    """Stop sandboxes of earlier pytest sessions that died without tearing down."""
    for state in sorted(default_state_dir().glob(f"{_SESSION_PREFIX}*.json")):
        owner = state.stem.rsplit("-", 1)[-1]
        if owner.isdigit() and not is_alive(int(owner)):
            stop_broker(name=state.stem)  # verifies the pid is that sandbox's java first


@contextlib.contextmanager
def sandbox_broker(name: str, **options: Any) -> Iterator[SandboxBroker]:
    """Start a sandbox broker named ``name`` (options as for ``start_broker``),
    yield it, and always stop it. If it cannot start, the test FAILS with the
    reason (never skips), so a missing Java or Maven cannot turn a red run green.

    Set ``QUOTAFORM_TEST_KAFKA_VERSION`` to run against another Kafka release.
    """
    version = os.environ.get("QUOTAFORM_TEST_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
    failure: str | None
    try:
        _stop_orphans()
        broker = start_broker(version=version, name=name, **options)
    except Exception as exc:
        failure = f"Could not start the sandbox Kafka broker {name!r} ({type(exc).__name__}): {exc}"
    else:
        failure = None
    if failure is not None:  # outside the except: no chained traceback in the report
        stop_broker(name=name)
        pytest.fail(failure, pytrace=False)
    try:
        yield broker
    finally:
        stop_broker(name=name)


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[SandboxBroker]:
    """The session's sandbox broker (``broker.bootstrap`` is ``127.0.0.1:PORT``)."""
    with sandbox_broker(f"{_SESSION_PREFIX}{os.getpid()}") as broker:
        yield broker


#: The shape of :func:`kafka_cluster`.
CLUSTER_BROKERS, CLUSTER_CONTROLLERS = 3, 3


@pytest.fixture(scope="module")
def kafka_cluster() -> Iterator[SandboxBroker]:
    """The module's multi-node sandbox: 3 brokers (node ids 1, 2, 3) and 3
    controllers (node ids 1001-1003, a static KRaft quorum), each node its own
    process on free loopback ports, started on first use by the same code as
    ``quotaform sandbox up --brokers 3 --controllers 3`` and stopped when the
    module ends (one module uses it: its six JVMs would otherwise take CPU from
    the timing-sensitive tests after it). It FAILS, never skips, if it cannot start.

    * ``cluster.bootstrap``: the three brokers, ``127.0.0.1:P1,127.0.0.1:P2,...``
      (clients then talk to whichever broker they pick);
    * ``cluster.brokers`` / ``cluster.controllers``: the nodes
      (:class:`~quotaform.sandbox.SandboxNode`: ``node_id``, ``address``, ``pid``);
      ``node.solo_address`` is a listener only that broker has, so a client
      (Kafka's ConfigCommand: ``run_config_command(..., bootstrap=node.solo_address)``)
      reaches that broker alone: "on each of 3 brokers" can be checked broker
      by broker;
    * internal topics and the apply lock are replicated 3 times.

    Every test shares it: use a unique entity prefix (the ``uniq`` fixture)
    and remove what you create. A test that breaks a node
    (``kill_node``, ``stop_node``, ``suspended_node``) restores it before it
    ends: :func:`restore_cluster` restarts every node that is down.
    """
    name = f"{_SESSION_PREFIX}cluster-{os.getpid()}"
    with sandbox_broker(name, brokers=CLUSTER_BROKERS, controllers=CLUSTER_CONTROLLERS) as cluster:
        yield cluster


def restore_cluster(cluster: SandboxBroker) -> SandboxBroker:
    """Restart every node of ``cluster`` that is not running (killed or
    stopped by a fault test) on its own log dir, and return once every broker
    is registered again; a cluster whose nodes all run is returned as it is."""
    if not broker_status(name=cluster.name).down:
        return cluster
    version = os.environ.get("QUOTAFORM_TEST_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
    return start_broker(
        version=version,
        name=cluster.name,
        brokers=len(cluster.brokers),
        controllers=len(cluster.controllers),
    )


@pytest.fixture(scope="session")
def config_command(kafka_broker: SandboxBroker) -> ConfigCommand:
    """``config_command(["--describe", "--entity-type", "users"])`` runs Kafka's own
    kafka-configs against the session broker (ConfigCommand's ``main`` in the
    warm JVM of ``tests/configcommand.py``; raises SandboxError on non-zero exit)."""
    return functools.partial(
        run_config_command, bootstrap=kafka_broker.bootstrap, version=kafka_broker.version
    )


@pytest.fixture(scope="session")
def spark():  # type: ignore[no-untyped-def]
    """One local SparkSession for every Spark test (``local[1]``, 2 shuffle
    partitions, UI off), made by the job's own :func:`spark_session`. If it
    cannot start the test FAILS (never skips): Spark is part of the product."""
    from quotaform.analytics.spark.job import spark_session
    from quotaform.errors import AnalyticsError

    try:
        session = spark_session("local[1]", shuffle_partitions=2, app="quotaform-tests")
    except AnalyticsError as exc:
        pytest.fail(f"Could not start Spark: {exc}", pytrace=False)
    yield session
    session.stop()


def _spark_sandbox(start: Callable[[str], Any], what: str, name: str) -> Iterator[Any]:
    """Start ``what`` named ``name`` with ``start``, yield it, always stop it;
    the test FAILS (never skips) if it cannot start. Spark processes left by
    pytest sessions that died are stopped first."""
    from quotaform.sandbox.spark import stop_orphans, stop_spark

    failure: str | None
    try:
        stop_orphans(_SESSION_PREFIX)
        started = start(name)
    except Exception as exc:
        failure = f"Could not start {what} {name!r} ({type(exc).__name__}): {exc}"
    else:
        failure = None
    if failure is not None:  # outside the except: no chained traceback in the report
        stop_spark(name)
        pytest.fail(failure, pytrace=False)
    try:
        yield started
    finally:
        stop_spark(name)


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[Any]:
    """The session's Spark standalone cluster: a master and two workers of one
    core and 1 GiB each on 127.0.0.1 (``cluster.master_url`` is
    ``spark://127.0.0.1:PORT``). FAILS, never skips, if it cannot start."""
    from quotaform.sandbox.spark import start_cluster

    yield from _spark_sandbox(
        lambda name: start_cluster(name, workers=2, cores=1, memory="1g"),
        "the Spark standalone cluster",
        f"{_SESSION_PREFIX}cluster-{os.getpid()}",
    )


@pytest.fixture(scope="module")
def spark_connect() -> Iterator[Any]:
    """The module's Spark Connect server (``local[2]``) on 127.0.0.1
    (``server.remote`` is ``sc://127.0.0.1:PORT``), stopped when the module
    ends (one module uses it). FAILS, never skips, if it cannot start."""
    from quotaform.sandbox.spark import start_connect_server

    yield from _spark_sandbox(
        start_connect_server, "the Spark Connect server", f"{_SESSION_PREFIX}connect-{os.getpid()}"
    )


@pytest.fixture(scope="session")
def prometheus_binary() -> Path:
    """The cached Prometheus v0.316.0 binary, built with ``go install`` on first
    use (a few minutes; needs Go and the Go module proxy). If it cannot be had
    the test FAILS with the reason (never skips, under CI=true or not)."""
    from quotaform.errors import SandboxError
    from quotaform.sandbox.prometheus import ensure_prometheus

    failure: str | None = None
    try:
        binary = ensure_prometheus()
    except SandboxError as exc:
        failure = f"No Prometheus binary (CI={os.environ.get('CI', '')!r}): {exc}"
    if failure is not None:  # outside the except: no chained traceback in the report
        pytest.fail(failure, pytrace=False)
    return binary


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Keep each module's tests on one pytest-xdist worker (``scripts/test``
    runs ``-n 2 --dist loadgroup``): a module's fixtures (a broker, a
    cluster, a load scenario) then start once. A module that must share a
    heavy session fixture with other modules (one SparkSession, one Spark
    cluster) names a group of its own with ``pytest.mark.xdist_group``; this
    hook runs before xdist's, which reads the groups."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))
