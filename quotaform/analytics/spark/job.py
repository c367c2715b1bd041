"""The Spark job: the only place that starts a SparkSession, reads and writes.

``local[*]`` by default from ``pip install quotaform[spark]`` (Java 17+); a
real cluster with ``--master``, or by submitting the same run
(:mod:`quotaform.cli.spark_submit`)::

    spark-submit --master "$SPARK_MASTER_URL" "$(python -m quotaform.cli.spark_submit --path)" \
        utilisation manifests/ --usage s3a://bucket/usage/ --out s3a://bucket/out/

(quotaform installed on the driver and the executors). Inputs and outputs
may be local paths or any Hadoop-compatible URI Spark can read and write
(:mod:`quotaform.analytics.paths`).
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import math
import os
import re
import shutil
import socket
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from quotaform.analytics.configs import QuotaConfig, config_rows
from quotaform.analytics.model import USAGE_COLUMNS
from quotaform.analytics.paths import DataPath, name_of
from quotaform.analytics.remote import TOKEN_ENV, redact_remote, remote_endpoint, scrub
from quotaform.analytics.spark import transforms
from quotaform.analytics.spark.schemas import CONFIG_SCHEMA, USAGE_SCHEMA
from quotaform.analytics.usage import (
    EXAMPLES_KEPT,
    LabelMap,
    Rejections,
    UsageFormat,
    detect_format,
    jmxtool_rows,
    json_line_kind,
    prometheus_rows,
    usage_files,
)
from quotaform.errors import AnalyticsError
from quotaform.inputs.limits import LIMITS, Limits
from quotaform.kafka.keys import METRICS, QUOTA_KEYS
from quotaform.kafka.metrics import ISO_TIMESTAMP

__all__ = [
    "config_frame",
    "read_usage_counted",
    "session_target",
    "spark_error",
    "spark_session",
    "write_table",
    "write_texts",
]

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


def config_frame(spark: SparkSession, configs: Sequence[QuotaConfig]) -> DataFrame:
    """The quota configurations as a (small) DataFrame of CONFIG_SCHEMA."""
    return spark.createDataFrame(config_rows(configs), CONFIG_SCHEMA)


def _checked(frame: DataFrame, where: Any, known: Sequence[str] | None = None) -> DataFrame:
    """Every row typed as USAGE_SCHEMA plus ``_reason`` (why it cannot be
    used, null when it can) and ``_where``: :func:`quotaform.analytics.usage.check_row`
    as columns, and rows of clusters not in ``known`` refused."""
    types = dict(frame.dtypes)
    text = {c: F.col(c).cast("string") for c in USAGE_COLUMNS}
    metrics = list(METRICS)
    ip_metrics = [m for m, (k, _) in METRICS.items() if "ip" in QUOTA_KEYS[k].entity_types]
    ts_text = text["timestamp"]
    # Typed columns (Parquet) need no parsing: only text is checked and parsed.
    if types.get("timestamp", "").startswith("timestamp"):
        parsed_ts = F.col("timestamp").cast("timestamp")
    else:
        parsed_ts = F.when(ts_text.rlike(ISO_TIMESTAMP), F.try_to_timestamp(ts_text))
    if types.get("value") in ("double", "float", "int", "bigint"):
        value = F.col("value").cast("double")
    else:
        value = text["value"].try_cast("double")
    ip = F.when(text["ip"] == "", F.lit(None)).otherwise(text["ip"])
    reason = (
        F.when(
            text["cluster"].isNull() | (text["cluster"] == ""), F.lit("cluster: missing or empty")
        )
        .when(text["broker"].isNull() | (text["broker"] == ""), F.lit("broker: missing or empty"))
        .when(
            ~F.coalesce(text["metric"].isin(metrics), F.lit(False)),
            F.concat(
                F.lit("metric: "),
                F.coalesce(text["metric"], F.lit("None")),
                F.lit(" is not a usage metric"),
            ),
        )
        .when(
            parsed_ts.isNull(),
            F.concat(
                F.lit("timestamp: "),
                F.coalesce(ts_text, F.lit("None")),
                F.lit(" is not an ISO-8601 time"),
            ),
        )
        .when(
            value.isNull(),
            F.concat(
                F.lit("value: "),
                F.coalesce(text["value"], F.lit("None")),
                F.lit(" is not a number"),
            ),
        )
        .when(
            F.abs(value) == F.lit(float("inf")),
            F.concat(
                F.lit("value: "),
                F.coalesce(text["value"], F.lit("None")),
                F.lit(" is not a finite number"),
            ),
        )
        .when(
            text["metric"].isin(ip_metrics) & ip.isNull(),
            F.concat(F.lit("ip: "), text["metric"], F.lit(" needs the ip tag")),
        )
        .when(
            ~text["metric"].isin(ip_metrics) & ip.isNotNull(),
            F.concat(F.lit("ip: only connection metrics carry an ip, not "), text["metric"]),
        )
    )
    if known is not None:
        reason = reason.when(
            ~text["cluster"].isin(list(known)),
            F.concat(F.lit("cluster: no quota configuration for cluster "), text["cluster"]),
        )
    return frame.select(
        text["cluster"].alias("cluster"),
        text["broker"].alias("broker"),
        parsed_ts.alias("timestamp"),
        text["metric"].alias("metric"),
        F.coalesce(text["user"], F.lit("")).alias("user"),
        F.coalesce(text["client_id"], F.lit("")).alias("client_id"),
        ip.alias("ip"),
        value.alias("value"),
        reason.alias("_reason"),
        where.alias("_where"),
    )


def _with_columns(frame: DataFrame, path: str) -> DataFrame:
    missing = [c for c in USAGE_COLUMNS if c not in frame.columns]
    if missing:
        raise AnalyticsError(
            f"{path}: missing column(s) {', '.join(missing)} (expected {', '.join(USAGE_COLUMNS)})"
        )
    return frame


#: Prometheus and JmxTool rows as handed to Spark: text, checked like JSON Lines.
_STAGED_SCHEMA = pa.schema([(c, pa.string()) for c in (*USAGE_COLUMNS, "_where")])
#: Rows per Arrow batch of parsed (Prometheus, JmxTool) usage.
_BATCH_ROWS = 50_000
#: File name endings read as usage from a directory (as :func:`usage_files`).
_DATA_SUFFIXES = (".parquet", ".csv", ".jsonl", ".ndjson", ".json")


def _usage_inputs(
    spark: SparkSession,
    paths: Sequence[DataPath],
    fmt: UsageFormat,
    skipped: Rejections,
    limits: Limits,
) -> list[tuple[DataPath, UsageFormat, bool]]:
    """Each usage file as (where, layout, local?): local paths listed with
    :func:`usage_files`, URIs listed by Spark (``binaryFile``, content not
    read), in the order given. A ``*.json`` file that is neither a
    ``query_range`` answer nor JSON Lines is left out of a directory (counted
    in ``skipped``) and refused when named.

    Raises:
        AnalyticsError: as :func:`usage_files`, for URIs too.
    """
    found: list[tuple[DataPath, UsageFormat, bool]] = []
    for given in paths:
        if isinstance(given, Path):
            for path in usage_files([given], skipped, limits=limits):
                found.append((path, detect_format(path) if fmt is UsageFormat.auto else fmt, True))
            continue
        listed = _listed(spark, given)
        for uri in listed:
            kind = _uri_format(spark, uri)
            if kind is None:
                if listed == [given]:
                    raise AnalyticsError(
                        f"{uri}: neither a Prometheus query_range answer nor JSON Lines usage rows"
                    )
                skipped.skipped[
                    f"{uri}: neither a Prometheus query_range answer nor JSON Lines"
                ] += 1
                continue
            found.append((uri, kind if fmt is UsageFormat.auto else fmt, False))
    if not found:
        raise AnalyticsError(
            f"{', '.join(map(str, paths))}: no usage files (*.parquet, *.csv, *.jsonl, *.json)"
        )
    return found


def _listed(spark: SparkSession, uri: str) -> list[str]:
    """The data files at ``uri`` (a file, or a directory searched
    recursively; names starting with ``.`` or ``_`` left out, as Spark does).

    Raises:
        AnalyticsError: nothing there, or no data file in it.
    """
    try:
        rows = (
            spark.read.format("binaryFile")
            .option("recursiveFileLookup", "true")
            .load(uri)
            .select("path")
            .collect()
        )
    except Exception as exc:  # Spark's AnalysisException (PATH_NOT_FOUND) and kin
        first = str(exc).strip().splitlines()[0][:300] if str(exc).strip() else type(exc).__name__
        raise AnalyticsError(f"{uri}: cannot be listed by Spark ({first})") from None
    files = sorted(str(r["path"]) for r in rows if str(r["path"]).endswith(_DATA_SUFFIXES))
    if not files:
        raise AnalyticsError(f"{uri}: no usage files (*.parquet, *.csv, *.jsonl, *.json)")
    return files


def _uri_format(spark: SparkSession, uri: str) -> UsageFormat | None:
    """:func:`detect_format` for a URI: its first line read through Spark
    (``None``: a ``*.json`` file that is not usage, :func:`json_line_kind`)."""
    if uri.endswith(".json"):
        head = spark.read.text(uri).limit(5).collect()
        return json_line_kind("\n".join(str(r["value"]) for r in head))
    if uri.endswith(".csv"):
        first = spark.read.text(uri).first()
        if first is not None and str(first["value"]).startswith('"time"'):
            return UsageFormat.jmxtool
    return UsageFormat.generic


@contextlib.contextmanager
def _local_copy(spark: SparkSession, where: DataPath, local: bool) -> Iterator[Path]:
    """``where`` as a local file for the streaming parsers: itself, or a
    URI's text fetched through Spark into a temporary file (removed after)."""
    if local:
        yield Path(where)
        return
    row = spark.read.text(str(where), wholetext=True).first()
    with tempfile.TemporaryDirectory(prefix="quotaform-usage-") as scratch:
        path = Path(scratch) / name_of(where)
        path.write_text("" if row is None else str(row["value"]), encoding="utf-8")
        try:
            yield path
        except AnalyticsError as exc:
            raise AnalyticsError(str(exc).replace(str(path), str(where))) from None


def _text(value: Any) -> str | None:
    """A parsed record's value as the text a JSON Lines file would hold."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    return str(value)


def _record_batches(
    records: Iterable[tuple[str, Mapping[str, Any] | str]],
    rejected: Rejections,
    *,
    label: str,
    local: Path,
) -> list[pa.RecordBatch]:
    """Parsed usage records as Arrow batches of :data:`_STAGED_SCHEMA`
    (``_where`` naming ``label``, not the local copy); refusals counted in
    ``rejected``."""
    copy = str(local)
    batches: list[pa.RecordBatch] = []
    columns: dict[str, list[str | None]] = {c: [] for c in _STAGED_SCHEMA.names}

    def flush() -> None:
        if columns["_where"]:
            batches.append(pa.RecordBatch.from_pydict(columns, schema=_STAGED_SCHEMA))
            for values in columns.values():
                values.clear()

    for where, record in records:
        where = where.replace(copy, label, 1)
        if isinstance(record, str):
            rejected.reject(where, record)
            continue
        for column in USAGE_COLUMNS:
            columns[column].append(_text(record.get(column)))
        columns["_where"].append(where)
        if len(columns["_where"]) >= _BATCH_ROWS:
            flush()
    flush()
    return batches


def read_usage_counted(
    spark: SparkSession,
    paths: Sequence[DataPath],
    *,
    fmt: UsageFormat = UsageFormat.auto,
    labels: LabelMap | None = None,
    cluster: str | None = None,
    broker: str | None = None,
    known: Sequence[str] | None = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limits: Limits = LIMITS["usage"],
) -> tuple[DataFrame, Rejections, int]:
    """The usable usage rows with ``since <= timestamp < until`` as a
    DataFrame (USAGE_SCHEMA), what was rejected, and how many rows are usable
    (counted in the same pass as the rejections: one scan of the input).

    ``paths`` are local paths or Hadoop URIs (``file:///``, ``hdfs://``,
    ``s3a://``; a URI directory is listed by Spark, recursively). Generic
    files (Parquet, CSV, JSON Lines) are read by Spark in parallel, where
    they are. Prometheus and JmxTool files are parsed on the driver (a URI's
    text fetched through Spark first) and handed to Spark as Arrow batches,
    so the same code runs in local mode, on a cluster and over Spark Connect.
    Every row is checked once (rows of clusters not in ``known`` are rejected
    too); the checked rows are counted by reason in one pass, and the first
    rejected ones named by file and row. The returned DataFrame is cached when
    any input is text (unpersist it when done); Parquet alone is read again by
    each action.

    Raises:
        AnalyticsError: a path that does not exist or holds no usage file, a
            generic file without the usage columns.
    """
    rejected = Rejections()
    frames: list[DataFrame] = []
    bad: list[DataFrame] = []
    generic: dict[str, list[str]] = {"parquet": [], "csv": [], "json": []}
    parsed: list[pa.RecordBatch] = []
    for where, kind, local in _usage_inputs(spark, paths, fmt, rejected, limits):
        rejected.read_file(where, kind.value)
        if kind in (UsageFormat.prometheus, UsageFormat.jmxtool):
            with _local_copy(spark, where, local) as path:
                records = (
                    prometheus_rows(path, labels or LabelMap(), rejected)
                    if kind is UsageFormat.prometheus
                    else jmxtool_rows(path, cluster=cluster, broker=broker, skipped=rejected)
                )
                parsed += _record_batches(records, rejected, label=str(where), local=path)
        elif name_of(where).endswith(".parquet"):
            generic["parquet"].append(str(where))
        elif name_of(where).endswith(".csv"):
            generic["csv"].append(str(where))
        else:
            generic["json"].append(str(where))
    if parsed:
        table = pa.Table.from_batches(parsed, schema=_STAGED_SCHEMA)
        frames.append(spark.createDataFrame(table))
    row_id = F.concat(F.input_file_name(), F.lit(" row "), F.monotonically_increasing_id())
    if generic["parquet"]:
        frame = _with_columns(
            spark.read.parquet(*generic["parquet"]), ", ".join(generic["parquet"])
        )
        frames.append(frame.select(*USAGE_COLUMNS).withColumn("_where", row_id))
    if generic["csv"]:
        frame = spark.read.option("header", True).option("mode", "PERMISSIVE").csv(generic["csv"])
        frames.append(
            _with_columns(frame, ", ".join(generic["csv"]))
            .select(*USAGE_COLUMNS)
            .withColumn("_where", row_id)
        )
    if generic["json"]:
        frame = (
            spark.read.option("allowNonNumericNumbers", True)
            .option("mode", "PERMISSIVE")
            .option("primitivesAsString", True)
            .json(generic["json"])
        )
        if "_corrupt_record" in frame.columns:
            corrupt = frame.where(F.col("_corrupt_record").isNotNull())
            bad.append(
                corrupt.select(row_id.alias("_where"), F.lit("line: not JSON").alias("_reason"))
            )
            frame = frame.where(F.col("_corrupt_record").isNull())
        if "_where" not in frame.columns:
            frame = frame.withColumn("_where", row_id)
        for column in USAGE_COLUMNS:
            if column not in frame.columns:
                frame = frame.withColumn(column, F.lit(None).cast("string"))
        frames.append(frame.select(*USAGE_COLUMNS, "_where"))
    if not frames:
        return spark.createDataFrame([], USAGE_SCHEMA), rejected, 0

    def check_all(with_where: bool) -> DataFrame:
        parts = [_checked(f, F.col("_where"), known) for f in frames]
        merged = parts[0]
        for part in parts[1:]:
            merged = merged.unionByName(part)
        return merged if with_where else merged.drop("_where")

    # Text (CSV, JSON Lines, staged Prometheus/JmxTool) is parsed once: the
    # checked rows are cached, without their file/row label (a string per
    # row). Parquet alone is scanned again instead: building the in-memory
    # cache of 10M rows took 13 s, a scan and check of them 2 s
    # (benchmarks/README.md). The first rejected rows are found again,
    # labelled, only if any.
    checked = check_all(False)
    if generic["csv"] or generic["json"] or parsed:
        checked = checked.cache()
    window = F.lit(True)
    if since is not None:
        window = window & (F.col("timestamp") >= F.lit(since))
    if until is not None:
        window = window & (F.col("timestamp") < F.lit(until))
    counts = (
        checked.groupBy(F.split("_reason", ":")[0].alias("kind"))
        .agg(F.count("*").alias("count"), F.count(F.when(window, 1)).alias("in_range"))
        .collect()
    )
    usable = 0
    for row in counts:
        if row["kind"] is not None:
            rejected.count += int(row["count"])
            rejected.by_reason[str(row["kind"])] += int(row["count"])
        else:
            usable = int(row["in_range"])
    failed_parts = [f for f in bad]
    if rejected.count:
        failed_parts.insert(
            0, check_all(True).where(F.col("_reason").isNotNull()).select("_where", "_reason")
        )
    for extra in bad:
        for row in extra.groupBy(F.split("_reason", ":")[0].alias("kind")).count().collect():
            rejected.count += int(row["count"])
            rejected.by_reason[str(row["kind"])] += int(row["count"])
    for part in failed_parts:
        for row in part.limit(EXAMPLES_KEPT).collect():
            if len(rejected.examples) < EXAMPLES_KEPT:
                rejected.examples.append(f"{row['_where']}: {row['_reason']}")
    usage = in_range(checked.where(F.col("_reason").isNull()).select(*USAGE_COLUMNS), since, until)
    usage, duplicates = _one_of_each(usage)
    rejected.duplicates += duplicates
    return usage, rejected, usable - duplicates


#: What identifies a usage row: one row per series and time (``schemas/usage.schema.json``).
_ROW_KEY = tuple(c for c in USAGE_COLUMNS if c != "value")


def _one_of_each(usage: DataFrame) -> tuple[DataFrame, int]:
    """One row per (series, timestamp), and how many rows repeated one: the
    largest value is kept (NaN only when every value is NaN), as the local
    engine keeps it."""
    repeated = (
        usage.groupBy(*_ROW_KEY)
        .count()
        .where(F.col("count") > 1)
        .agg(F.sum(F.col("count") - 1).alias("extra"))
        .first()
    )
    extra = int(repeated["extra"] or 0) if repeated is not None else 0
    if not extra:
        return usage, 0
    number = F.when(~F.isnan("value"), F.col("value"))
    kept = usage.groupBy(*_ROW_KEY).agg(F.coalesce(F.max(number), F.first("value")).alias("value"))
    return kept.select(*USAGE_COLUMNS), extra


def write_table(frame: DataFrame, path: DataPath) -> None:
    """Write ``frame`` as Parquet at ``path`` (a local path or a Hadoop URI; a
    directory of part files, one per partition: the computation stays
    parallel), replacing what is there."""
    if isinstance(path, Path) and path.exists():
        shutil.rmtree(path) if path.is_dir() else path.unlink()
    frame.write.mode("overwrite").parquet(str(path))


def write_texts(spark: SparkSession, out: str, files: Mapping[str, str]) -> dict[str, str]:
    """Write small text files (the reports) under the URI ``out``; returns
    name -> the URI written.

    Through Hadoop's ``FileSystem`` where the session has a JVM (local mode,
    ``--master``, spark-submit): ``out/report.md`` is one file, as locally.
    Over Spark Connect the client has no file system of the cluster's, so
    each is written by Spark as a one-part text dataset
    (``out/report.md/part-00000-*.txt``).
    """
    written: dict[str, str] = {}
    jvm = None if _is_connect(spark) else getattr(spark, "_jvm", None)
    for name, text in files.items():
        target = f"{out.rstrip('/')}/{name}"
        if jvm is not None:
            hadoop_path = jvm.org.apache.hadoop.fs.Path(target)
            fs = hadoop_path.getFileSystem(spark._jsc.hadoopConfiguration())
            stream = fs.create(hadoop_path, True)
            try:
                stream.write(bytearray(text.encode("utf-8")))
            finally:
                stream.close()
        else:
            one = spark.createDataFrame([(text.rstrip("\n"),)], "value string").coalesce(1)
            one.write.mode("overwrite").option("lineSep", "\n").text(target)
        written[name] = target
    return written


def _is_connect(spark: Any) -> bool:
    """True for a Spark Connect session (no JVM on this side)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def in_range(frame: DataFrame, since: datetime | None, until: datetime | None) -> DataFrame:
    """Rows of ``frame`` with ``since <= timestamp < until``."""
    if since is not None:
        frame = frame.where(F.col("timestamp") >= F.lit(since))
    if until is not None:
        frame = frame.where(F.col("timestamp") < F.lit(until))
    return frame


__all__ += ["in_range", "transforms"]
