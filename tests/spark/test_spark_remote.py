"""``quotaform analyze`` on a real Spark standalone cluster (``--master
spark://``) and through a real Spark Connect server (``--remote sc://``,
``SPARK_REMOTE``), both started from the pip pyspark package by the session
fixtures: the rows equal local mode's and the Python engine's, row for row;
standard error carries quotaform's lines only; failures to reach Spark are one
``Error:`` line; a token is never printed.

The test process holds the shared local SparkSession, so every cluster and
Connect run is a separate process (``python -m quotaform``).
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

from quotaform.analytics.remote import redact_remote, scrub, spark_target
from quotaform.cli.app import app
from quotaform.errors import EXIT_ERROR, AnalyticsError
from tests.docblocks import fenced_block, shell_commands

from .analyses import FIXTURES, commands

pytestmark = [pytest.mark.spark, pytest.mark.xdist_group("spark")]

ROOT = Path(__file__).resolve().parents[2]
KEY = ("cluster", "broker", "user", "client_id", "ip", "quota_key")
runner = CliRunner()

#: What quotaform itself writes to standard error during an analysis.
OWN_LINES = re.compile(
    r"^(engine: |Spark \d+\.\d+\.\d+ on |read [\d,]+ usage rows|wrote |Warning: \d+ usage row)"
)


def _rows(out: Path, command: str) -> list[dict[str, Any]]:
    path = out / command / f"{command}.parquet"
    parts = [path] if path.is_file() else sorted(path.glob("*.parquet"))
    rows = [r for part in parts for r in pq.read_table(part).to_pylist()]
    return sorted(rows, key=lambda r: tuple(str(r.get(c) or "") for c in KEY))


def _env(**extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("MASTER", "SPARK_REMOTE", "SPARK_CONNECT_AUTHENTICATE_TOKEN")
    }
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    env.update(extra)
    return env


def _quotaform(
    args: list[str], *, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quotaform", *args],
        env=env or _env(), capture_output=True, text=True, timeout=timeout, cwd=ROOT,
    )  # fmt: skip


def assert_quiet(stderr: str) -> None:
    """Only quotaform's own progress lines: no JVM, Spark, log4j, gRPC or
    Python warning lines."""
    foreign = [line for line in stderr.splitlines() if line.strip() and not OWN_LINES.match(line)]
    assert not foreign, stderr


@pytest.fixture(scope="module")
def local(reference_analyses: dict[str, Path]) -> dict[str, Path]:
    """Every analysis on local Spark (the shared session) and on the Python
    engine: the reference rows (run once per session, shared)."""
    return reference_analyses


def test_the_reference_rows_are_not_empty(local: dict[str, Path]) -> None:
    for command in ("utilisation", "impact", "recommend"):
        assert _rows(local["spark"], command), command
        assert _rows(local["spark"], command) == _rows(local["python"], command), command


# ------------------------------------------------------------ standalone cluster


#: One process runs several command lines (one Spark application on the
#: cluster instead of one each: the cluster has two cores; one Connect
#: client), each as ``python -m quotaform`` would.
RUN_ALL = """
import json, sys
from quotaform.cli.app import main
for args in json.loads(sys.argv[1]):
    try:
        main(args)
    except SystemExit as stop:
        if stop.code:
            raise
"""


@dataclass(frozen=True)
class _Runs:
    """One process's run of the three analyses and of the utilisation of
    pandas' Parquet (``usage``): ``out/<command>``, ``out/pandas/utilisation``."""

    out: Path
    stderr: str
    analyses: tuple[str, ...]
    usage: Path


def _run_all(where: list[str], out: Path) -> _Runs:
    """The three analyses of the fixtures and the utilisation of pandas'
    Parquet (:func:`_pandas_usage`) in ONE process (one Spark application
    on the cluster, one Connect client), each as ``python -m quotaform``
    would run it, on ``where`` (``--master URL`` or ``--remote URL``)."""
    analyses = commands(out, out)
    usage = _pandas_usage(out)
    runs = [[*args, *where] for args in analyses.values()]
    runs.append(
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage", str(usage),
         "--out", str(out / "pandas" / "utilisation"), *where]
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", RUN_ALL, json.dumps(runs)],
        env=_env(), capture_output=True, text=True, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    return _Runs(out=out, stderr=done.stderr, analyses=tuple(analyses), usage=usage)


@pytest.fixture(scope="module")
def on_cluster(spark_cluster: Any, tmp_path_factory: pytest.TempPathFactory) -> _Runs:
    """Every analysis of the fixtures on the standalone cluster, one
    application for all (the cluster has two cores: each application
    starts its own executors)."""
    return _run_all(
        ["--engine", "spark", "--master", spark_cluster.master_url],
        tmp_path_factory.mktemp("cluster"),
    )


@pytest.fixture(scope="module")
def on_connect(spark_connect: Any, tmp_path_factory: pytest.TempPathFactory) -> _Runs:
    """Every analysis of the fixtures through the Connect server, one client
    process for all."""
    return _run_all(["--remote", spark_connect.remote], tmp_path_factory.mktemp("connect"))


def test_the_standalone_cluster_rows_equal_local_and_python(
    spark_cluster: Any, on_cluster: _Runs, local: dict[str, Path]
) -> None:
    assert f"on {spark_cluster.master_url} (" in on_cluster.stderr
    assert_quiet(on_cluster.stderr)
    for command in on_cluster.analyses:
        summary = json.loads((on_cluster.out / command / "summary.json").read_text("utf-8"))
        assert summary["engine"] == "spark"
        assert _rows(on_cluster.out, command) == _rows(local["spark"], command), command
        assert _rows(on_cluster.out, command) == _rows(local["python"], command), command


def test_a_master_nobody_answers_is_one_error_line() -> None:
    port = _closed_port()
    done = _quotaform(
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage",
         str(FIXTURES / "usage.csv"), "--out", "/nonexistent/never", "--engine", "spark",
         "--master", f"spark://127.0.0.1:{port}"],
    )  # fmt: skip
    assert done.returncode == EXIT_ERROR
    errors = [line for line in done.stderr.splitlines() if line.startswith("Error:")]
    assert errors == [line for line in done.stderr.splitlines() if not OWN_LINES.match(line)]
    assert len(errors) == 1 and f"spark://127.0.0.1:{port}" in errors[0], done.stderr


def test_a_bad_master_url_is_one_error_line_naming_it(tmp_path: Path) -> None:
    done = _quotaform(
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage",
         str(FIXTURES / "usage.csv"), "--out", str(tmp_path), "--engine", "spark",
         "--master", "nonsense://x"],
    )  # fmt: skip
    assert done.returncode == EXIT_ERROR
    assert "Traceback" not in done.stderr
    foreign = [line for line in done.stderr.splitlines() if not OWN_LINES.match(line)]
    assert len(foreign) == 1 and foreign[0].startswith("Error: "), done.stderr
    assert "nonsense://x" in foreign[0]
    assert "Java 17" not in foreign[0]  # Java is there: the master is wrong


# ------------------------------------------------------------------ Spark Connect


def test_connect_rows_equal_local_for_every_analysis(
    spark_connect: Any, on_connect: _Runs, local: dict[str, Path]
) -> None:
    assert_quiet(on_connect.stderr)
    # The three analyses and the pandas Parquet's utilisation.
    assert on_connect.stderr.count(f"on {spark_connect.remote} (Spark Connect)") == 4
    for command in on_connect.analyses:
        summary = json.loads((on_connect.out / command / "summary.json").read_text("utf-8"))
        assert summary["engine"] == "spark"  # a remote implies the Spark engine
        assert _rows(on_connect.out, command) == _rows(local["spark"], command), command


def _pandas_usage(tmp_path: Path) -> Path:
    """usage.csv as most people write Parquet: pandas' to_parquet of a
    tz-aware time (TIMESTAMP(NANOS)) and an integer broker."""
    import pandas as pd

    frame = pd.read_csv(FIXTURES / "usage.csv", keep_default_na=False, na_values={"ip": [""]})
    # The fixture's row timed "yesterday" (a rejected row) has no datetime.
    frame = frame[frame["timestamp"] != "yesterday"].copy()
    frame["timestamp"] = pd.to_datetime(frame["timestamp"], utc=True, format="ISO8601")
    frame["broker"] = frame["broker"].astype("int64")
    path = tmp_path / "usage.parquet"
    frame.to_parquet(path)
    return path


def test_pandas_nanosecond_parquet_reads_on_connect_and_on_a_cluster_as_locally(
    on_connect: _Runs, on_cluster: _Runs, tmp_path: Path
) -> None:
    # Was, on every Spark mode: "AnalysisException: [PARQUET_TYPE_ILLEGAL]
    # Illegal Parquet type: INT64 (TIMESTAMP(NANOS,true))"; the local engine
    # rejected every row's integer broker. Connect and the cluster read it
    # in their runs of every analysis (on_connect, on_cluster); the Python
    # engine reads the file the cluster read.
    done = _quotaform(
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage",
         str(on_cluster.usage),
         "--out", str(tmp_path / "python" / "utilisation"), "--engine", "python"],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    reference = _rows(tmp_path / "python", "utilisation")
    assert reference
    assert _rows(on_connect.out / "pandas", "utilisation") == reference
    assert _rows(on_cluster.out / "pandas", "utilisation") == reference


def test_spark_remote_from_the_environment(
    spark_connect: Any, local: dict[str, Path], tmp_path: Path
) -> None:
    args = commands(tmp_path, tmp_path)["utilisation"]
    done = _quotaform(
        [*args, "--engine", "spark"],
        env=_env(SPARK_REMOTE=spark_connect.remote, MASTER="local[1]"),  # MASTER is ignored
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert_quiet(done.stderr)
    assert "(Spark Connect)" in done.stderr
    assert _rows(tmp_path, "utilisation") == _rows(local["spark"], "utilisation")


def test_a_token_is_used_and_never_printed(
    spark_connect: Any, local: dict[str, Path], tmp_path: Path
) -> None:
    token = "tok-3f9a1c-never-shown"
    # With a token PySpark's client uses TLS unless the host is localhost.
    remote = f"sc://localhost:{spark_connect.port}/;user_id=qf-test"
    args = commands(tmp_path, tmp_path)["utilisation"]
    done = _quotaform(
        ["-v", *args, "--remote", remote], env=_env(SPARK_CONNECT_AUTHENTICATE_TOKEN=token)
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert token not in done.stdout + done.stderr
    assert "qf-test" not in done.stdout + done.stderr
    assert f"sc://localhost:{spark_connect.port}/;user_id=***" in done.stderr
    assert _rows(tmp_path, "utilisation") == _rows(local["spark"], "utilisation")


def test_an_unreachable_remote_is_one_error_line_without_its_token(tmp_path: Path) -> None:
    port = _closed_port()
    done = _quotaform(
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage",
         str(FIXTURES / "usage.csv"), "--out", str(tmp_path),
         "--remote", f"sc://127.0.0.1:{port}/;token=s3cr3t-in-url"],
        env=_env(SPARK_CONNECT_AUTHENTICATE_TOKEN="s3cr3t-in-env"),
    )  # fmt: skip
    assert done.returncode == EXIT_ERROR
    foreign = [line for line in done.stderr.splitlines() if not OWN_LINES.match(line)]
    assert foreign == [
        f"Error: no Spark Connect server answers at sc://127.0.0.1:{port}/;token=*** "
        f"(nothing accepted a connection to 127.0.0.1:{port} within 5 s)"
    ], done.stderr
    assert "s3cr3t" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "environ", "expected"),
    [
        (["--remote", "sc://h:1", "--master", "local[1]"], {},
         "--remote sc://h:1 and --master local[1] given"),
        (["--master", "local[1]", "--engine", "spark"], {"SPARK_REMOTE": "sc://h:1/;token=x1y2z3"},
         "SPARK_REMOTE=sc://h:1/;token=*** is set and --master local[1] given"),
        (["--remote", "sc://h:1", "--engine", "python"], {},
         "--remote sc://h:1 runs the Spark engine"),
        (["--remote", "spark://h:7077"], {}, "a Spark Connect URL is sc://HOST:PORT"),
    ],
)  # fmt: skip
def test_contradictory_spark_options_are_refused_in_one_line(
    args: list[str],
    environ: dict[str, str],
    expected: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(
        app,
        ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage",
         str(FIXTURES / "usage.csv"), "--out", str(tmp_path), *args],
    )  # fmt: skip
    assert result.exit_code == EXIT_ERROR
    assert expected in result.output, result.output
    assert "x1y2z3" not in result.output


def test_remote_redaction_and_scrubbing() -> None:
    assert redact_remote("sc://h:15002") == "sc://h:15002"
    assert redact_remote("sc://h:15002/;token=abc;use_ssl=true") == (
        "sc://h:15002/;token=***;use_ssl=***"
    )
    assert redact_remote("sc://user:pw@h:1") == "sc://***@h:1"
    assert scrub("failed at sc://h:1/;token=abcdef", "sc://h:1/;token=abcdef") == (
        "failed at sc://h:1/;token=***"
    )
    assert scrub("bearer zzz-token", None, "zzz-token") == "bearer ***"
    target = spark_target(master=None, remote=None, environ={"MASTER": "spark://x:1"})
    assert (target.master, target.remote) == (None, None)  # MASTER is ignored
    with pytest.raises(AnalyticsError, match="no host"):
        spark_target(master=None, remote="sc://:1", environ={})


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# ------------------------------------------------------------ the thin client


def _documented_connect_block() -> list[str]:
    return shell_commands(
        fenced_block("docs/analytics.md", after="and on the client (quotaform with the Connect")
    )


def _documented_server_block() -> str:
    return fenced_block("docs/analytics.md", after="## Spark Connect")


def _thin_key(install: str) -> str:
    """What the thin client's venv installs, as a short digest: the install
    command, the Python version, the build requirements, the dependencies of
    ``quotaform[spark-connect]`` (the extras it names, followed) and the pins."""
    import hashlib
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    project = pyproject["project"]
    extras = project["optional-dependencies"]
    wanted, todo = {}, ["spark-connect"]
    while todo:
        extra = todo.pop()
        if extra not in wanted:
            wanted[extra] = sorted(extras[extra])
            for requirement in extras[extra]:
                named = re.fullmatch(r"quotaform\[(.*)\]", requirement)
                todo += named.group(1).split(",") if named else []
    material = {
        "install": install,
        "python": list(sys.version_info[:2]),
        "build": pyproject["build-system"]["requires"],
        "dependencies": sorted(project["dependencies"]),
        "extras": wanted,
        "constraints": (ROOT / "constraints.txt").read_text(encoding="utf-8"),
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:12]


def _thin_venv(install: str, env: dict[str, str]) -> Path:
    """A venv with ``quotaform[spark-connect]`` (pyspark-client, no JVM) installed
    by ``install`` run as documented, cached under ``~/.cache/quotaform`` by
    :func:`_thin_key` and reused while that is unchanged (built fresh in CI:
    about 90 s). The install runs when the venv has no stamp of a successful
    one: a failure fails the test and leaves no stamp."""
    import fcntl

    from quotaform.sandbox.jars import cache_root

    venv = cache_root() / f"thin-client-{_thin_key(install)}"
    stamp = venv / ".quotaform-installed"
    venv.parent.mkdir(parents=True, exist_ok=True)
    with open(venv.with_name(f"{venv.name}.lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another worker or checkout building it
        if stamp.is_file():
            return venv
        if not (venv / "bin" / "python").exists():
            subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=120)
        path = f"{venv / 'bin'}{os.pathsep}{os.environ['PATH']}"
        done = subprocess.run(
            ["/bin/bash", "-c", install], cwd=ROOT, capture_output=True, text=True, timeout=900,
            env={**env, "PATH": path, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        stamp.write_text(install + "\n", encoding="utf-8")
    return venv


def test_the_documented_thin_client_runs_without_java(
    spark_connect: Any, local: dict[str, Path], tmp_path: Path
) -> None:
    install, *analyses = _documented_connect_block()
    assert install.startswith("pip install") and "[spark-connect]" in install, install
    venv = _thin_venv(install, _env())
    bin_dir = venv / "bin"
    assert (venv / ".quotaform-installed").read_text(encoding="utf-8") == install + "\n"
    (tmp_path / "tests/fixtures").mkdir(parents=True)
    (tmp_path / "tests/fixtures/analytics").symlink_to(FIXTURES)
    no_java = {
        k: v for k, v in _env().items() if k not in ("JAVA_HOME", "PYTHONPATH", "SPARK_HOME")
    }
    no_java["PATH"] = str(bin_dir)  # nothing else: no java reachable
    no_java["PYTHONPATH"] = str(ROOT)  # this checkout's quotaform over the cached install
    assert not any((Path(p) / "java").exists() for p in no_java["PATH"].split(os.pathsep))
    for command in analyses:
        command = command.replace("sc://127.0.0.1:15002", spark_connect.remote)
        done = subprocess.run(
            ["/bin/bash", "-c", command], cwd=tmp_path, env=no_java, capture_output=True,
            text=True, timeout=300,
        )  # fmt: skip
        assert done.returncode == 0, (command, done.stderr[-3000:])
        assert_quiet(done.stderr)
    probe = subprocess.run(
        [str(bin_dir / "python"), "-c", "import pyspark.util as u; print(u.is_remote_only())"],
        env=no_java, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert probe.stdout.strip() == "True", probe.stderr
    assert _rows(tmp_path / "out", "utilisation") == _rows(local["spark"], "utilisation")


def test_the_documented_connect_server_starts_and_stops_as_shown(tmp_path: Path) -> None:
    """docs/analytics.md's Connect server, started exactly as shown (its port
    15002 swapped for a free one), answers an analysis, and stops with the
    script and ``SPARK_PID_DIR`` the page names (issue 32: nothing showed how
    to start one from the pip package)."""
    import time

    block = _documented_server_block()
    assert "start-connect-server.sh" in block, block
    port = _closed_port()
    env = _env()
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}"
    started = subprocess.run(
        ["/bin/bash", "-c", block.replace("15002", str(port))], cwd=tmp_path, env=env,
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert started.returncode == 0, started.stderr[-3000:]
    stop = (
        'export SPARK_HOME="$(python -c \'import os, pyspark; print(os.path.dirname('
        'pyspark.__file__))\')"\nSPARK_PID_DIR="$PWD/spark-connect" '
        '"$SPARK_HOME/sbin/stop-connect-server.sh"'
    )
    try:
        deadline = time.monotonic() + 300
        while True:
            try:
                with socket.create_connection(("127.0.0.1", port), timeout=2):
                    break
            except OSError:
                assert time.monotonic() < deadline, "the Connect server never listened"
                time.sleep(1)
        done = _quotaform(
            ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"),
             "--usage", str(FIXTURES / "usage.csv"), "--out", str(tmp_path / "out"),
             "--remote", f"sc://127.0.0.1:{port}"],
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        assert (tmp_path / "out/utilisation.parquet").exists()
    finally:
        subprocess.run(
            ["/bin/bash", "-c", stop], cwd=tmp_path, env=env, capture_output=True, timeout=120
        )
