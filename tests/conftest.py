"""Session fixtures shared by all tests: one real sandbox Kafka broker, one
multi-node sandbox cluster (3 brokers, 3 controllers), one local
SparkSession, one Spark standalone cluster and one Spark Connect server (the
last two from the pip pyspark package, started in the background beside the
first Spark tests, only if tests of this process need them), and the
Prometheus binary (built once with ``go install``, cached). Every Spark the
tests start reads ``tests/spark-conf/`` (fast-starting JVMs).

The broker is started on first use by the same code as ``quotaform sandbox up``
(named ``pytest-<pid>``, free loopback ports) and stopped when the session ends.
If it cannot start, every test that needs it FAILS with the reason; it is never
skipped, so a missing Java or Maven cannot turn a red run green.

Set ``QUOTAFORM_TEST_KAFKA_VERSION`` to run against another Kafka release.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
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

#: The tests' Spark configuration (``spark-defaults.conf``: fast-starting
#: JVMs), read by every Spark the tests start, in this process or a child.
SPARK_CONF_DIR = Path(__file__).resolve().parent / "spark-conf"
os.environ["SPARK_CONF_DIR"] = str(SPARK_CONF_DIR)
#: The JVM spark-submit and spark-class run first only to build the real
#: command line: the same fast-start flags.
os.environ["SPARK_LAUNCHER_OPTS"] = "-XX:+UseSerialGC -XX:TieredStopAtLevel=1"


def _stop_orphans() -> None:
    """Stop sandboxes of earlier pytest sessions that died without tearing down."""
    for state in sorted(default_state_dir().glob(f"{_SESSION_PREFIX}*.json")):
        owner = state.stem.rsplit("-", 1)[-1]
        if owner.isdigit() and not is_alive(int(owner)):
            stop_broker(name=state.stem)  # verifies the pid is that sandbox's java first


@contextlib.contextmanager
def _sandbox_broker(name: str, **options: Any) -> Iterator[SandboxBroker]:
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
def sandbox_broker() -> Callable[..., contextlib.AbstractContextManager[SandboxBroker]]:
    """``with sandbox_broker(name, **options) as broker``: a sandbox broker of
    the test's own (options as for ``start_broker``), always stopped after;
    if it cannot start, the test FAILS with the reason (never skips)."""
    return _sandbox_broker


@pytest.fixture(scope="session")
def kafka_broker() -> Iterator[SandboxBroker]:
    """The session's sandbox broker (``broker.bootstrap`` is ``127.0.0.1:PORT``)."""
    with _sandbox_broker(f"{_SESSION_PREFIX}{os.getpid()}") as broker:
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
    ends: the ``restore_cluster`` fixture restarts every node that is down.
    """
    name = f"{_SESSION_PREFIX}cluster-{os.getpid()}"
    with _sandbox_broker(name, brokers=CLUSTER_BROKERS, controllers=CLUSTER_CONTROLLERS) as cluster:
        yield cluster


def _restore_cluster(cluster: SandboxBroker) -> SandboxBroker:
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
def restore_cluster() -> Callable[[SandboxBroker], SandboxBroker]:
    """``restore_cluster(cluster)``: restart every node of ``cluster`` that is
    not running and return once every broker is registered again."""
    return _restore_cluster


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
    from quotaform.analytics.spark.session import spark_session
    from quotaform.errors import AnalyticsError

    try:
        session = spark_session("local[1]", shuffle_partitions=2, app="quotaform-tests")
    except AnalyticsError as exc:
        pytest.fail(f"Could not start Spark: {exc}", pytrace=False)
    yield session
    session.stop()


def spark_test_conf() -> dict[str, str]:
    """``tests/spark-conf/spark-defaults.conf`` as settings, for a Spark that
    does not read ``SPARK_CONF_DIR`` (the sandbox's Connect server)."""
    settings = {}
    for line in (SPARK_CONF_DIR / "spark-defaults.conf").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, value = line.split(None, 1)
            settings[key] = value.strip()
    return settings


def _start_spark_cluster(name: str) -> Any:
    from quotaform.sandbox.spark import start_cluster

    return start_cluster(name, workers=2, cores=1, memory="1g")


def _start_spark_connect(name: str) -> Any:
    from quotaform.sandbox.spark import start_connect_server

    return start_connect_server(name, conf=spark_test_conf())


@dataclasses.dataclass
class _SparkSandbox:
    what: str
    name: str
    start: Callable[[str], Any]
    started: concurrent.futures.Future[Any] | None = None
    users: int = 0  # tests of this process that still need it


class SparkSandboxes:
    """The Spark sandboxes of this pytest process (the standalone cluster, the
    Connect server), each started at most once: in the background when the
    first Spark test of the process starts (beside the local-mode tests),
    waited for by the first test that needs it, and stopped after the last
    test of the process that needs it (or when the session ends). Under
    pytest-xdist the tests that will run in this worker are those of the
    same ``xdist_group``: the modules sharing these fixtures are one group."""

    def __init__(self) -> None:
        self._boxes = {
            "spark_cluster": _SparkSandbox(
                "the Spark standalone cluster",
                f"{_SESSION_PREFIX}spark-cluster-{os.getpid()}",
                _start_spark_cluster,
            ),
            "spark_connect": _SparkSandbox(
                "the Spark Connect server",
                f"{_SESSION_PREFIX}connect-{os.getpid()}",
                _start_spark_connect,
            ),
        }
        self._pool = concurrent.futures.ThreadPoolExecutor(len(self._boxes), "spark-sandbox")
        self._planned = False
        self._orphans_stopped = False

    def plan(self, item: pytest.Item) -> None:
        """At the first Spark test: start what the tests of this process need."""
        if self._planned or not _uses_spark(item):
            return
        self._planned = True
        for other in _items_here(item):
            for fixture, box in self._boxes.items():
                box.users += fixture in getattr(other, "fixturenames", ())
        for box in self._boxes.values():
            if box.users:
                self._submit(box)

    def get(self, fixture: str) -> Any:
        """The running sandbox (started now if it was not planned); the test
        FAILS, never skips, if it cannot start."""
        box = self._boxes[fixture]
        failure: str | None
        try:
            started = self._submit(box).result()
        except Exception as exc:
            failure = f"Could not start {box.what} {box.name!r} ({type(exc).__name__}): {exc}"
        else:
            failure = None
        if failure is not None:  # outside the except: no chained traceback in the report
            pytest.fail(failure, pytrace=False)
        return started

    def done(self, item: pytest.Item) -> None:
        """After each test: stop a sandbox no later test of this process needs."""
        for fixture, box in self._boxes.items():
            if fixture in getattr(item, "fixturenames", ()) and box.users:
                box.users -= 1
                if not box.users:
                    self._stop(box)

    def stop_all(self) -> None:
        for box in self._boxes.values():
            self._stop(box)
        self._pool.shutdown(wait=True)

    def _submit(self, box: _SparkSandbox) -> concurrent.futures.Future[Any]:
        if box.started is None:
            if not self._orphans_stopped:  # Spark processes of pytest sessions that died
                from quotaform.sandbox.spark import stop_orphans

                stop_orphans(_SESSION_PREFIX)
                self._orphans_stopped = True
            box.started = self._pool.submit(box.start, box.name)
        return box.started

    def _stop(self, box: _SparkSandbox) -> None:
        from quotaform.sandbox.spark import stop_spark

        if box.started is not None:
            concurrent.futures.wait([box.started])
            stop_spark(box.name)


def _uses_spark(item: pytest.Item) -> bool:
    names = getattr(item, "fixturenames", ())
    return any(n in names for n in ("spark", "spark_cluster", "spark_connect"))


def _xdist_group(item: pytest.Item) -> str | None:
    marker = item.get_closest_marker("xdist_group")
    if marker is None:
        return None
    return str(marker.args[0] if marker.args else marker.kwargs.get("name"))


def _items_here(item: pytest.Item) -> list[pytest.Item]:
    """The tests this process will run: all of them, or under pytest-xdist
    (``--dist loadgroup``) those of ``item``'s group."""
    if not hasattr(item.config, "workerinput"):
        return list(item.session.items)
    group = _xdist_group(item)
    return [i for i in item.session.items if group is not None and _xdist_group(i) == group]


_SPARK_SANDBOXES = SparkSandboxes()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    _SPARK_SANDBOXES.plan(item)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Iterator[None]:
    yield
    _SPARK_SANDBOXES.done(item)


def pytest_unconfigure(config: pytest.Config) -> None:
    _SPARK_SANDBOXES.stop_all()


@pytest.fixture(scope="session")
def spark_cluster() -> Any:
    """The session's Spark standalone cluster: a master and two workers of one
    core and 1 GiB each on 127.0.0.1 (``cluster.master_url`` is
    ``spark://127.0.0.1:PORT``), started beside the first Spark tests
    (:class:`SparkSandboxes`). FAILS, never skips, if it cannot start."""
    return _SPARK_SANDBOXES.get("spark_cluster")


@pytest.fixture(scope="session")
def spark_connect() -> Any:
    """The session's Spark Connect server (``local[2]``) on 127.0.0.1
    (``server.remote`` is ``sc://127.0.0.1:PORT``), started beside the first
    Spark tests (:class:`SparkSandboxes`). FAILS, never skips, if it cannot
    start."""
    return _SPARK_SANDBOXES.get("spark_connect")


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
    runs ``-n 3 --dist loadgroup``): a module's fixtures (a broker, a
    cluster, a load scenario) then start once. A module that must share a
    heavy session fixture with other modules (one SparkSession, one Spark
    cluster) names a group of its own with ``pytest.mark.xdist_group``; this
    hook runs before xdist's, which reads the groups.

    The longest work is handed out first: xdist gives each worker the next
    group in collection order as it frees up (``scripts/test`` passes
    ``--no-loadscope-reorder``, or xdist would order groups by their number
    of tests), so the Spark group (the local session, the standalone
    cluster and the Connect server: one worker runs them one after the
    other, as side by side they starve each other on two cores) would
    otherwise start last and leave the other workers idle at the end.
    Named groups, then the other broker modules, then the unit tests, which
    fill the gaps; a stable sort, so every module's tests stay in order."""
    for item in items:
        if item.get_closest_marker("xdist_group") is None:
            item.add_marker(pytest.mark.xdist_group(item.nodeid.split("::", 1)[0]))

    def rank(item: pytest.Item) -> int:
        group = _xdist_group(item) or ""
        if group.startswith("spark"):
            return 0
        if not group.startswith("tests/"):
            return 1  # a named group: modules sharing a broker or cluster
        return 2 if group.startswith("tests/integration/") else 3

    items.sort(key=rank)


class _GroupGuard:
    """Refuse to run a ``--dist loadgroup`` worker whose tests lost their
    group: pytest-xdist tells the scheduler a test's group by appending
    ``@group`` to its node id, and a pytest whose node ids do not take that
    (pytest 9.2 with pytest-xdist 3.8: pytest-dev/pytest-xdist#1386) makes
    xdist hand out single tests, so every module fixture (a broker, a
    cluster, a Spark JVM) starts once per worker, silently. Registered by
    :func:`pytest_configure`; runs after xdist's own hook (``trylast``)."""

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        if not getattr(config.option, "loadgroup", False):
            return
        lost = [
            item.nodeid
            for item in items
            if item.get_closest_marker("xdist_group") and "@" not in item.nodeid.rpartition("]")[2]
        ]
        if lost:
            self.failure = (
                f"--dist loadgroup: {len(lost)} tests have no group in their node id (first: "
                f"{lost[0]}): this pytest and pytest-xdist do not group tests "
                "(pytest-dev/pytest-xdist#1386); install the versions of constraints.txt"
            )

    failure: str | None = None

    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        """Every test FAILS with the reason (raising during a worker's
        collection only shows as an xdist internal error)."""
        if self.failure is not None:
            pytest.fail(self.failure, pytrace=False)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_GroupGuard(), "quotaform-xdist-group-guard")
