"""Feed every reader of quotaform hostile inputs, run each through the
commands that read it, each in its own subprocess, and classify the outcome.

Readers: manifests (YAML), saved plan files, the cluster profiles file,
``--command-config`` (Java properties), ``--prometheus-config``, quota
snapshots (``analyze --snapshot``), volume snapshots (``storage status
--snapshots``), usage in every layout (Parquet, CSV, JSON Lines, Prometheus
``query_range`` files, JmxTool CSV; ``analyze utilisation|impact|recommend``
on the Python and the Spark engine) and a live Prometheus misbehaving on
loopback (``analyze --prometheus``; ``tests/hostileserver.py``).

Inputs, per reader where they make sense, the hostile part where the reader
really parses it (a manifest's ``spec.quotas[0].values``, a usage row's
``value``, a Prometheus answer's ``data.result``; and as the whole document):
nesting 1k / 10k / 100k (flow and block YAML, JSON arrays and objects), a
huge scalar (200 MB), a huge number (100,000 digits), many keys (1M), a NUL
byte, invalid UTF-8, a UTF-8 BOM, CRLF line ends, a truncated file, an empty
file, a FIFO, a directory, a symlink loop, and a file rewritten while it is
read (a thread truncating, rewriting and appending to it during the run).

Each case runs as ``python -m quotaform ...`` with stdin closed, in a new
session (the whole process group is killed at the time bound) with
an address-space limit (RLIMIT_AS) of 2 GiB for Python-only commands; the
Spark engine's JVM cannot start under that limit, so ``--engine spark``
cases run without it while the process tree's RSS is polled every 100 ms
and the tree killed above 2 GiB. Peak RSS: the tree's RSS and each
process's VmHWM, polled (see :func:`run_command`). Children run with
``PYTHONFAULTHANDLER=1`` so a crash names its Python frame.

The time bound: 20 s of CPU time (the tree's), or 20 s of wall time when
the case then sits blocked (no CPU for 5 s: a FIFO, a silent server), or
180 s of wall time; CPU time so that other load on the machine does not
turn a slow read into a hang (on an idle machine it is 20 s of wall time).
Spark-engine cases (a pristine one takes about 30 s on two idle cores:
8 s to start the JVM): 90 s of wall time, or twice their control's time.

Outcomes, exactly one per case:

* ``refused``: exit 1 (or another non-zero code) with an ``Error:`` line on
  stderr, no traceback, in time (``names_file``: an Error line names the
  input's basename);
* ``accepted``: the command's success code and the output a correct read
  gives: for benign inputs (BOM, CRLF) the same as the control run on the
  pristine file (``summary.json``'s rows and usage rows for analyze, the
  normalised standard output otherwise); for usage files a hostile row may
  instead be dropped as rejected (usage rows = control's, or one fewer, and
  the same result rows); a file rewritten during the run may read either way;
* ``misread``: the success code, but not the output of a correct read;
* ``crashed``: killed by a signal we did not send (SIGSEGV, SIGABRT);
* ``traceback``: a Python traceback on stderr, or a failure without an
  ``Error:`` line;
* ``over-time``: killed at the time bound;
* ``over-memory``: ``MemoryError`` (or Arrow's, ``bad_alloc``, Java's
  ``OutOfMemoryError``) on stderr, or killed by the RSS watcher.

Each (reader, command) first runs once on the pristine file (the control,
reported apart); a control that fails makes the run exit 2.

Usage::

    .venv/bin/python scripts/hostile_inputs.py [--quick | --ci] [--spark | --no-spark] [--all-spark]
        [--only READER ...] [--bootstrap-server HOST:PORT | --no-broker]
        [--out results.json] [--markdown table.md] [--keep]
        [--quotaform-root DIR] [--list] [--controls-only]

``--ci``: the CI version (see ``CI_PREFIXES``; about 60 processes).
``--quick``: nesting 1k and 100k only, the huge scalar at 20 MB, one command
per reader, no Spark unless ``--spark``. On Spark only ``utilisation`` runs
unless ``--all-spark`` (impact and recommend read usage the same way, and a
Spark case costs about 30 s). Without ``--bootstrap-server`` a
sandbox broker is started (and stopped) for the commands that need one;
``--no-broker`` skips those. ``--quotaform-root DIR`` runs the quotaform of
another checkout (``git worktree``): ``PYTHONPATH=DIR``, imported from there.
All traffic stays on loopback. Exit status: 0 when every case was refused
or accepted, 1 otherwise, 2 when a control failed.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

ROOT = Path(__file__).resolve().parents[1]

GiB = 1 << 30
#: Address-space limit of Python-only commands, and the RSS bound of Spark ones.
MEMORY_LIMIT = 2 * GiB
#: CPU seconds one case may take (a blocked one: wall seconds; see _over_time).
TIME_LIMIT_S = 20.0
#: A case past TIME_LIMIT_S that used less than IDLE_CPU_S of CPU in the last
#: IDLE_S seconds is blocked; none runs longer than WALL_CAP_S.
IDLE_S, IDLE_CPU_S, WALL_CAP_S = 5.0, 0.05, 180.0
#: Seconds one Spark-engine case may take: a pristine one takes about 30 s on
#: two cores (8 s to start the JVM), so 20 s would time out every one.
SPARK_TIME_LIMIT_S = 90.0
#: Seconds a control (the pristine file) may take: python, spark. A Spark
#: case may take twice its control's time when that is longer than 90 s.
CONTROL_LIMIT_S = {False: 60.0, True: 300.0}
POLL_S = 0.1
OUTCOMES = (
    "refused",
    "accepted",
    "misread",
    "crashed",
    "traceback",
    "over-time",
    "over-memory",
)
FAILING = {"misread", "crashed", "traceback", "over-time", "over-memory"}
_MEMORY_MARKERS = (
    "MemoryError",
    "std::bad_alloc",
    "OutOfMemoryError",
    "Cannot allocate memory",
    "out of memory",
    "failed to allocate",
)

# ----------------------------------------------------------------- sizes


@dataclass(frozen=True)
class Sizes:
    depths: tuple[int, ...] = (1_000, 10_000, 100_000)
    scalar: int = 200_000_000
    digits: int = 100_000
    keys: int = 1_000_000
    live_bytes: int = 300_000_000


FULL = Sizes()
QUICK = Sizes(depths=(1_000, 100_000), scalar=20_000_000, live_bytes=300_000_000)


def _k(n: int) -> str:
    return f"{n // 1000}k" if n % 1000 == 0 else str(n)


# ----------------------------------------------------------------- base documents

MANIFEST = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  cluster: hostile
spec:
  scope:
    - shape: user
      prefixes: {user: ["hostile-"]}
  quotas:
    - entity: {user: hostile-a}
      values: {producer_byte_rate: @HOLE@}
"""
MANIFEST_BLOCK = MANIFEST.replace(
    "values: {producer_byte_rate: @HOLE@}", "values:\n        producer_byte_rate:\n          @HOLE@"
)
STORAGE_MANIFEST = MANIFEST.replace("@HOLE@", "20MiB") + (
    "  storagePolicy:\n"
    "    soft: {type: MinFreePercentage, level: 20%}\n"
    "    hard: {type: MinFreeBytes, level: 1GiB}\n"
    "    staleAfter: 1h\n"
)
USAGE_MANIFEST = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata: {cluster: prod-eu}
spec:
  scope: [{shape: user}, {shape: user+client-id}]
  quotas:
    - entity: {user: alice, client-id: ingest}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: {default: true}}
      values: {producer_byte_rate: 512KiB}
"""
SNAPSHOT_LINES = [
    {
        "entity": {"user": "alice", "client-id": "ingest"},
        "quotas": {"producer_byte_rate": 524288.0},
    },
    {"entity": {"user": None}, "quotas": {"producer_byte_rate": 524288.0}},
]
SINCE, UNTIL = "2026-11-23T10:00:00Z", "2026-11-23T11:00:00Z"
T0 = 1795428000  # SINCE as unix seconds
SAMPLES = 12
HOLE = b"@HOLE@"


def _snapshot_line(entry: dict[str, Any]) -> str:
    return json.dumps({"format_version": 1, "cluster": "prod-eu", "taken_at": SINCE, **entry})


def _iso(i: int) -> str:
    return datetime.fromtimestamp(T0 + 30 * i, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _usage_rows() -> list[dict[str, Any]]:
    return [
        {
            "cluster": "prod-eu",
            "broker": "1",
            "timestamp": _iso(i),
            "metric": "produce-byte-rate",
            "user": "alice",
            "client_id": "ingest",
            "ip": None,
            "value": 900000.0 + 1000 * i,
        }
        for i in range(SAMPLES)
    ]


def usage_jsonl(value: str = "950000.0") -> str:
    hole = {**_usage_rows()[0], "timestamp": _iso(SAMPLES), "value": 0}
    last = json.dumps(hole).replace('"value": 0', f'"value": {value}')
    return "".join(json.dumps(r) + "\n" for r in _usage_rows()) + last + "\n"


def _usage_csv(header_tail: str, value: str) -> str:
    lines = ["cluster,broker,timestamp,metric,user,client_id,ip,value" + header_tail]
    lines += [
        f"prod-eu,1,{r['timestamp']},produce-byte-rate,alice,ingest,,{r['value']}"
        for r in _usage_rows()
    ]
    lines.append(f"prod-eu,1,{_iso(SAMPLES)},produce-byte-rate,alice,ingest,,{value}")
    return "\n".join(lines) + "\n"


_MBEAN = '"kafka.server:type=Produce,user=alice,client-id=ingest:byte-rate"'


def _jmxtool(header_tail: str, value: str) -> str:
    lines = ['"time",' + _MBEAN + header_tail]
    lines += [f"{r['timestamp'][:-1]},{r['value']}" for r in _usage_rows()]
    lines.append(f"{_iso(SAMPLES)[:-1]},{value}")
    return "\n".join(lines) + "\n"


def _prometheus(value: str) -> str:
    samples = [f'[{T0 + 30 * i}, "{900000.0 + 1000 * i}"]' for i in range(SAMPLES)]
    samples.append(f"[{T0 + 30 * SAMPLES}, {value}]")
    return (
        '{"status": "success", "data": {"resultType": "matrix", "result": [{"metric": '
        '{"__name__": "kafka_server_produce_byte_rate", "user": "alice", "client_id": '
        '"ingest", "instance": "1", "cluster": "prod-eu"}, "values": ['
        + ", ".join(samples)
        + "]}]}}\n"
    )


def _volume_snapshot(broker_id: str) -> str:
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f'{{"brokerId": "{broker_id}", "snapshotAt": "{now}", '
        '"softLimit": {"type": "MinFreePercentage", "level": 20}, '
        '"hardLimit": {"type": "MinFreeBytes", "level": 1073741824}, '
        '"volumes": [{"volumeName": "/var/lib/kafka/data", "capacity": @HOLE@, '
        '"consumed": 10737418240}]}\n'
    )


# ----------------------------------------------------------------- the run's context


@dataclass
class Ctx:
    """What the case writers and command lines need."""

    tmp: Path
    root: Path
    sizes: Sizes
    bootstrap: str = "127.0.0.1:9"  # nothing listens: broker cases are skipped then
    broker_id: str = "1"
    prom_url: str = "http://127.0.0.1:9"
    plan_text: str = ""
    files: dict[str, Path] = field(default_factory=dict)


# ----------------------------------------------------------------- readers and commands


@dataclass(frozen=True)
class Command:
    """One command line reading the file: words, with ``{file}`` and the
    other fields of :func:`_fields` filled in."""

    line: str
    broker: bool = False
    quick: bool = False  # run by --quick
    ok_codes: tuple[int, ...] = (0,)
    resets: bool = False  # wipe the hostile-* quotas first (the output depends on them)

    @property
    def argv(self) -> tuple[str, ...]:
        return tuple(self.line.split())

    @property
    def engine(self) -> str | None:
        """python | spark for analyze."""
        words = self.argv
        return words[words.index("--engine") + 1] if "--engine" in words else None

    @property
    def analyze(self) -> bool:
        return self.argv[0] == "analyze"

    def label(self) -> str:
        return "quotaform " + self.line


@dataclass(frozen=True)
class Reader:
    """A reader: its file name, layout (``dialect``), where the hostile part
    goes (``templates``: placement -> (text with @HOLE@, the benign hole)),
    and the commands that read it."""

    name: str
    filename: str
    dialect: str  # yaml, json, jsonl, props, csv, jmx, parquet, live
    templates: Callable[[Ctx], dict[str, tuple[bytes, bytes]]]
    commands: tuple[Command, ...]
    rows_tolerant: bool = False  # usage: a hostile row may be rejected and the run go on


def _t(text: str, benign: str) -> tuple[bytes, bytes]:
    return text.encode(), benign.encode()


_RANGE = f"--since {SINCE} --until {UNTIL}"


def _usage_commands(extra: str = "") -> tuple[Command, ...]:
    """utilisation, impact and recommend on both engines (utilisation: --quick)."""
    return tuple(
        Command(
            f"analyze {sub} {{usage_manifest}}{' --snapshot {snapshot}' if sub == 'impact' else ''}"
            f" --usage {{file}}{extra} --out {{out}} --engine {engine}",
            quick=sub == "utilisation",
        )
        for engine in ("python", "spark")
        for sub in ("utilisation", "impact", "recommend")
    )


_B = "--bootstrap-server {bootstrap}"

READERS: tuple[Reader, ...] = (
    Reader(
        "manifests",
        "quotas.yaml",
        "yaml",
        lambda c: {
            "value": _t(MANIFEST, "1MiB"),
            "value-block": _t(MANIFEST_BLOCK, "1MiB"),
            "top": _t("@HOLE@\n", MANIFEST.replace("@HOLE@", "1MiB")),
        },
        (
            Command("validate {file}", quick=True),
            Command("explain {file} --user hostile-a"),
            Command(f"plan {{file}} {_B}", broker=True, resets=True),
            Command(f"apply {{file}} {_B} --auto-approve", broker=True, resets=True),
            Command(f"drift {{file}} {_B}", broker=True, ok_codes=(0, 2), resets=True),
            Command(f"import {{file}} --into {{file}} {_B}", broker=True, resets=True),
        ),
    ),
    Reader(
        "plan-file",
        "plan.json",
        "json",
        lambda c: {"value": _plan_hole(c.plan_text), "top": _t("@HOLE@\n", c.plan_text)},
        (
            Command("show {file}", quick=True),
            Command("explain --plan {file} --user hostile-a"),
            Command(f"apply {{file}} {_B}", broker=True, resets=True),
        ),
    ),
    Reader(
        "profiles",
        "clusters.yaml",
        "yaml",
        lambda c: {
            "value": _t("clusters:\n  hostile:\n    bootstrapServers: @HOLE@\n", c.bootstrap),
            "value-block": _t(
                "clusters:\n  hostile:\n    bootstrapServers:\n      @HOLE@\n", c.bootstrap
            ),
            "top": _t("@HOLE@\n", f"clusters:\n  hostile:\n    bootstrapServers: {c.bootstrap}\n"),
        },
        (
            Command(
                "plan {manifest} --cluster hostile --config {file}",
                broker=True,
                quick=True,
                resets=True,
            ),
            Command(
                "describe --cluster hostile --config {file} --user hostile-a",
                broker=True,
                resets=True,
            ),
        ),
    ),
    Reader(
        "command-config",
        "client.properties",
        "props",
        lambda c: {
            "value": _t("security.protocol=PLAINTEXT\nclient.id=@HOLE@\n", "quotaform-hostile"),
            "top": _t("@HOLE@\n", "security.protocol=PLAINTEXT\n"),
        },
        (
            Command(
                f"plan {{manifest}} {_B} --command-config {{file}}",
                broker=True,
                quick=True,
                resets=True,
            ),
            Command(
                f"describe {_B} --command-config {{file}} --user hostile-a",
                broker=True,
                resets=True,
            ),
        ),
    ),
    Reader(
        "prometheus-config",
        "http.yml",
        "yaml",
        lambda c: {
            "value": _t("tls_config:\n  server_name: @HOLE@\n", "localhost"),
            "value-block": _t("tls_config:\n  server_name:\n    @HOLE@\n", "localhost"),
            "top": _t("@HOLE@\n", "tls_config:\n  server_name: localhost\n"),
        },
        (
            Command(
                "analyze utilisation {usage_manifest} --prometheus {prom} --prometheus-config "
                f"{{file}} {_RANGE} --out {{out}} --engine python",
                quick=True,
            ),
        ),
    ),
    Reader(
        "quota-snapshot",
        "snapshot.jsonl",
        "jsonl",
        lambda c: {
            "value": _t(
                "".join(_snapshot_line(e) + "\n" for e in SNAPSHOT_LINES)
                + _snapshot_line(
                    {"entity": {"user": "bob"}, "quotas": {"producer_byte_rate": 0}}
                ).replace('"producer_byte_rate": 0', '"producer_byte_rate": @HOLE@')
                + "\n",
                "1048576.0",
            ),
            "top": _t(
                "".join(_snapshot_line(e) + "\n" for e in SNAPSHOT_LINES) + "@HOLE@\n",
                _snapshot_line({"entity": {"user": "bob"}, "quotas": {"producer_byte_rate": 1.0}}),
            ),
        },
        tuple(
            Command(
                f"analyze {sub} --snapshot {{file}} --usage {{usage}} --out {{out}}"
                " --engine python",
                quick=sub == "utilisation",
            )
            for sub in ("utilisation", "recommend")
        ),
    ),
    Reader(
        "volume-snapshot",
        "volumes.json",
        "json",
        lambda c: {
            "value": _t(_volume_snapshot(c.broker_id), "107374182400"),
            "top": _t("@HOLE@\n", _volume_snapshot(c.broker_id).replace("@HOLE@", "107374182400")),
        },
        (
            Command("storage status {storage_manifest} --snapshots {file}", quick=True),
            Command(f"storage status {{storage_manifest}} --snapshots {{file}} {_B}", broker=True),
        ),
    ),
    Reader(
        "usage-jsonl",
        "usage.jsonl",
        "jsonl",
        lambda c: {
            "value": _t(usage_jsonl("@HOLE@"), "950000.0"),
            "top": _t(
                usage_jsonl().rsplit("\n", 2)[0] + "\n@HOLE@\n", usage_jsonl().splitlines()[-1]
            ),
        },
        _usage_commands(),
        rows_tolerant=True,
    ),
    Reader(
        "usage-csv",
        "usage.csv",
        "csv",
        lambda c: {
            "value": _t(_usage_csv("", "@HOLE@"), "950000.0"),
            "header": _t(_usage_csv("@HOLE@", "950000.0"), ""),
        },
        _usage_commands(),
        rows_tolerant=True,
    ),
    Reader(
        "usage-prometheus",
        "prometheus.json",
        "json",
        lambda c: {
            "value": _t(_prometheus("@HOLE@"), '"950000"'),
            "top": _t("@HOLE@\n", _prometheus('"950000"')),
        },
        _usage_commands(),
        rows_tolerant=True,
    ),
    Reader(
        "usage-jmxtool",
        "jmxtool.csv",
        "jmx",
        lambda c: {
            "value": _t(_jmxtool("", "@HOLE@"), "950000.0"),
            "header": _t(_jmxtool("@HOLE@", "950000.0"), ""),
        },
        _usage_commands(" --default-cluster prod-eu --broker 1"),
        rows_tolerant=True,
    ),
    Reader(
        "usage-parquet",
        "usage.parquet",
        "parquet",
        lambda c: {"value": (b"", b"950000.0")},
        _usage_commands(),
        rows_tolerant=True,
    ),
    Reader(
        "prometheus-live",
        "(server)",
        "live",
        lambda c: {},
        (
            # Each case is bounded at 20 s: the deadline of a request is 5 s
            # and an answer at most 64 MiB here (defaults 2m and 2 GiB, for a
            # long range query: a 300 MB answer is 15M samples, read in minutes).
            Command(
                "analyze utilisation {usage_manifest} --prometheus {live} "
                f"{_RANGE} --prometheus-timeout 5s --max-usage-size 64MiB "
                "--out {out} --engine python",
                quick=True,
            ),
        ),
    ),
)


def _plan_hole(plan_text: str) -> tuple[bytes, bytes]:
    """The saved plan with its first ``after`` value of producer_byte_rate as the hole."""
    m = re.search(r'("after": \{\s*"producer_byte_rate": )([0-9.e+]+)', plan_text)
    if m is None:
        raise SystemExit("the base plan file has no producer_byte_rate after value")
    text = plan_text[: m.start(2)] + "@HOLE@" + plan_text[m.end(2) :]
    return text.encode(), m.group(2).encode()


# ----------------------------------------------------------------- payloads
#
# A payload writes the hostile bytes into the hole, streamed (200 MB never
# sits in this process twice).

Payload = Callable[[BinaryIO], None]


def _rep(*parts: tuple[bytes, int]) -> Payload:
    def write(fh: BinaryIO) -> None:
        for chunk, count in parts:
            block = chunk * max(1, min(count, (1 << 20) // max(len(chunk), 1)))
            done = 0
            while done < count:
                n = min(count - done, len(block) // len(chunk))
                fh.write(block[: n * len(chunk)])
                done += n

    return write


def _many(fmt: bytes, count: int, sep: bytes, head: bytes, tail: bytes) -> Payload:
    def write(fh: BinaryIO) -> None:
        fh.write(head)
        for start in range(0, count, 10_000):
            fh.write(sep.join(fmt % i for i in range(start, min(count, start + 10_000))))
            if start + 10_000 < count:
                fh.write(sep)
        fh.write(tail)

    return write


def _bytes(data: bytes) -> Payload:
    def write(fh: BinaryIO) -> None:
        fh.write(data)

    return write


@dataclass(frozen=True)
class Hostile:
    """A hostile hole: ``(name, placement, payload)``."""

    name: str
    placement: str
    payload: Payload


def hostile_holes(dialect: str, sizes: Sizes, placements: set[str]) -> list[Hostile]:
    """The payload cases of a dialect, in every placement it has."""
    out: list[Hostile] = []
    whole = [p for p in ("value", "top") if p in placements]
    for depth in sizes.depths:
        d = _k(depth)
        if dialect == "yaml":
            for where in whole:
                out.append(Hostile(f"nest-flow-seq-{d}", where, _rep((b"[", depth), (b"]", depth))))
                out.append(
                    Hostile(
                        f"nest-flow-map-{d}",
                        where,
                        _rep((b"{a: ", depth), (b"1", 1), (b"}", depth)),
                    )
                )
            block = {"value": "value-block", "top": "top"}
            for where in whole:
                out.append(
                    Hostile(f"nest-block-{d}", block[where], _rep((b"- ", depth), (b"1", 1)))
                )
        elif dialect in ("json", "jsonl"):
            for where in whole:
                out.append(Hostile(f"nest-array-{d}", where, _rep((b"[", depth), (b"]", depth))))
                out.append(
                    Hostile(
                        f"nest-object-{d}",
                        where,
                        _rep((b'{"a":', depth), (b"1", 1), (b"}", depth)),
                    )
                )
    mb = f"{sizes.scalar // 1_000_000}MB"
    digits = f"{_k(sizes.digits)}-digits"
    keys = f"{sizes.keys // 1_000_000}M" if sizes.keys >= 1_000_000 else _k(sizes.keys)
    if dialect in ("json", "jsonl"):
        for where in whole:
            out.append(
                Hostile(
                    f"huge-scalar-{mb}", where, _rep((b'"', 1), (b"x", sizes.scalar), (b'"', 1))
                )
            )
            out.append(Hostile(f"huge-number-{digits}", where, _rep((b"9", sizes.digits))))
            out.append(
                Hostile(f"many-keys-{keys}", where, _many(b'"k%d":1', sizes.keys, b",", b"{", b"}"))
            )
    elif dialect == "yaml":
        for where in whole:
            out.append(Hostile(f"huge-scalar-{mb}", where, _rep((b"x", sizes.scalar))))
            out.append(Hostile(f"huge-number-{digits}", where, _rep((b"9", sizes.digits))))
            out.append(
                Hostile(f"many-keys-{keys}", where, _many(b"k%d: 1", sizes.keys, b", ", b"{", b"}"))
            )
    elif dialect == "props":
        out.append(Hostile(f"huge-scalar-{mb}", "value", _rep((b"x", sizes.scalar))))
        out.append(Hostile(f"huge-number-{digits}", "value", _rep((b"9", sizes.digits))))
        out.append(
            Hostile(f"many-keys-{keys}", "top", _many(b"k%d=1", sizes.keys, b"\n", b"", b""))
        )
    elif dialect in ("csv", "jmx"):
        out.append(Hostile(f"huge-scalar-{mb}", "value", _rep((b"x", sizes.scalar))))
        out.append(Hostile(f"huge-number-{digits}", "value", _rep((b"9", sizes.digits))))
        column = (
            b',"kafka.server:type=Produce,user=u%d,client-id=c:byte-rate"'
            if dialect == "jmx"
            else b",k%d"
        )
        out.append(Hostile(f"many-keys-{keys}", "header", _many(column, sizes.keys, b"", b"", b"")))
    return out


# ----------------------------------------------------------------- Parquet by hand
#
# pyarrow itself crashes writing a 10,000-deep nested column, so deep and
# wide schemas are written as thrift (compact protocol) by hand: a footer
# with the schema and no row group, which is all a reader parses first.


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _zigzag(n: int) -> bytes:
    return _varint((n << 1) ^ (n >> 63))


def _schema_element(name: str, *, children: int | None, leaf_type: int | None) -> bytes:
    out = bytearray()
    last = 0

    def head(fid: int, ctype: int) -> None:
        nonlocal last
        out.append(((fid - last) << 4) | ctype)
        last = fid

    if leaf_type is not None:
        head(1, 5)
        out += _zigzag(leaf_type)
    head(3, 5)
    out += _zigzag(1)  # OPTIONAL
    head(4, 8)
    raw = name.encode()
    out += _varint(len(raw)) + raw
    if children is not None:
        head(5, 5)
        out += _zigzag(children)
    out.append(0)
    return bytes(out)


def _parquet_footer(elements: Iterator[bytes], count: int) -> bytes:
    body = bytearray()
    body.append((1 << 4) | 5)
    body += _zigzag(1)  # version
    body.append((1 << 4) | 9)  # schema: list<struct>
    body.append(0xF0 | 12)
    body += _varint(count)
    for element in elements:
        body += element
    body.append((1 << 4) | 6)
    body += _zigzag(0)  # num_rows
    body.append((1 << 4) | 9)
    body.append((0 << 4) | 12)  # row_groups: empty list<struct>
    body.append(0)
    return b"PAR1" + bytes(body) + len(body).to_bytes(4, "little") + b"PAR1"


def parquet_deep(depth: int) -> bytes:
    """A Parquet file whose one column is nested ``depth`` groups deep."""

    def elements() -> Iterator[bytes]:
        yield _schema_root(1)
        for i in range(depth):
            yield _schema_element(f"n{i}", children=1, leaf_type=None)
        yield _schema_element("leaf", children=None, leaf_type=2)

    return _parquet_footer(elements(), depth + 2)


def parquet_wide(columns: int) -> bytes:
    """A Parquet file with ``columns`` INT64 columns (``k0``, ``k1``, ...) and no row."""

    def elements() -> Iterator[bytes]:
        yield _schema_root(columns)
        for i in range(columns):
            yield _schema_element(f"k{i}", children=None, leaf_type=2)

    return _parquet_footer(elements(), columns + 1)


def _schema_root(children: int) -> bytes:
    raw = b"schema"
    return (
        bytes([(4 << 4) | 8])
        + _varint(len(raw))
        + raw
        + bytes([(1 << 4) | 5])
        + _zigzag(children)
        + b"\x00"
    )


def write_usage_parquet(path: Path, value: str | bytes) -> None:
    """The usage rows as Parquet (value as text), the last row's value ``value``."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = _usage_rows()
    hole = value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else value
    columns = {
        "cluster": [r["cluster"] for r in rows] + ["prod-eu"],
        "broker": [r["broker"] for r in rows] + ["1"],
        "timestamp": [r["timestamp"] for r in rows] + [_iso(SAMPLES)],
        "metric": [r["metric"] for r in rows] + ["produce-byte-rate"],
        "user": [r["user"] for r in rows] + ["alice"],
        "client_id": [r["client_id"] for r in rows] + ["ingest"],
        "ip": pa.array([None] * (len(rows) + 1), pa.string()),
        "value": [str(r["value"]) for r in rows] + [hole],
    }
    pq.write_table(pa.table(columns), path, compression="NONE", use_dictionary=False)
    del columns
    pa.default_memory_pool().release_unused()  # keep this process small: see run_command


# ----------------------------------------------------------------- inputs


@dataclass(frozen=True)
class Input:
    """One hostile (or benign) input of a reader."""

    name: str
    write: Callable[[Reader, Ctx, Path], Path]  # writes into the case dir, returns the path given
    benign: bool = False  # a correct read gives the control's output
    any_ok: bool = False  # either way is right (the file changes while read)
    mutate: bool = False  # rewrite the file during the run
    server: str | None = None  # prometheus-live: the server's answer


def _write_hole(
    reader: Reader, placement: str, payload: Payload | None
) -> Callable[[Reader, Ctx, Path], Path]:
    def write(r: Reader, ctx: Ctx, where: Path) -> Path:
        path = where / r.filename
        template, benign = r.templates(ctx)[placement]
        before, _, after = template.partition(HOLE)
        with path.open("wb") as fh:
            fh.write(before)
            (payload or _bytes(benign))(fh)
            fh.write(after)
        return path

    return write


def _write_good(r: Reader, ctx: Ctx, where: Path) -> Path:
    if r.dialect == "live":
        return _none(r, ctx, where)
    if r.dialect == "parquet":
        path = where / r.filename
        write_usage_parquet(path, "950000.0")
        return path
    return _write_hole(r, "value", None)(r, ctx, where)


def _transform(change: Callable[[bytes], bytes]) -> Callable[[Reader, Ctx, Path], Path]:
    def write(r: Reader, ctx: Ctx, where: Path) -> Path:
        path = _write_good(r, ctx, where)
        path.write_bytes(change(path.read_bytes()))
        return path

    return write


def _in_hole(extra: bytes) -> Callable[[Reader, Ctx, Path], Path]:
    """The benign hole with ``extra`` after its first byte."""

    def write(r: Reader, ctx: Ctx, where: Path) -> Path:
        _, benign = r.templates(ctx)["value"]
        if r.dialect == "parquet":
            path = where / r.filename
            mark = "9\x00" if extra == b"\x00" else "9Z"
            write_usage_parquet(path, mark + benign.decode()[1:])
            if extra != b"\x00":  # patch the marker into invalid UTF-8 (same length)
                path.write_bytes(
                    path.read_bytes().replace(b"9Z" + benign[1:], b"9\xff" + benign[1:])
                )
            return path
        return _write_hole(r, "value", _bytes(benign[:1] + extra + benign[1:]))(r, ctx, where)

    return write


def _truncated(r: Reader, ctx: Ctx, where: Path) -> Path:
    path = where / r.filename
    if r.dialect == "parquet":
        _write_good(r, ctx, where)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
        return path
    template, benign = r.templates(ctx)["value"]
    before = template.partition(HOLE)[0]
    path.write_bytes(before + benign[: max(1, len(benign) // 2)])
    return path


def _empty(r: Reader, ctx: Ctx, where: Path) -> Path:
    path = where / r.filename
    path.write_bytes(b"")
    return path


def _fifo(r: Reader, ctx: Ctx, where: Path) -> Path:
    path = where / r.filename
    os.mkfifo(path)
    return path


def _directory(r: Reader, ctx: Ctx, where: Path) -> Path:
    path = where / r.filename
    path.mkdir()
    return path


def _symlink_loop(r: Reader, ctx: Ctx, where: Path) -> Path:
    path = where / r.filename
    other = where / ("loop-" + r.filename)
    os.symlink(other.name, path)
    os.symlink(path.name, other)
    return path


def _parquet_special(kind: str, n: int) -> Callable[[Reader, Ctx, Path], Path]:
    def write(r: Reader, ctx: Ctx, where: Path) -> Path:
        path = where / r.filename
        path.write_bytes(parquet_deep(n) if kind == "deep" else parquet_wide(n))
        return path

    return write


def _parquet_value(payload: Payload) -> Callable[[Reader, Ctx, Path], Path]:
    def write(r: Reader, ctx: Ctx, where: Path) -> Path:
        import io

        buf = io.BytesIO()
        payload(buf)
        path = where / r.filename
        write_usage_parquet(path, buf.getvalue().decode("ascii"))
        return path

    return write


def inputs_of(reader: Reader, sizes: Sizes, ctx: Ctx) -> list[Input]:
    """Every input of ``reader``: its dialect's payloads, then the common ones."""
    if reader.dialect == "live":
        return [
            Input("deep-100k-json", _none, server="deep"),
            Input(f"answer-{sizes.live_bytes // 1_000_000}MB", _none, server="huge"),
            Input("html-page-status-200", _none, server="html200"),
            Input("body-stops-half-way", _none, server="short"),
            Input("one-byte-per-second", _none, server="slow"),
        ]
    out: list[Input] = []
    if reader.dialect == "parquet":
        for depth in sizes.depths:
            out.append(Input(f"nest-schema-{_k(depth)}", _parquet_special("deep", depth)))
        for h in hostile_holes("json", sizes, {"value"}):
            if h.name.startswith(("huge-scalar", "huge-number")):
                out.append(Input(h.name, _parquet_value(h.payload)))
        keys = f"{sizes.keys // 1_000_000}M"
        out.append(Input(f"many-columns-{keys}", _parquet_special("wide", sizes.keys)))
    else:
        placements = set(reader.templates(ctx))
        for h in hostile_holes(reader.dialect, sizes, placements):
            if h.placement not in placements:
                continue
            name = h.name if h.placement in ("value", "value-block", "header") else f"{h.name}@top"
            out.append(Input(name, _write_hole(reader, h.placement, h.payload)))
    out += [
        Input("nul-byte", _in_hole(b"\x00")),
        Input("invalid-utf8", _in_hole(b"\xff\xfe")),
    ]
    if reader.dialect != "parquet":
        out += [
            Input("utf8-bom", _transform(lambda b: b"\xef\xbb\xbf" + b), benign=True),
            Input("crlf", _transform(lambda b: b.replace(b"\n", b"\r\n")), benign=True),
        ]
    out += [
        Input("truncated", _truncated),
        Input("empty", _empty),
        Input("fifo", _fifo),
        Input("directory", _directory),
        Input("symlink-loop", _symlink_loop),
        Input("changing-while-read", _write_good, any_ok=True, mutate=True),
    ]
    return out


def _none(r: Reader, ctx: Ctx, where: Path) -> Path:
    return where / "(server)"


# ----------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One input of one reader through one command."""

    reader: Reader
    name: str
    write: Callable[[Reader, Ctx, Path], Path]
    command: Command
    input: Input

    @property
    def engine(self) -> str | None:
        return self.command.engine


def selected(args: argparse.Namespace) -> list[tuple[Reader, Command]]:
    """The (reader, command) pairs the options select."""
    out = []
    for reader in READERS:
        if args.only and not any(reader.name.startswith(o) for o in args.only):
            continue
        for command in reader.commands:
            if args.quick and not command.quick:
                continue
            if command.engine == "spark" and not args.spark:
                continue
            if (
                command.engine == "spark"
                and command.argv[1] != "utilisation"
                and not args.all_spark
            ):
                continue  # impact and recommend read usage as utilisation does
            if command.broker and args.no_broker:
                continue
            out.append((reader, command))
    return out


# --ci: per reader, the attacks that took quotaform down before issue 31
# (nesting 100k deep, a 20 MB scalar) and the byte-level ones every reader
# must name (invalid UTF-8, a FIFO); live: a deep answer and a body that
# stops half way. About 60 processes, 1.5-2 min.
CI_PREFIXES = (
    "nest-array-100k",
    "nest-flow-seq-100k",
    "nest-schema-100k",
    "huge-scalar-",
    "invalid-utf8",
    "fifo",
    "deep-100k-json",
    "body-stops-half-way",
)


def build_cases(ctx: Ctx, args: argparse.Namespace) -> list[Case]:
    return [
        Case(reader, item.name, item.write, command, item)
        for reader, command in selected(args)
        for item in inputs_of(reader, ctx.sizes, ctx)
        if not args.ci or (item.name.startswith(CI_PREFIXES) and "@top" not in item.name)
    ]


# ----------------------------------------------------------------- running one case


@dataclass
class Run:
    exit_code: int | None
    signal: str | None
    seconds: float
    cpu_seconds: float
    peak_rss_mib: float
    killed: str | None  # memory, or why it ran over time
    limit_s: float
    stdout: str
    stderr: str
    stderr_bytes: int


def _limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT, MEMORY_LIMIT))


def _tree(pid: int) -> list[Any]:
    import psutil

    try:
        parent = psutil.Process(pid)
        return [parent, *parent.children(recursive=True)]
    except psutil.Error:
        return []


def _sample(procs: list[Any]) -> tuple[int, int]:
    """The tree's summed RSS now, and the largest peak RSS (VmHWM, counted
    from each process's exec) of any process in it, in bytes."""
    import psutil

    total = hwm = 0
    for p in procs:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
        with contextlib.suppress(OSError, ValueError):
            for line in Path(f"/proc/{p.pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    hwm = max(hwm, int(line.split()[1]) * 1024)
    return total, hwm


def _tree_cpu(procs: list[Any]) -> float:
    """CPU seconds (user + system) of the tree's live processes, and of the
    children the root has reaped."""
    import psutil

    total = 0.0
    for i, p in enumerate(procs):
        with contextlib.suppress(psutil.Error):
            t = p.cpu_times()
            total += t.user + t.system + (t.children_user + t.children_system if i == 0 else 0)
    return total


def _over_time(
    wall: float, cpu_seen: list[tuple[float, float]], limit_s: float, *, spark: bool
) -> str | None:
    """Why a run is over time, or ``None``. Spark: wall time above ``limit_s``.
    Python: CPU time above ``limit_s`` (busy), or past ``limit_s`` of wall time
    with no CPU used for :data:`IDLE_S` (blocked: a FIFO, a silent server), or
    :data:`WALL_CAP_S` of wall time. CPU time, not wall time, so that other
    load on the machine does not turn a slow read into a hang."""
    if spark:
        return f"killed after {limit_s:g} s" if wall > limit_s else None
    cpu = cpu_seen[-1][1]
    if cpu > limit_s:
        return f"killed after {limit_s:g} s of CPU time"
    if wall > limit_s:
        before = [c for w, c in cpu_seen if w <= wall - IDLE_S]
        if before and cpu - before[-1] < IDLE_CPU_S:
            return f"killed: blocked (no CPU used for {IDLE_S:g} s) after {wall:.0f} s"
    if wall > WALL_CAP_S:
        return f"killed after {WALL_CAP_S:g} s of wall time ({cpu:.0f} s of CPU)"
    return None


def _kill_tree(pid: int, procs: list[Any]) -> None:
    import psutil

    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(psutil.Error):
            p.kill()


def run_command(
    argv: list[str],
    *,
    env: dict[str, str],
    cwd: Path,
    spark: bool,
    limit_s: float,
    mutate: Callable[[], None] | None,
) -> Run:
    """Run ``argv`` within the bounds (``limit_s`` seconds); ``mutate`` runs
    in a thread meanwhile.

    Peak RSS is sampled (every :data:`POLL_S`): the tree's summed RSS and
    each process's VmHWM. ``wait4``'s ru_maxrss is not used: with a
    ``preexec_fn`` the child is forked, and Linux counts the forked copy of
    this process's memory (before exec) into it."""
    out_path, err_path = cwd / ".stdout", cwd / ".stderr"
    start = time.monotonic()
    with out_path.open("wb") as out, err_path.open("wb") as err:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=err,
            cwd=cwd,
            env=env,
            start_new_session=True,
            preexec_fn=None if spark else _limit_address_space,
        )
    stop = threading.Event()
    mutator = None
    if mutate is not None:
        mutator = threading.Thread(target=_loop_until(stop, mutate), daemon=True)
        mutator.start()
    killed: str | None = None
    peak = 0
    procs: list[Any] = []
    cpu_seen: list[tuple[float, float]] = []  # (wall, tree CPU seconds)
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        procs = _tree(proc.pid) or procs
        rss, hwm = _sample(procs)
        peak = max(peak, rss, hwm)
        wall = time.monotonic() - start
        cpu_seen.append((wall, _tree_cpu(procs)))
        why = None if killed else _over_time(wall, cpu_seen, limit_s, spark=spark)
        if why is not None:
            killed = why
            _kill_tree(proc.pid, procs)
        elif killed is None and spark and rss > MEMORY_LIMIT:
            killed = "memory"
            _kill_tree(proc.pid, procs)
        time.sleep(POLL_S)
    seconds = time.monotonic() - start
    stop.set()
    if mutator is not None:
        mutator.join()
    _kill_tree(proc.pid, procs)  # what the command left behind in its group
    proc.returncode = os.waitstatus_to_exitcode(status)
    code = proc.returncode
    return Run(
        exit_code=code if code >= 0 else None,
        signal=signal.Signals(-code).name if code < 0 else None,
        seconds=round(seconds, 2),
        cpu_seconds=round(usage.ru_utime + usage.ru_stime, 2),
        peak_rss_mib=round(peak / 2**20, 1),
        killed=killed,
        limit_s=limit_s,
        stdout=_head_and_tail(out_path, 100_000),
        stderr=_head_and_tail(err_path),
        stderr_bytes=err_path.stat().st_size,
    )


def _head_and_tail(path: Path, keep: int = 20_000) -> str:
    """The file's first and last ``keep`` bytes (a refusal may quote 200 MB)."""
    with path.open("rb") as fh:
        data = fh.read(2 * keep + 1)
        if len(data) > 2 * keep:
            fh.seek(-keep, os.SEEK_END)
            data = data[:keep] + b"\n[...]\n" + fh.read()
    return data.decode("utf-8", "replace")


def _loop_until(stop: threading.Event, step: Callable[[], None]) -> Callable[[], None]:
    def loop() -> None:
        while not stop.is_set():
            with contextlib.suppress(OSError):
                step()
            time.sleep(0.002)

    return loop


def _mutator(path: Path, good: bytes) -> Callable[[], None]:
    """Each call changes the file: truncated to half, rewritten, appended to, emptied."""
    state = {"i": 0}

    def step() -> None:
        i = state["i"] = state["i"] + 1
        phase = i % 4
        if phase == 0:
            with path.open("r+b") as fh:
                fh.truncate(len(good) // 2)
        elif phase == 1:
            path.write_bytes(good)
        elif phase == 2:
            with path.open("ab") as fh:
                fh.write(b"\x00garbage appended while read\n" * 64)
        else:
            with path.open("r+b") as fh:
                fh.truncate(0)

    return step


# ----------------------------------------------------------------- judging


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("Error:")]


def _summary(out: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return {"rows": data.get("rows"), "usage_rows": data.get("usage_rows")}


def fingerprint(case: Case, run: Run, out: Path, where: Path) -> Any:
    """What a correct read is compared on: analyze's summary figures, or
    the standard output with the case's paths and timings taken out."""
    if case.command.analyze:
        return _summary(out)
    text = run.stdout.replace(str(where), "<dir>")
    text = re.sub(r"\d+(\.\d+)? ?(ms|s)\b", "<t>", text)
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", "<id>", text)
    text = re.sub(r"\d{4}-\d\d-\d\dT[\d:.]+Z?", "<time>", text)
    return " ".join(text.split())  # wrapping follows the path's length


def classify(case: Case, run: Run, got: Any, control: Any) -> tuple[str, str]:
    """The outcome and why (the first line of the error, or the signal)."""
    err = run.stderr
    errors = error_lines(err)
    if run.killed is not None and run.killed != "memory":
        return "over-time", run.killed
    if run.killed == "memory":
        return "over-memory", "process tree RSS above 2 GiB: killed"
    if run.exit_code not in case.command.ok_codes:
        memory = next((m for m in _MEMORY_MARKERS if m in err), None)
        if memory is not None:
            return "over-memory", _line_with(err, memory)
    if run.signal is not None:
        return "crashed", f"{run.signal}: {_faulting_frame(err)}"
    if "Traceback (most recent call last)" in err:
        return "traceback", _exception_line(err)
    if run.exit_code in case.command.ok_codes:
        if case.input.any_ok:
            return "accepted", "exit 0 (the file changed while read: either way is right)"
        if got == control:
            return "accepted", "same output as the control"
        if case.reader.rows_tolerant and not case.input.benign and _one_row_dropped(got, control):
            return "accepted", "the hostile row was rejected, the rest read"
        return "misread", f"exit {run.exit_code}, but output {got!r} != control {control!r}"
    if errors:
        return "refused", errors[0]
    last = err.strip().splitlines()[-1] if err.strip() else "(no stderr)"
    return "traceback", f"exit {run.exit_code} without an Error: line: {last}"


def _one_row_dropped(got: Any, control: Any) -> bool:
    if not isinstance(got, dict) or not isinstance(control, dict):
        return False
    return got["rows"] == control["rows"] and got["usage_rows"] == control["usage_rows"] - 1


def _line_with(text: str, marker: str) -> str:
    return next((line.strip() for line in text.splitlines() if marker in line), marker)[:300]


def _frames(err: str) -> list[str]:
    return [line.strip() for line in err.splitlines() if line.strip().startswith('File "')]


def _exception_line(err: str) -> str:
    """The exception of the last traceback, its innermost frame and the
    innermost frame in quotaform."""
    frames = _frames(err)
    tail = [line for line in err.splitlines() if line.strip()]
    exc = tail[-1] if tail else "(empty)"
    if not frames:
        return exc[:300]
    ours = [f for f in frames if "/quotaform/" in f]
    where = _short_frame(frames[-1])
    if ours and ours[-1] != frames[-1]:
        where += f"; from {_short_frame(ours[-1])}"
    return f"{exc[:240]} (at {where})"


def _faulting_frame(err: str) -> str:
    """faulthandler's frames of the faulting ("Current") thread, most recent
    first: the first, and the first in quotaform."""
    if "Current thread" in err:
        err = err.split("Current thread", 1)[1].split("\nThread 0x", 1)[0]
    frames = _frames(err)
    if not frames:
        return "(no Python frame)"
    ours = [f for f in frames if "/quotaform/" in f]
    where = f"in {_short_frame(frames[0])}"
    if ours and ours[0] != frames[0]:
        where += f"; from {_short_frame(ours[0])}"
    return where


def _short_frame(frame: str) -> str:
    m = re.match(r'File "([^"]+)", line (\d+)(?:,? in (\S+))?', frame)
    if not m:
        return frame[:120]
    path = m.group(1)
    for marker in ("site-packages/", "quotaform/", "lib/python3.11/"):
        if marker in path:
            path = (marker if marker == "quotaform/" else "") + path.split(marker, 1)[1]
            break
    return f"{path}:{m.group(2)}" + (f" {m.group(3)}" if m.group(3) else "")


# ----------------------------------------------------------------- the series


def _env(root: Path) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("QUOTAFORM_", "SPARK_REMOTE", "PYTHONPATH"))
    }
    env.update(PYTHONPATH=str(root), NO_COLOR="1", PYTHONFAULTHANDLER="1", COLUMNS="200")
    return env


def _fields(ctx: Ctx, file: Path, out: Path, live: str) -> dict[str, str]:
    return {
        "file": str(file),
        "out": str(out),
        "manifest": str(ctx.files["manifest"]),
        "usage_manifest": str(ctx.files["usage_manifest"]),
        "storage_manifest": str(ctx.files["storage_manifest"]),
        "snapshot": str(ctx.files["snapshot"]),
        "usage": str(ctx.files["usage"]),
        "bootstrap": ctx.bootstrap,
        "prom": ctx.prom_url,
        "live": live,
    }


def run_case(
    case: Case, ctx: Ctx, where: Path, *, reset: Callable[[], None] | None, limit_s: float
) -> tuple[Run, Path, Any]:
    where.mkdir(parents=True)
    path = case.write(case.reader, ctx, where)
    out = where / "out"
    server = None
    live = ""
    if case.input.server is not None:
        hostile = _hostileserver()
        server = hostile.HostilePrometheus(case.input.server, size=ctx.sizes.live_bytes)
        live = server.url
    argv = [
        sys.executable,
        "-m",
        "quotaform",
        *(a.format(**_fields(ctx, path, out, live)) for a in case.command.argv),
    ]
    if case.command.resets and reset is not None:
        reset()
    mutate = None
    if case.input.mutate:
        mutate = _mutator(path, path.read_bytes())
    try:
        run = run_command(
            argv,
            env=_env(ctx.root),
            cwd=where,
            spark=case.engine == "spark",
            limit_s=limit_s,
            mutate=mutate,
        )
    finally:
        if server is not None:
            server.close()
    return run, path, fingerprint(case, run, out, where)


def _hostileserver() -> Any:
    spec = importlib.util.spec_from_file_location(
        "hostileserver", ROOT / "tests" / "hostileserver.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_series(
    cases: list[Case], ctx: Ctx, args: argparse.Namespace, reset: Callable[[], None] | None
) -> dict[str, Any]:
    controls: dict[tuple[str, str], Any] = {}
    limits: dict[tuple[str, str], float] = {}
    control_rows: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for number, case in enumerate(cases):
        key = (case.reader.name, case.command.label())
        if key not in controls:
            good = Input("control", _write_good)
            control_case = replace(case, name="control", write=_write_good, input=good)
            if case.reader.dialect == "live":
                control_case = replace(control_case, command=_live_control(case.command))
            where = ctx.tmp / f"{number:04d}-control"
            spark = case.engine == "spark"
            run, _, got = run_case(
                control_case, ctx, where, reset=reset, limit_s=CONTROL_LIMIT_S[spark]
            )
            # A loaded machine slows Spark's start: its cases get twice the control's time.
            limits[key] = max(SPARK_TIME_LIMIT_S, 2 * run.seconds) if spark else TIME_LIMIT_S
            ok = (
                run.exit_code in case.command.ok_codes
                and run.killed is None
                and (not case.command.analyze or got is not None)
            )
            controls[key] = got
            control_rows.append(
                {
                    "reader": case.reader.name,
                    "command": case.command.label(),
                    "engine": case.engine,
                    "ok": ok,
                    "exit_code": run.exit_code,
                    "seconds": run.seconds,
                    "peak_rss_mib": run.peak_rss_mib,
                    "fingerprint": got if case.command.analyze else None,
                    "stderr": run.stderr[:300],
                }
            )
            _say(
                f"{'ok  ' if ok else 'BAD '} control {case.reader.name} {case.command.label()} "
                f"exit {run.exit_code} {run.seconds:.1f}s"
            )
            if not args.keep:
                shutil.rmtree(where, ignore_errors=True)
        if args.controls_only:
            continue
        where = ctx.tmp / f"{number:04d}"
        run, path, got = run_case(case, ctx, where, reset=reset, limit_s=limits[key])
        outcome, why = classify(case, run, got, controls[key])
        why = why.replace(f"{where}/", "")
        errors = error_lines(run.stderr)
        names_file = (
            any(path.name in line for line in errors)
            if outcome == "refused" and case.input.server is None
            else None
        )
        results.append(
            {
                "reader": case.reader.name,
                "case": case.name,
                "command": case.command.label(),
                "engine": case.engine,
                "outcome": outcome,
                "why": why,
                "names_file": names_file,
                "exit_code": run.exit_code,
                "signal": run.signal,
                "seconds": run.seconds,
                "cpu_seconds": run.cpu_seconds,
                "limit_s": run.limit_s,
                "load_1min": round(os.getloadavg()[0], 1),
                "peak_rss_mib": run.peak_rss_mib,
                "stderr": run.stderr[:300],
                "stderr_tail": run.stderr[-1500:] if outcome in FAILING else None,
                "stderr_bytes": run.stderr_bytes,
            }
        )
        _say(
            f"{outcome:11} {case.reader.name:17} {case.name:28} {run.seconds:5.1f}s "
            f"{run.peak_rss_mib:7.0f}MiB {case.command.argv[0]} {' '.join(case.command.argv[1:2])}"
            f"{' [spark]' if case.engine == 'spark' else ''}: {why[:110]}"
        )
        if not args.keep:
            shutil.rmtree(where, ignore_errors=True)
    return {"cases": results, "controls": control_rows}


def _live_control(command: Command) -> Command:
    return replace(command, line=command.line.replace("{live}", "{prom}"))


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


# ----------------------------------------------------------------- set-up


def setup(ctx: Ctx, args: argparse.Namespace, bootstrap: str | None) -> None:
    base = ctx.tmp / "base"
    base.mkdir()
    files = {
        "manifest": ("quotas.yaml", MANIFEST.replace("@HOLE@", "1MiB")),
        "usage_manifest": ("usage-quotas.yaml", USAGE_MANIFEST),
        "storage_manifest": ("storage-quotas.yaml", STORAGE_MANIFEST),
        "snapshot": ("snapshot.jsonl", "".join(_snapshot_line(e) + "\n" for e in SNAPSHOT_LINES)),
        "usage": ("usage.jsonl", usage_jsonl()),
    }
    for key, (name, text) in files.items():
        (base / name).write_text(text, encoding="utf-8")
        ctx.files[key] = base / name
    ctx.plan_text = _base_plan(ctx, base, bootstrap)


def _base_plan(ctx: Ctx, base: Path, bootstrap: str | None) -> str:
    """The saved plan of the base manifest: ``plan --out`` against the
    broker when there is one (apply needs its cluster id), else written by
    the library against an empty cluster (show and explain read it offline)."""
    out = base / "plan.json"
    if bootstrap is not None:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "quotaform",
                "plan",
                str(ctx.files["manifest"]),
                "--bootstrap-server",
                bootstrap,
                "--out",
                str(out),
            ],
            env=_env(ctx.root),
            capture_output=True,
            text=True,
            timeout=120,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(f"plan --out failed: {done.stderr}")
    else:
        from quotaform.formats.planfile import write_plan_file
        from quotaform.manifest.loader import load_manifests
        from quotaform.plan.diff import compute_plan
        from quotaform.plan.review import review_plan
        from quotaform.plan.state import LiveState

        desired = load_manifests([ctx.files["manifest"]])
        plan = compute_plan(desired, LiveState(entities={}))
        write_plan_file(plan, review_plan(plan, desired), out, env={})
    return out.read_text(encoding="utf-8")


def _resetter(bootstrap: str) -> Callable[[], None]:
    """Remove every quota of a ``hostile-*`` entity (the base state of broker cases)."""
    from quotaform.cluster.read import describe_shapes
    from quotaform.cluster.wire import QuotaAlteration, load_connection_settings, open_admin
    from quotaform.kafka.entity import SHAPES

    def reset() -> None:
        admin = open_admin(
            load_connection_settings(bootstrap_server=bootstrap, env={}), read_only=False
        )
        try:
            live = describe_shapes(admin, SHAPES)
            mine = [
                QuotaAlteration(e, dict.fromkeys(q))
                for e, q in live.items()
                if any(n is not None and n.startswith("hostile-") for _, n in e.parts)
            ]
            if mine:
                admin.alter_client_quotas(mine, validate_only=False)
        finally:
            admin.close()

    return reset


# ----------------------------------------------------------------- report


def summarise(results: list[dict[str, Any]]) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    for r in results:
        row = out.setdefault(
            r["reader"],
            {"tried": 0, **dict.fromkeys(OUTCOMES, 0), "names_file": 0, "file_refusals": 0},
        )
        row["tried"] += 1
        row[r["outcome"]] += 1
        row["names_file"] += bool(r["names_file"])
        row["file_refusals"] += r["names_file"] is not None  # a live server has no file
    return out


def markdown(
    summary: dict[str, dict[str, int]], results: list[dict[str, Any]], meta: dict[str, Any]
) -> str:
    head = ["reader", "tried", *OUTCOMES, "refusals naming the file"]
    lines = [
        f"Hostile inputs: {meta['cases']} cases, {meta['seconds']:.0f} s, quotaform at "
        f"`{meta['quotaform']}`{' (--quick)' if meta['quick'] else ''}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    total = Counter[str]()
    for reader, row in summary.items():
        total.update(row)
        cells = [
            reader,
            str(row["tried"]),
            *(str(row[o]) for o in OUTCOMES),
            f"{row['names_file']}/{row['file_refusals']}" if row["file_refusals"] else "-",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    cells = [
        "**all**",
        str(total["tried"]),
        *(str(total[o]) for o in OUTCOMES),
        f"{total['names_file']}/{total['file_refusals']}",
    ]
    lines.append("| " + " | ".join(cells) + " |")
    bad = [r for r in results if r["outcome"] in FAILING]
    if bad:
        lines += ["", "| reader | case | command | outcome | first line |", "|---|---|---|---|---|"]
        for r in bad:
            engine = " (spark)" if r["engine"] == "spark" else ""
            why = r["why"].replace("|", "\\|")
            cells = [r["reader"], r["case"], f"`{r['command']}`{engine}", r["outcome"], why]
            lines.append("| " + " | ".join(cells) + " |")
    lines += [
        "",
        f"Bounds: {TIME_LIMIT_S:g} s of CPU time per case (or {TIME_LIMIT_S:g} s of wall time "
        f"then {IDLE_S:g} s blocked, or {WALL_CAP_S:g} s of wall time); RLIMIT_AS 2 GiB for "
        f"Python-only commands. Spark-engine cases: {SPARK_TIME_LIMIT_S:g} s of wall time or "
        "twice the control's (a pristine Spark run takes about 30 s on two idle cores) and no "
        "RLIMIT_AS (the JVM "
        "cannot start under it): their process tree's RSS is polled every 100 ms and the "
        "tree killed above 2 GiB. Peak RSS: the tree's RSS and VmHWM, polled.",
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--markdown", type=Path, help="write the table as Markdown here")
    parser.add_argument("--quick", action="store_true", help="the small corpus for CI")
    parser.add_argument(
        "--ci",
        action="store_true",
        help="the CI corpus: --quick, and per reader only the attacks of CI_PREFIXES",
    )
    parser.add_argument(
        "--spark", action="store_true", help="with --quick: run the Spark engine too"
    )
    parser.add_argument("--no-spark", action="store_true", help="skip the Spark engine")
    parser.add_argument(
        "--all-spark",
        action="store_true",
        help="Spark: impact and recommend too (default: utilisation; the same usage reading)",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="READER",
        help=f"only this reader (a prefix; repeatable): {', '.join(r.name for r in READERS)}",
    )
    parser.add_argument("--bootstrap-server", help="a test broker (hostile-* quotas are removed)")
    parser.add_argument(
        "--no-broker", action="store_true", help="skip the commands that need a broker"
    )
    parser.add_argument("--name", default="hostile-inputs", help="sandbox name when starting one")
    parser.add_argument("--keep", action="store_true", help="keep the generated files")
    parser.add_argument("--list", action="store_true", help="list the cases, run nothing")
    parser.add_argument(
        "--controls-only", action="store_true", help="run only the controls (checks the judge)"
    )
    parser.add_argument(
        "--quotaform-root",
        type=Path,
        default=ROOT,
        help="the quotaform checkout to run (default: this one)",
    )
    args = parser.parse_args()
    args.quick = args.quick or args.ci
    args.spark = (args.spark or not args.quick) and not args.no_spark
    root = args.quotaform_root.resolve()
    sys.path.insert(0, str(root))
    import quotaform

    if Path(quotaform.__file__).resolve().parent != root / "quotaform":
        raise SystemExit(f"quotaform imports from {quotaform.__file__}, not {root}")
    sizes = QUICK if args.quick else FULL
    started = time.monotonic()
    tmp = Path(tempfile.mkdtemp(prefix="quotaform-hostile-"))
    ctx = Ctx(tmp=tmp, root=root, sizes=sizes)
    broker_name = None
    good_server = None
    if args.list:
        setup(ctx, args, None)
        counts = Counter(f"{c.reader.name}: {c.command.label()}" for c in build_cases(ctx, args))
        for what, n in counts.items():
            print(f"{n:4} {what}")
        print(f"{sum(counts.values()):4} cases")
        shutil.rmtree(tmp, ignore_errors=True)
        return 0
    try:
        bootstrap = args.bootstrap_server
        if any(c.broker for _, c in selected(args)) and bootstrap is None:
            from quotaform.sandbox import start_broker

            broker_name = args.name
            broker = start_broker(name=broker_name)
            bootstrap = broker.bootstrap
            ctx.broker_id = (
                str(broker.brokers[0].node_id) if getattr(broker, "brokers", None) else "1"
            )
        if bootstrap is not None and not args.no_broker:
            ctx.bootstrap = bootstrap
        if bootstrap is not None and not args.no_broker:
            _resetter(bootstrap)()  # the base plan is made against no hostile-* quota
        setup(ctx, args, bootstrap if not args.no_broker else None)
        hostile = _hostileserver()
        good_server = hostile.HostilePrometheus("good", body=_prometheus('"950000"').encode())
        ctx.prom_url = good_server.url
        cases = build_cases(ctx, args)
        reset = _resetter(ctx.bootstrap) if bootstrap is not None and not args.no_broker else None
        _say(f"{len(cases)} cases, quotaform at {quotaform.__file__}, files under {tmp}")
        series = run_series(cases, ctx, args, reset)
        if reset is not None:
            reset()
    finally:
        if good_server is not None:
            good_server.close()
        if broker_name is not None:
            from quotaform.sandbox import stop_broker

            stop_broker(name=broker_name)
        if args.keep:
            _say(f"kept: {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    summary = summarise(series["cases"])
    meta = {
        "quotaform": str(root),
        "quick": args.quick,
        "ci": args.ci,
        "spark": args.spark,
        "broker": not args.no_broker,
        "cases": len(series["cases"]),
        "seconds": round(time.monotonic() - started, 1),
        "time_limit_s": TIME_LIMIT_S,
        "spark_time_limit_s": SPARK_TIME_LIMIT_S,
        "memory_limit": "RLIMIT_AS 2 GiB (Python-only commands); Spark engine: the process "
        "tree's RSS polled every 100 ms, killed above 2 GiB",
        "sizes": sizes.__dict__,
        "date": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "cpus": os.cpu_count(),
        "load_1min_at_end": round(os.getloadavg()[0], 1),
    }
    document = {"meta": meta, "summary": summary, **series}
    table = markdown(summary, series["cases"], meta)
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(document, indent=2) + "\n", encoding="utf-8")
    if args.markdown:
        args.markdown.write_text(table, encoding="utf-8")
    print(table)
    if not all(c["ok"] for c in series["controls"]):
        _say("a control run failed: the judge cannot tell a correct read")
        return 2
    return 1 if any(r["outcome"] in FAILING for r in series["cases"]) else 0


if __name__ == "__main__":
    raise SystemExit(main())
