"""The SparkSession: the only place that starts one, classic (``local[*]``,
``--master``, a submitted run) or over Spark Connect (``--remote``), and
the one wording of Spark's errors (:func:`spark_error`).

``local[*]`` by default from ``pip install quotaform[spark]`` (Java 17+); a
real cluster with ``--master``, or by submitting the same run
(:mod:`quotaform.cli.spark_submit`); a Spark Connect server with
``--remote sc://...`` or ``SPARK_REMOTE``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import re
import shutil
import socket
import sys
import tempfile
import time
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path

from pyspark.sql import SparkSession

from quotaform.analytics.remote import TOKEN_ENV, redact_remote, remote_endpoint, scrub
from quotaform.errors import AnalyticsError

__all__ = ["session_target", "spark_error", "spark_session"]

log = logging.getLogger(__name__)


def spark_session(
    master: str | None = None,
    *,
    remote: str | None = None,
    shuffle_partitions: int = 8,
    app: str = "quotaform-analyze",
    connect_timeout_s: float = 5.0,
) -> SparkSession:
    """A SparkSession: a Spark Connect client of ``remote`` (``sc://HOST:PORT``),
    or a classic session on ``master`` (default ``local[*]``, or what
    ``spark-submit`` set); UTC session time zone, few shuffle partitions, no UI.

    The caller's ``MASTER`` and ``SPARK_REMOTE`` variables are not used
    (PySpark would read them itself): ``master`` and ``remote`` decide. Without
    ``-v`` (logging below INFO) the driver JVM's own standard error (the
    JVM's ``Using incubator modules`` warning, log4j) goes to a file whose
    tail a start failure quotes. A Connect token comes from the URL's
    ``;token=`` or ``SPARK_CONNECT_AUTHENTICATE_TOKEN`` (read by PySpark);
    messages show the remote redacted.

    Args:
        master: the Spark master URL (not with ``remote``).
        remote: the Spark Connect URL.
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        app: the application name (classic sessions).
        connect_timeout_s: seconds to wait for a standalone master's or a
            Connect server's port to accept a connection.

    Raises:
        AnalyticsError: both ``master`` and ``remote``; Spark cannot start (no
            Java 17+, a bad master URL, nothing answers at the master or the
            remote, the server refuses the session): one line naming the
            master or the redacted remote.
    """
    if master is not None and remote is not None:
        raise AnalyticsError(
            f"--master {master} and --remote {redact_remote(remote)}: give one of them"
        )
    runtime = {
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        "spark.sql.ansi.enabled": "false",
        "spark.sql.adaptive.enabled": "true",
    }
    with _without_spark_variables():
        if remote is not None:
            return _connect_session(remote, runtime, connect_timeout_s)
        return _classic_session(master, app, runtime, connect_timeout_s)


#: Variables PySpark and spark-submit read for themselves that would override
#: quotaform's own choice of master or remote (MASTER: spark-submit's master;
#: SPARK_REMOTE: turns every session into a Connect client).
_STEERING = ("MASTER", "SPARK_REMOTE", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE")


@contextlib.contextmanager
def _without_spark_variables() -> Iterator[None]:
    saved = {k: os.environ.pop(k) for k in _STEERING if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def _classic_session(
    master: str | None, app: str, runtime: Mapping[str, str], timeout_s: float
) -> SparkSession:
    from pyspark.util import is_remote_only

    if is_remote_only():
        raise AnalyticsError(
            "this installation has only the Spark Connect client (pyspark-client): give "
            "--remote sc://HOST:PORT (or set SPARK_REMOTE), or install quotaform[spark] for "
            "local Spark"
        )
    named = master or "local[*]"
    for host, port in _standalone_masters(master):
        if not _answers(host, port, timeout_s):
            raise AnalyticsError(
                f"no Spark master answers at {master} (nothing accepted a connection to "
                f"{host}:{port} within {timeout_s:g} s)"
            )
    log4j = Path(__file__).with_name("log4j2.properties")
    options = {
        "spark.app.name": app,
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{log4j}",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        **runtime,
    }
    if not _submitted():
        # The workers' Python (the utilisation's aggregation runs there,
        # quotaform.analytics.spark.partitions): this interpreter, where
        # quotaform, numpy and pyarrow are, unless the caller names another.
        # PySpark reads the variable itself, not spark.pyspark.python.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    if master is not None:
        options["spark.master"] = master
    elif not _submitted() and "SPARK_MASTER" not in os.environ:
        options["spark.master"] = "local[*]"
    builder = SparkSession.builder
    for key, value in options.items():
        builder = builder.config(key, value)
    jvm_log: Path | None = None
    try:
        jvm_log = _quiet_gateway(options)
        return builder.getOrCreate()
    except Exception as exc:
        first = _first_line(exc)
        tail = _tail(jvm_log) if jvm_log else ""
        if _no_java():
            raise AnalyticsError(
                f"Spark could not start on {named}: {first}; it needs Java 17+ on PATH or in "
                "JAVA_HOME. The Python engine needs none: --engine python"
            ) from exc
        raise AnalyticsError(f"Spark could not start on {named}: {first}{tail}") from exc


def _quiet_gateway(options: Mapping[str, str]) -> Path | None:
    """Start PySpark's JVM gateway with its standard error in a file (the
    JVM's own warnings and log4j lines), unless logging is verbose or a JVM
    is already there (a session before, or spark-submit's). Returns the file."""
    from pyspark import SparkConf, SparkContext
    from pyspark.java_gateway import launch_gateway

    if (
        log.isEnabledFor(logging.INFO)
        or SparkContext._gateway is not None  # PySpark's one gateway per process
        or os.environ.get("PYSPARK_GATEWAY_PORT")
    ):
        return None
    fd, name = tempfile.mkstemp(prefix="quotaform-spark-driver-", suffix=".log")
    path = Path(name)
    atexit.register(path.unlink, missing_ok=True)
    conf = SparkConf(loadDefaults=False)
    conf.setAll(list(options.items()))
    with os.fdopen(fd, "wb") as err:
        gateway = launch_gateway(conf, popen_kwargs={"stderr": err})
    # Installs the gateway only (as SparkContext(gateway=...) would, without
    # building the context): the builder then creates the context as usual.
    SparkContext._ensure_initialized(gateway=gateway, conf=conf)
    return path


def _connect_session(remote: str, runtime: Mapping[str, str], timeout_s: float) -> SparkSession:
    shown = redact_remote(remote)
    host, port = remote_endpoint(remote)
    token = os.environ.get(TOKEN_ENV)
    if not _answers(host.strip("[]"), port, timeout_s):
        raise AnalyticsError(
            f"no Spark Connect server answers at {shown} (nothing accepted a connection to "
            f"{host}:{port} within {timeout_s:g} s)"
        )
    if not log.isEnabledFor(logging.INFO):
        # gRPC's C core logs TLS handshakes and retries itself; PySpark warns
        # RETRIES_EXCEEDED: quotaform says what failed in one line instead.
        os.environ.setdefault("GRPC_VERBOSITY", "NONE")
        warnings.filterwarnings("ignore", module=r"pyspark(\.|$)")
    spark: SparkSession | None = None
    try:
        spark = SparkSession.builder.remote(remote).getOrCreate()
        _first_call(spark, runtime)
    except Exception as exc:
        if spark is not None:
            with contextlib.suppress(Exception):
                spark.stop()  # with the few retries _first_call left in place
        secure = "" if ";token=" not in remote and not token else _TOKEN_NOTE
        raise AnalyticsError(
            f"Spark Connect at {shown}: {scrub(_first_line(exc), remote, token)}{secure}"
        ) from exc
    return spark


def _submitted() -> bool:
    """True when spark-submit (or ``pyspark --master``) started this driver:
    its master, from the submit arguments, is kept."""
    return bool(os.environ.get("PYSPARK_GATEWAY_PORT") or os.environ.get("PYSPARK_SUBMIT_ARGS"))


#: Why a token can fail where the same URL without one works.
_TOKEN_NOTE = (
    " (with a token, PySpark's client uses TLS unless the host is localhost; use_ssl and the "
    "server's certificate must match)"
)


def _first_call(spark: SparkSession, runtime: Mapping[str, str]) -> None:
    """Set the runtime configuration, the session's first calls, with few
    retries: PySpark's default policy retries an unavailable server for ten
    minutes. The run's later calls get the default back (a long job rides out
    a short outage); on failure the few retries stay, for the session's stop."""
    client = spark.client
    policies = client.get_retry_policies()
    from pyspark.sql.connect.client.retries import DefaultPolicy

    client.set_retry_policies([DefaultPolicy(max_retries=3, max_backoff=2000)])
    for key, value in runtime.items():
        spark.conf.set(key, value)
    client.set_retry_policies(policies)


def spark_error(
    exc: BaseException, *, master: str | None, remote: str | None
) -> AnalyticsError | None:
    """``exc`` as one line naming where Spark ran (the remote redacted, its
    secrets scrubbed), if it is an error of PySpark, Py4J or the Connect
    client; ``None`` for any other exception (a bug: let it surface)."""
    module = type(exc).__module__
    if not module.startswith(("pyspark", "py4j", "grpc")):
        return None
    where = redact_remote(remote) if remote is not None else (master or "local[*]")
    text = scrub(_first_line(exc), remote, os.environ.get(TOKEN_ENV))
    return AnalyticsError(f"Spark on {where}: {text}")


def session_target(spark: SparkSession, remote: str | None = None) -> str:
    """Where ``spark`` runs, for a progress line: the redacted remote with
    ``(Spark Connect)``, or the classic session's master."""
    if remote is not None:
        return f"{redact_remote(remote)} (Spark Connect)"
    return str(spark.conf.get("spark.master", "local[*]"))


def _standalone_masters(master: str | None) -> list[tuple[str, int]]:
    """``(host, port)`` of each master of a ``spark://h1:p1,h2:p2`` URL."""
    if not master or not master.startswith("spark://"):
        return []
    found = []
    for part in master[len("spark://") :].split(","):
        host, _, port = part.strip().rpartition(":")
        if host and port.isdigit():
            found.append((host.strip("[]"), int(port)))
    return found


def _answers(host: str, port: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with socket.create_connection((host, port), timeout=min(2.0, timeout_s)):
                return True
        except OSError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.25)


def _first_line(exc: BaseException) -> str:
    """``Type: first line`` of ``exc``; for a gRPC error its status and details
    (its first line is ``<_InactiveRpcError of RPC that terminated with:``)."""
    text = str(exc).strip()
    status = re.search(r"status = (StatusCode\.\w+)", text)
    details = re.search(r'details = "([^"]*)"', text)
    if status:
        return f"{status.group(1)}: {details.group(1)[:300] if details else ''}".rstrip(": ")
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    first = lines[0] if lines else ""
    missing = re.search(r"ModuleNotFoundError: No module named '([\w.]+)'", text)
    if missing:
        return (
            f"the Spark workers' Python cannot import {missing.group(1)}: the utilisation is "
            "aggregated there, so install quotaform[spark] in the executors' Python "
            "(PYSPARK_PYTHON; over Spark Connect, the server's)"
        )
    if "Traceback (most recent call last)" in text:  # a Python worker's: its error, last
        return f"{type(exc).__name__}: {lines[-1][:300]}"
    return f"{type(exc).__name__}: {first[:300]}".rstrip(": ")


def _tail(path: Path) -> str:
    """The JVM's reason from its standard error (its last exception line)."""
    try:
        lines = [line.strip() for line in path.read_text(errors="replace").splitlines()]
    except OSError:
        return ""
    reasons = [line for line in lines if "Exception" in line or "Error:" in line]
    return f" ({reasons[-1][:300]})" if reasons else ""


def _no_java() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home:
        return not os.access(Path(home) / "bin" / "java", os.X_OK)
    return shutil.which("java") is None
