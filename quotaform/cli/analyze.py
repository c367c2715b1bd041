"""``quotaform analyze utilisation | impact | recommend | collect``, and
``quotaform snapshot``: the fleet analytics.

Each analysis reads a quota configuration (manifests, ``--snapshot`` files,
a saved ``--plan``, or the live cluster), usage samples (``--usage``: generic
Parquet / CSV / JSON Lines, Prometheus ``query_range`` JSON, or JmxTool CSV),
and writes to ``--out DIR`` the contract table (Parquet), ``summary.json``,
``report.md`` and ``report.html``. Exit codes: 0 written, 1 error.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer

from quotaform.analytics.exporters import metric_of_name
from quotaform.analytics.model import DEFAULT_HEADROOM, DEFAULT_WINDOW_S
from quotaform.analytics.paths import data_path
from quotaform.analytics.remote import SparkTarget, spark_target
from quotaform.analytics.request import AnalyzeRequest, Command, Engine
from quotaform.analytics.sources.base import ReadOptions
from quotaform.analytics.sources.live import LiveOptions
from quotaform.analytics.sources.registry import FORMATS
from quotaform.analytics.usage import LabelMap, note_line
from quotaform.app.analyze import (
    AnalyzeCommandRequest,
    CollectRequest,
    QuotaSnapshotRequest,
    run_analyze,
    run_collect,
    run_quota_snapshot,
)
from quotaform.app.common import ConnectionOptions
from quotaform.cli.options import (
    CONNECTION,
    expands,
    with_connection,
)
from quotaform.cli.output import make_console, say
from quotaform.cli.view import make_view
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.impact import STEADY_RULES
from quotaform.kafka.units import parse_byte_size, parse_quota_value
from quotaform.manifest.models import parse_duration

__all__ = ["analyze_app", "register"]

analyze_app = typer.Typer(
    name="analyze",
    help="Fleet analytics: quotas joined with observed usage (Spark or Python).",
    no_args_is_help=True,
    rich_markup_mode=None,
)

Manifests = Annotated[
    list[Path] | None,
    typer.Argument(
        help="Manifest files or directories: the quota configuration (without them: "
        "--snapshot, or the live cluster).",
        metavar="PATH",
        show_default=False,
    ),
]
Usage = Annotated[
    list[str] | None,
    typer.Option(
        "--usage",
        metavar="PATH",
        help="Usage samples: files or directories (repeatable), local or a Hadoop URI "
        "(file:///, hdfs://, s3a://: read by Spark). Parquet / CSV / JSON Lines "
        "(schemas/usage.schema.json), Prometheus query_range JSON, or JmxTool CSV.",
        show_default=False,
    ),
]
PrometheusUrl = Annotated[
    str | None,
    typer.Option(
        "--prometheus",
        metavar="URL",
        help="Read the usage from a Prometheus-compatible server (Thanos, Mimir, "
        "VictoriaMetrics too): quotaform sends the query_range requests for the quota metrics "
        "of every exporter convention it knows, over --since/--until (default: the last hour). "
        "Credentials: QUOTAFORM_PROMETHEUS_TOKEN_FILE, QUOTAFORM_PROMETHEUS_USERNAME + "
        "QUOTAFORM_PROMETHEUS_PASSWORD_FILE, or --prometheus-config; never in the URL.",
        show_default=False,
    ),
]
Step = Annotated[
    str | None,
    typer.Option(
        "--step",
        metavar="DURATION",
        help="Resolution of --prometheus queries (15s, 1m; default 15s, longer for ranges "
        "over 11,000 steps). Longer ranges are split into requests of at most 11,000 points.",
        show_default=False,
    ),
]
PrometheusConfig = Annotated[
    Path | None,
    typer.Option(
        "--prometheus-config",
        metavar="FILE",
        help="A Prometheus HTTP client configuration file (authorization, basic_auth, "
        "tls_config: what promtool's --http.config.file reads).",
        show_default=False,
    ),
]
PrometheusCa = Annotated[
    Path | None,
    typer.Option(
        "--prometheus-ca-file",
        metavar="FILE",
        help="PEM CA certificate(s) of the Prometheus server's TLS certificate.",
        show_default=False,
    ),
]
PrometheusTimeout = Annotated[
    str | None,
    typer.Option(
        "--prometheus-timeout",
        metavar="DURATION",
        help="The deadline of each --prometheus request, its whole answer included (a server "
        "that stalls or trickles is cut off then), also sent as Prometheus' query timeout "
        "(default 2m).",
        show_default=False,
    ),
]
MaxUsageSize = Annotated[
    str | None,
    typer.Option(
        "--max-usage-size",
        metavar="SIZE",
        help="The largest usage file or --prometheus answer read (default 64GiB a file, 2GiB "
        "an answer): a guard against a wrong path or a runaway answer, not a memory bound "
        "(usage is streamed).",
        show_default=False,
    ),
]
PrometheusMatch = Annotated[
    list[str] | None,
    typer.Option(
        "--prometheus-match",
        metavar="MATCHER",
        help='A PromQL label matcher the queried series must meet (repeatable): job="kafka", '
        'env=~"prod.*".',
        show_default=False,
    ),
]
MetricOption = Annotated[
    str | None,
    typer.Option(
        "--metric",
        metavar="NAME",
        help="The metric of Prometheus series without __name__ (PromQL-derived exports: "
        "avg_over_time, sum by): a usage metric (produce-byte-rate) or an exporter name "
        "(kafka_server_produce_byte_rate).",
        show_default=False,
    ),
]
Out = Annotated[
    str,
    typer.Option(
        "--out",
        metavar="DIR",
        help="Where the tables and reports go: a local directory or a Hadoop URI "
        "(file:///, hdfs://, s3a://: written by Spark).",
    ),
]
Snapshot = Annotated[
    list[Path] | None,
    typer.Option(
        "--snapshot",
        "--quota-snapshot",
        metavar="FILE",
        help="Quota snapshot(s) from `quotaform snapshot` (JSON Lines), one or more clusters "
        "(--quota-snapshot: the same; not storage's volume --snapshots).",
        show_default=False,
    ),
]
EngineOption = Annotated[
    Engine,
    typer.Option(
        "--engine",
        help="spark (PySpark: local[*], --master or --remote), python (the local engine: "
        "Arrow, no JVM), or auto (python below 1 GiB of Parquet usage; spark with a master, "
        "a remote or a URI).",
    ),
]
Master = Annotated[
    str | None,
    typer.Option(
        "--master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (implies --engine spark; default local[*]).",
        show_default=False,
    ),
]
Remote = Annotated[
    str | None,
    typer.Option(
        "--remote",
        metavar="URL",
        help="Spark Connect server, e.g. sc://host:15002 (implies --engine spark; also the "
        "SPARK_REMOTE environment variable). A token goes in SPARK_CONNECT_AUTHENTICATE_TOKEN, "
        "never on the command line.",
        show_default=False,
    ),
]
def _usage_format(text: str) -> str:
    if text not in FORMATS:
        raise typer.BadParameter(f"{text!r}: one of {', '.join(FORMATS)}")
    return text


FormatOption = Annotated[
    str,
    typer.Option(
        "--usage-format",
        metavar="SOURCE",
        parser=_usage_format,
        help=f"The usage files' source: {', '.join(FORMATS)} (auto: detected per file).",
    ),
]
ClusterLabel = Annotated[
    str,
    typer.Option("--cluster-label", metavar="LABEL", help="Prometheus label naming the cluster."),
]
BrokerLabel = Annotated[
    str,
    typer.Option("--broker-label", metavar="LABEL", help="Prometheus label naming the broker."),
]
DefaultCluster = Annotated[
    str | None,
    typer.Option(
        "--default-cluster",
        metavar="NAME",
        help="Cluster of usage series without the cluster label; also the cluster of "
        "JmxTool files.",
        show_default=False,
    ),
]
JmxBroker = Annotated[
    str | None,
    typer.Option("--broker", metavar="ID", help="The broker of JmxTool files.", show_default=False),
]
#: What --since and --until accept, as the error says it.
TIME_FORMS = "2026-11-24, 2026-11-24T10:00, 2026-11-24T10:00:00Z, or a duration ago: 24h, 7d"


def parse_time(text: str) -> datetime:
    """A time of ``--since`` / ``--until``: an ISO-8601 date or date and time
    (UTC unless it names an offset), or a duration meaning that long ago.

    Raises:
        typer.BadParameter: anything else, naming the accepted forms.
    """
    try:
        return datetime.now(UTC) - timedelta(seconds=parse_duration(text))
    except ValueError:
        pass
    try:
        when = datetime.fromisoformat(text.strip().replace("z", "Z"))
    except ValueError:
        raise typer.BadParameter(f"{text!r} is not a time: give {TIME_FORMS}") from None
    return when if when.tzinfo else when.replace(tzinfo=UTC)


def _duration(text: str | float) -> float:
    """Seconds of a duration option (``30s``, ``5m``, ``1h``, ``30``; ``0``:
    once)."""
    if isinstance(text, (int, float)):  # the default
        return float(text)
    if text.strip() in ("0", "0s"):
        return 0.0
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


#: The shortest --interval of collect (one JmxTool run takes 0.2-0.6 s).
MIN_INTERVAL_S = 0.2


def _interval(text: str | float) -> float:
    seconds = _duration(text)
    if seconds < MIN_INTERVAL_S:
        raise typer.BadParameter(f"{seconds:g}s is too short: at least {MIN_INTERVAL_S:g}s")
    return seconds


def _align(text: str | float) -> float:
    seconds = _duration(text)
    if seconds <= 0:
        raise typer.BadParameter(f"{text!r}: give a positive duration (11s, 1m)")
    return seconds


Align = Annotated[
    float | None,
    typer.Option(
        "--align",
        metavar="DURATION",
        parser=_align,
        help="Quotas are enforced per broker; a group's usage is also summed across brokers "
        "(the cluster_* columns) after aligning each broker's samples on buckets this long: "
        f"{DEFAULT_WINDOW_S:g}s (the quota window) by default, or --prometheus's --step when "
        "shorter; at least the sampling interval when brokers are sampled at different "
        "times (JmxTool, analyze collect).",
        show_default=f"{DEFAULT_WINDOW_S:g}s",
    ),
]
Since = Annotated[
    datetime | None,
    typer.Option(
        "--since",
        metavar="TIME",
        parser=parse_time,
        help=f"Only usage at or after this time (UTC): {TIME_FORMS}.",
        show_default=False,
    ),
]
Until = Annotated[
    datetime | None,
    typer.Option(
        "--until",
        metavar="TIME",
        parser=parse_time,
        help=f"Only usage before this time (UTC): {TIME_FORMS}.",
        show_default=False,
    ),
]


def _request(
    usage: Usage = None,
    prometheus: PrometheusUrl = None,
    step: Step = None,
    prometheus_config: PrometheusConfig = None,
    prometheus_ca_file: PrometheusCa = None,
    prometheus_match: PrometheusMatch = None,
    prometheus_timeout: PrometheusTimeout = None,
    max_usage_size: MaxUsageSize = None,
    metric: MetricOption = None,
    engine: EngineOption = Engine.auto,
    master: Master = None,
    remote: Remote = None,
    usage_format: FormatOption = "auto",
    cluster_label: ClusterLabel = "cluster",
    broker_label: BrokerLabel = "instance",
    default_cluster: DefaultCluster = None,
    broker: JmxBroker = None,
    since: Since = None,
    until: Until = None,
) -> AnalyzeRequest:
    """The usage and engine options as the run's one request (the command's
    own options are added by :func:`_run`)."""
    if engine is Engine.python and remote is None:
        where = SparkTarget(master=master)  # SPARK_REMOTE is for Spark runs only
    else:
        where = spark_target(master=master, remote=remote, environ=os.environ)
    if metric is not None and metric_of_name(metric) is None:
        raise typer.BadParameter(
            f"{metric!r}: not a usage metric (produce-byte-rate, ...) nor an exporter name "
            "such as kafka_server_produce_byte_rate",
            param_hint="--metric",
        )
    if step is not None and prometheus is None:
        raise typer.BadParameter(
            "the resolution of --prometheus queries: give both", param_hint="--step"
        )
    max_bytes = _size(max_usage_size, "--max-usage-size")
    live = None
    if prometheus is not None:
        live = LiveOptions(
            prometheus,
            step_s=_duration(step) if step is not None else None,
            config=prometheus_config,
            ca_file=prometheus_ca_file,
            match=tuple(prometheus_match or ()),
            timeout_s=_duration(prometheus_timeout) if prometheus_timeout is not None else None,
            max_bytes=max_bytes,
        )
    read = ReadOptions(
        labels=LabelMap(
            cluster_label,
            broker_label,
            default_cluster,
            metric=metric_of_name(metric) if metric else None,
        ),
        cluster=default_cluster,
        broker=broker,
        limits=LIMITS["usage"].with_max_bytes(max_bytes),
    )
    return AnalyzeRequest(
        Command.utilisation,
        out=Path(),
        usage=tuple(data_path(p) for p in usage or ()),
        usage_format=usage_format,
        read=read,
        prometheus=live,
        since=since,
        until=until,
        engine=engine,
        master=where.master,
        remote=where.remote,
    )


def _size(text: str | None, option: str) -> int | None:
    """Bytes of a size option (``64GiB``), ``None`` when not given."""
    if text is None:
        return None
    try:
        return parse_byte_size(text)
    except ValueError as exc:
        raise typer.BadParameter(str(exc), param_hint=option) from None


#: What every analysis takes as one :class:`AnalyzeRequest`: the usage, how
#: to read it, and the engine (the command's own options added by ``_run``).
REQUEST = AnalyzeRequest(Command.utilisation, Path())
with_request = expands("request", _request)


#: Time-unit words: a manifest path spelled so that does not exist is the
#: second half of a duration the shell split (``--since 5 minutes``).
_UNIT_WORDS = frozenset(
    {
        *("ms", "s", "sec", "secs", "second", "seconds", "m", "min", "mins", "minute", "minutes"),
        *("h", "hr", "hrs", "hour", "hours", "d", "day", "days", "w", "week", "weeks"),
    }
)


def _check_split_durations(manifests: list[Path] | None) -> None:
    """Refuse a manifest path that is a time unit left by a duration written
    with a space (``--since 5 minutes``: ``minutes`` would be read as a
    missing manifest file).

    Raises:
        typer.BadParameter: naming how durations are written.
    """
    for path in manifests or ():
        if str(path).lower() in _UNIT_WORDS and not path.exists():
            raise typer.BadParameter(
                f"{str(path)!r} is not a manifest file: a duration is written in one "
                "word, without a space (5m, 2h, 7d; --since 5m, not --since 5 minutes)",
                param_hint="PATH",
            )


def _run(
    command: Command,
    request: AnalyzeRequest,
    out: str,
    manifests: list[Path] | None,
    snapshots: list[Path] | None,
    connection: ConnectionOptions,
    plan_file: Path | None = None,
    write_into: Path | None = None,
    **options: Any,
) -> None:
    """Run one analysis (``options``: the command's own fields of
    :class:`AnalyzeRequest`) and say what it wrote (rejected rows as a
    warning)."""
    _check_split_durations(manifests)
    run = run_analyze(
        AnalyzeCommandRequest(
            replace(request, command=command, out=data_path(out), **options),
            manifests=tuple(manifests or ()),
            snapshots=tuple(snapshots or ()),
            plan_file=plan_file,
            write_into=write_into,
            connection=connection,
            view=make_view(info_style="dim"),
        )
    )
    result, paths = run.result, run.reports
    err = make_console(stderr=True)
    if result.rejected.count:
        say(
            err,
            f"{result.rejected.count:,} usage row(s) could not be used (see {paths['summary']}); "
            f"first: {result.rejected.examples[0] if result.rejected.examples else ''}",
            style="yellow",
            prefix="Warning: ",
        )
    for note, count in result.rejected.notes.items():
        say(err, note_line(note, count), style="dim", prefix="Note: ")
    if result.rejected.duplicates:
        say(
            err,
            f"{result.rejected.duplicates:,} usage row(s) repeated a (series, time) already "
            "read: counted once",
            style="dim",
            prefix="Note: ",
        )
    console = make_console()
    say(console, f"{command.value}: {result.rows:,} rows -> {result.table}")
    say(console, f"reports: {paths['markdown']}, {paths['html']}, {paths['summary']}")
    if run.added is not None and run.updated is not None:
        added = len(run.added)
        say(
            console,
            f"Wrote the recommendations: {added} entit{'y' if added == 1 else 'ies'} "
            f"added to {write_into}, {len(run.updated)} updated. Review them with "
            "quotaform plan.",
        )


#: The byte-rate keys a bare ``--request-bytes SIZE`` sets.
_BYTE_KEYS = ("producer_byte_rate", "consumer_byte_rate")
RequestBytes = Annotated[
    list[str] | None,
    typer.Option(
        "--request-bytes",
        metavar="[KEY=]SIZE",
        help="S, one request's size for the steady-state throttle (S / T): KEY=SIZE per "
        "quota key (repeatable; 64KiB for byte rates), or SIZE for both byte rates. "
        "Defaults: producer_byte_rate 16KiB (batch.size of the Java and kafka-python "
        "producers), consumer_byte_rate 1MiB (max.partition.fetch.bytes; at most the "
        "broker's fetch cap T x (quota.window.num - 1) x quota.window.size.seconds), "
        "controller_mutation_rate 1 (a one-partition topic), connection_creation_rate 1, "
        "request_percentage 0.1 (1 ms of thread time, an estimate).",
        show_default=False,
    ),
]


def request_sizes(values: list[str] | None) -> dict[str, float]:
    """``--request-bytes`` values as S per quota key.

    Raises:
        typer.BadParameter: an unknown key or a size that is not a value of the key.
    """
    sizes: dict[str, float] = {}
    for text in values or ():
        key, sep, raw = text.partition("=")
        keys = [key.strip()] if sep else list(_BYTE_KEYS)
        raw = raw if sep else text
        for k in keys:
            if k not in STEADY_RULES:
                raise typer.BadParameter(f"{k!r} is not a quota key", param_hint="--request-bytes")
            try:
                sizes[k] = parse_quota_value(k, raw.strip())
            except ValueError as exc:
                raise typer.BadParameter(str(exc), param_hint="--request-bytes") from exc
    return sizes


@analyze_app.command(
    "utilisation", short_help="Which quota governs each group, and how close it runs."
)
@with_connection
@with_request
def utilisation(
    manifests: Manifests = None,
    request: AnalyzeRequest = REQUEST,
    out: Out = ...,  # type: ignore[assignment]
    snapshot: Snapshot = None,
    align: Align = None,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Which quota governs each observed group, and how close it runs.

    DIR/utilisation.parquet: one row per (cluster, broker, user, client_id,
    ip, quota_key) with quota_value, level, entity, samples, p50, p95, p99,
    max, utilisation_p99, throttled_share, censored; and the group's figures
    over every broker: brokers_observed, cluster_samples, cluster_p50,
    cluster_p95, cluster_p99, cluster_max (usage summed across brokers),
    cluster_ceiling (the quota on each of those brokers), cluster_utilisation_p99.
    """
    _run(
        Command.utilisation,
        request,
        out,
        manifests,
        snapshot,
        connection,
        align_s=align,
    )


@analyze_app.command("impact", short_help="What a change does to the observed groups.")
@with_connection
@with_request
def impact(
    manifests: Manifests = None,
    request: AnalyzeRequest = REQUEST,
    out: Out = ...,  # type: ignore[assignment]
    plan_file: Annotated[
        Path | None,
        typer.Option(
            "--plan",
            metavar="PLANFILE",
            help="A saved plan (quotaform plan --out): its before and after configurations.",
            show_default=False,
        ),
    ] = None,
    snapshot: Snapshot = None,
    window: Annotated[
        float,
        typer.Option(
            "--window",
            metavar="SECONDS",
            help="The brokers' quota window W (quota.window.num x quota.window.size.seconds).",
        ),
    ] = DEFAULT_WINDOW_S,
    request_bytes: RequestBytes = None,
    align: Align = None,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """What a change does to the observed groups: --plan FILE, or manifests
    (the change) against --snapshot / the live cluster (now).

    DIR/impact.parquet: one row per changed (group, key) with quota_before,
    quota_after, level_before, level_after, p99 (the demand O), p50 (the
    typical rate), throughput_after (what the clients measure: p50 while
    O <= T; held, T, or whole fetches of S for consumers, at most p50),
    demand_cut, predicted_throttle_ms (the
    steady-state mean the broker's throttle-time reports: S / T, a consumer's
    refused fetch (k + 1) x S / T - 10.5 s; S from --request-bytes or the
    defaults), first_throttle_ms ((O - T) / T x W);
    brokers_observed, cluster_p99, cluster_ceiling_before and
    cluster_ceiling_after (the quotas on each of those brokers); groups
    newly throttled first.
    """
    _run(
        Command.impact,
        request,
        out,
        manifests,
        snapshot,
        connection,
        plan_file=plan_file,
        window_s=window,
        align_s=align,
        request_sizes=request_sizes(request_bytes),
    )


@analyze_app.command("recommend", short_help="Quotas sized from observed usage.")
@with_connection
@with_request
def recommend(
    manifests: Manifests = None,
    request: AnalyzeRequest = REQUEST,
    out: Out = ...,  # type: ignore[assignment]
    snapshot: Snapshot = None,
    quantile: Annotated[
        str, typer.Option("--quantile", help="The usage quantile to size by: p50, p95, p99 or max.")
    ] = "p99",
    headroom: Annotated[
        float, typer.Option("--headroom", min=1.0, help="Factor over the quantile.")
    ] = DEFAULT_HEADROOM,
    write_into: Annotated[
        Path | None,
        typer.Option(
            "--write-into",
            metavar="FILE",
            help="Write the recommendations as manifest edits into this file of the set "
            "(new entries appended; declared ones updated in their own files; comments kept).",
            show_default=False,
        ),
    ] = None,
    request_bytes: RequestBytes = None,
    align: Align = None,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Quotas sized from observed usage: the quantile x headroom of the
    busiest broker (a quota holds on each broker), rounded up to readable
    units; never below the current quota for a throttled (censored) group,
    and said so. share_over and throttle_at_max_ms say what the
    recommendation would have caused over the observed range;
    recommended_cluster_ceiling what it allows across the group's brokers."""
    _run(
        Command.recommend,
        request,
        out,
        manifests,
        snapshot,
        connection,
        quantile=quantile,
        headroom=headroom,
        request_sizes=request_sizes(request_bytes),
        write_into=write_into,
        align_s=align,
    )


@analyze_app.command("collect", short_help="A broker's quota MBeans into usage (JmxTool).")
def collect(
    jmx_port: Annotated[int, typer.Option("--jmx-port", help="The broker's loopback JMX port.")],
    out: Annotated[
        Path, typer.Option("--out", metavar="FILE", help="Usage JSON Lines to append to.")
    ],
    cluster_name: Annotated[
        str,
        typer.Option("--cluster-name", metavar="NAME", help="The cluster these samples belong to."),
    ],
    broker: Annotated[
        str | None,
        typer.Option(
            "--broker",
            metavar="ID",
            help="The broker's id in the samples (default: its node id, read from the "
            "broker's app-info MBean).",
            show_default=False,
        ),
    ] = None,
    seconds: Annotated[
        float,
        typer.Option(
            "--seconds",
            metavar="DURATION",
            parser=_duration,
            help="How long to collect: 30s, 5m, 1h, or seconds (0: one read).",
            show_default="1m",
        ),
    ] = 60.0,
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            metavar="DURATION",
            parser=_interval,
            help="Time between reads: 5s, 1m, or seconds (at least 0.2s).",
            show_default="5s",
        ),
    ] = 5.0,
) -> None:
    """Read a (sandbox) broker's quota MBeans with Kafka's JmxTool into the
    usage table (JSON Lines), every --interval for --seconds."""
    collected = run_collect(
        CollectRequest(
            jmx_port, out, cluster_name, broker=broker, seconds=seconds, interval_s=interval
        )
    )
    err = make_console(stderr=True)
    if collected.read_broker:
        say(
            err,
            f"the samples are broker {collected.broker!r}: its node id, read from the broker "
            "(--broker ID names it)",
            style="dim",
            prefix="Note: ",
        )
    say(err, f"collected {collected.rows:,} samples into {out}")


@with_connection
def snapshot(
    out: Annotated[Path, typer.Option("--out", metavar="FILE", help="The snapshot (JSON Lines).")],
    cluster_name: Annotated[
        str | None,
        typer.Option(
            "--cluster-name",
            metavar="NAME",
            help="The cluster's name in the snapshot (default: the --cluster name).",
            show_default=False,
        ),
    ] = None,
    connection: ConnectionOptions = CONNECTION,
) -> None:
    """Write the live quotas of every entity as JSON Lines
    (schemas/snapshot.schema.json), for `quotaform analyze --snapshot`."""
    run = run_quota_snapshot(
        QuotaSnapshotRequest(
            out,
            cluster_name=cluster_name,
            connection=connection,
            view=make_view(),
        )
    )
    if str(out) == "-":
        sys.stdout.write(run.text)
    say(
        make_console(stderr=True),
        f"snapshot of {len(run.lines):,} entities of {run.cluster!r} -> {out}",
    )


def register(app: typer.Typer) -> None:
    """Add ``analyze`` and ``snapshot`` to ``app``."""
    app.add_typer(analyze_app, name="analyze")
    app.command("snapshot")(snapshot)
