"""A local Prometheus server for the live-metrics tests and recordings, and
its ``promtool`` for checking and unit-testing rule files.

Both binaries are built once from the Go module proxy and cached like the
Kafka jars::

    <cache>/prometheus-v0.316.0/prometheus      # renamed into place when complete
    <cache>/prometheus-v0.316.0/promtool        # the same build step
    <cache>/prometheus-v0.316.0/.build.lock     # one build at a time, across processes

``go install -tags remove_all_sd github.com/prometheus/prometheus/cmd/prometheus@v0.316.0``:
the tag drops the service-discovery plugins (static targets are all a
sandbox needs). promtool is then built from the same release with the same
tag and flags, as a copy of ``cmd/promtool`` without the one
``discovery/kubernetes`` import the tag does not reach
(:mod:`quotaform.sandbox.promtool_build`): it reuses every package the first
build compiled, where upstream's promtool linked Kubernetes' client too
(from empty Go caches on 2 cores: 196 CPU-seconds for both instead of 274,
with both built without debug information). The build sets the version
string (``--version``) and embeds no web UI assets; the HTTP API
(``/api/v1/query_range``) is complete. A binary built otherwise (an older
quotaform's stamp) is built again.

:func:`start_prometheus` runs it on a free 127.0.0.1 port with a generated
``prometheus.yml`` (job ``kafka``, static targets), in its own process group,
storing its TSDB and log in a state directory the caller owns.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import logging
import os
import shutil
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from quotaform.errors import SandboxError
from quotaform.sandbox.jars import cache_root
from quotaform.sandbox.processes import (
    CHILDREN,
    cmdline,
    free_port,
    is_alive,
    log_tail,
    spawn_group,
    terminate_group,
    wait_for,
)
from quotaform.sandbox.promtool_build import PROMTOOL_CHANGE, build_promtool, run_go

__all__ = [
    "PROMETHEUS_MODULE",
    "PROMETHEUS_TOOLS",
    "PROMETHEUS_VERSION",
    "PrometheusServer",
    "basic_auth_web_config",
    "ensure_prometheus",
    "ensure_prometheus_tools",
    "ensure_promtool",
    "prometheus_get",
    "prometheus_path",
    "promtool_path",
    "query_range",
    "start_prometheus",
    "stop_prometheus",
]

log = logging.getLogger(__name__)

#: The Prometheus release the sandbox builds (a Go module version of the
#: ``github.com/prometheus/prometheus`` module, i.e. Prometheus 3.x).
PROMETHEUS_VERSION = "v0.316.0"
#: The main package ``go install`` builds.
PROMETHEUS_MODULE = "github.com/prometheus/prometheus/cmd/prometheus"
#: Every command the build step makes, by binary name -> Go package (one module, one version).
PROMETHEUS_TOOLS = {
    "prometheus": PROMETHEUS_MODULE,
    "promtool": "github.com/prometheus/prometheus/cmd/promtool",
}
#: Drops every service-discovery plugin: static targets only, a far smaller build.
_BUILD_TAGS = "remove_all_sd"
#: The version ``prometheus --version`` prints (Prometheus' release builds set it
#: with promu; a bare ``go install`` left it empty): the module version.
_VERSION_PACKAGE = "github.com/prometheus/common/version"
_LDFLAGS = "-s -w " + " ".join(
    f"-X {_VERSION_PACKAGE}.{field}={value}"
    for field, value in (
        ("Version", PROMETHEUS_VERSION.removeprefix("v")),
        ("Revision", PROMETHEUS_VERSION),
        ("Branch", "go-install"),
        ("BuildUser", "quotaform"),
    )
)
#: Both binaries' build flags. No debug information (``-dwarf=false``, ``-s
#: -w``): a panic still prints its stack, and the build from an empty cache
#: takes 180 CPU-seconds instead of 210 (2 cores, Go 1.26).
_GO_ARGS = ("-tags", _BUILD_TAGS, "-gcflags=all=-dwarf=false", f"-ldflags={_LDFLAGS}")
#: What a cached binary was built with, in ``<name>.build`` beside it: a binary
#: without it, or built otherwise, is built again.
_BUILD_STAMP = f"go install {' '.join(_GO_ARGS)} {PROMETHEUS_VERSION}\n"
#: Every Go step's environment beyond the caller's: static binaries.
_GO_ENV = {"CGO_ENABLED": "0"}
_BUILD_TIMEOUT_S = 1800
_START_ATTEMPTS = 3
_READY_LINE = "Server is ready to receive web requests"


def prometheus_path(cache_dir: Path | None = None) -> Path:
    """Where the cached binary lives (it may not exist):
    ``<cache>/prometheus-v0.316.0/prometheus``."""
    return (cache_dir or cache_root()) / f"prometheus-{PROMETHEUS_VERSION}" / "prometheus"


def promtool_path(cache_dir: Path | None = None) -> Path:
    """Where the cached ``promtool`` lives (it may not exist), beside
    :func:`prometheus_path`."""
    return prometheus_path(cache_dir).with_name("promtool")


def ensure_prometheus(
    on_progress: Callable[[str], None] | None = None,
    *,
    cache_dir: Path | None = None,
    timeout_s: float = _BUILD_TIMEOUT_S,
) -> Path:
    """Return the cached Prometheus binary, building it with ``go install`` if
    absent (see :func:`ensure_prometheus_tools`, which this calls for
    ``prometheus`` alone).

    Raises:
        SandboxError: as :func:`ensure_prometheus_tools`.
    """
    return ensure_prometheus_tools(
        ("prometheus",), on_progress, cache_dir=cache_dir, timeout_s=timeout_s
    )["prometheus"]


def ensure_promtool(
    on_progress: Callable[[str], None] | None = None,
    *,
    cache_dir: Path | None = None,
    timeout_s: float = _BUILD_TIMEOUT_S,
) -> Path:
    """Return the cached ``promtool`` (``check rules``, ``test rules``),
    building it with ``go install`` if absent (:func:`ensure_prometheus_tools`).

    Raises:
        SandboxError: as :func:`ensure_prometheus_tools`.
    """
    return ensure_prometheus_tools(
        ("promtool",), on_progress, cache_dir=cache_dir, timeout_s=timeout_s
    )["promtool"]


def ensure_prometheus_tools(
    names: Sequence[str] = tuple(PROMETHEUS_TOOLS),
    on_progress: Callable[[str], None] | None = None,
    *,
    cache_dir: Path | None = None,
    timeout_s: float = _BUILD_TIMEOUT_S,
) -> dict[str, Path]:
    """Return the cached binaries ``names`` (keys of :data:`PROMETHEUS_TOOLS`),
    building the missing ones (``go install``, then promtool from its copy).

    The build writes into a temporary ``GOBIN`` inside the cache folder; each
    binary is renamed into place only when ``go`` succeeded, so a killed build
    is never used. A lock file makes a second process wait for the first
    one's build instead of building again. ``GOMODCACHE`` and ``GOPROXY`` are
    the caller's (Go's defaults: ``~/go/pkg/mod``, ``proxy.golang.org``).

    Args:
        names: the binaries wanted (``prometheus``, ``promtool``).
        on_progress: called with one human-readable line per step.
        cache_dir: cache root; ``None`` means :func:`cache_root`.
        timeout_s: seconds the build may take (about 2 minutes from an empty
            module cache on 2 cores; seconds with a warm one).

    Returns:
        ``{name: path of the executable}``.

    Raises:
        SandboxError: ``go`` is not on ``PATH``, the build failed or timed out
            (with the tail of its output); an unknown name.
    """
    unknown = [n for n in names if n not in PROMETHEUS_TOOLS]
    if unknown:
        raise SandboxError(f"not a Prometheus command quotaform builds: {', '.join(unknown)}")
    folder = prometheus_path(cache_dir).parent
    paths = {name: folder / name for name in names}
    if all(_executable(p) for p in paths.values()):
        return paths
    go = shutil.which("go")
    if go is None:
        absent = ", ".join(n for n, p in paths.items() if not _executable(p))
        raise SandboxError(
            f"Go (go) not found on PATH; quotaform builds Prometheus {PROMETHEUS_VERSION} "
            f"({absent}) from the Go module proxy once and caches it in {folder}. Install "
            f"Go 1.24+ (https://go.dev/dl/) or put Prometheus 3 binaries in {folder}."
        )
    folder.mkdir(parents=True, exist_ok=True)
    with _build_lock(folder):
        missing = [n for n, p in paths.items() if not _executable(p)]
        if not missing:  # built by another process while we waited
            return paths
        gobin = Path(tempfile.mkdtemp(prefix="gobin.partial-", dir=folder))
        try:
            _progress(
                on_progress,
                f"Building Prometheus {PROMETHEUS_VERSION} ({', '.join(missing)}) with go "
                "(once; about 2 minutes) ...",
            )
            started = time.monotonic()
            _build(go, gobin, missing, timeout_s)
            for name in missing:
                built = gobin / name
                if not (built.is_file() and os.access(built, os.X_OK)):
                    raise SandboxError(
                        f"The build finished but left no executable {name} in {gobin}."
                    )
                os.replace(built, paths[name])
                _stamp(paths[name]).write_text(_build_stamp(name), encoding="utf-8")
        finally:
            shutil.rmtree(gobin, ignore_errors=True)
    _progress(
        on_progress,
        f"Prometheus {PROMETHEUS_VERSION} ({', '.join(missing)}) built in "
        f"{time.monotonic() - started:.0f} s: {folder}",
    )
    return paths


def _build(go: str, gobin: Path, names: Sequence[str], timeout_s: float) -> None:
    """Build ``names`` into ``gobin``: ``go install`` for ``prometheus``, then
    ``promtool`` from a copy without its Kubernetes client
    (:mod:`.promtool_build`), which reuses the packages the first build
    compiled."""
    installed = [n for n in names if n != "promtool"]
    if installed:
        _go_install(go, gobin, installed, timeout_s)
    if "promtool" in names:
        build_promtool(go, gobin, PROMETHEUS_VERSION, _GO_ARGS, _GO_ENV, timeout_s)


def _go_install(go: str, gobin: Path, names: Sequence[str], timeout_s: float) -> None:
    packages = [f"{PROMETHEUS_TOOLS[name]}@{PROMETHEUS_VERSION}" for name in names]
    env = {"GOBIN": str(gobin), **_GO_ENV}
    # in gobin: outside any Go module of the caller
    run_go(go, ["install", *_GO_ARGS, *packages], gobin, env, timeout_s, what="Prometheus")


@contextlib.contextmanager
def _build_lock(folder: Path) -> Iterator[None]:
    with open(folder / ".build.lock", "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)  # released when the file closes
        yield


def _executable(path: Path) -> bool:
    """An executable built as this version of quotaform builds it (its stamp)."""
    if not (path.is_file() and os.access(path, os.X_OK)):
        return False
    try:
        return _stamp(path).read_text(encoding="utf-8") == _build_stamp(path.name)
    except OSError:
        return False


def _build_stamp(name: str) -> str:
    """What ``name`` is built with: the ``go install`` line (and for
    ``promtool`` what its copy changes)."""
    return _BUILD_STAMP + (PROMTOOL_CHANGE if name == "promtool" else "")


def _stamp(path: Path) -> Path:
    return path.with_name(f"{path.name}.build")


# -- the server -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PrometheusServer:
    """A running Prometheus started by :func:`start_prometheus`.

    Attributes:
        url: ``http://127.0.0.1:PORT`` (``https://`` with a TLS web config),
            the base of ``/api/v1/query_range``.
        port: the loopback port it listens on.
        pid: its process id, also its process group id.
        state_dir: the caller's folder holding ``prometheus.yml``, ``data/``
            (the TSDB) and ``prometheus.log``.
        log_path: its stdout and stderr.
        targets: the ``host:port`` targets of job ``kafka``.
    """

    url: str
    port: int
    pid: int
    state_dir: Path
    log_path: Path
    targets: tuple[str, ...]


def start_prometheus(
    targets: Sequence[str],
    *,
    state_dir: Path,
    scrape_interval_s: float = 1.0,
    rule_files: Sequence[Path] = (),
    web_config: Mapping[str, Any] | None = None,
    binary: Path | None = None,
    timeout_s: float = 60.0,
    on_progress: Callable[[str], None] | None = None,
) -> PrometheusServer:
    """Start Prometheus scraping ``targets`` (job ``kafka``, path ``/metrics``)
    on a free 127.0.0.1 port and return once it is ready. (Over 80 lines: a
    third of them this description; the code writes the configuration,
    starts the process and waits, in that order.)

    Args:
        targets: ``127.0.0.1:PORT`` of each exporter.
        state_dir: a folder for the config, TSDB and log (created; left in
            place by :func:`stop_prometheus` so the caller can read the log).
        scrape_interval_s: seconds between scrapes (the scrape timeout is the
            same), also the rules' default evaluation interval.
        rule_files: rule files Prometheus loads (``rule_files:``, absolute
            paths); a file it cannot load stops it from starting (the log says why).
        web_config: the content of Prometheus' ``--web.config.file``, e.g.
            ``{"basic_auth_users": {"alice": "<bcrypt hash>"}}`` (see
            :func:`basic_auth_web_config`) and/or ``{"tls_server_config":
            {"cert_file": ..., "key_file": ...}}`` (then ``url`` is https).
            With it readiness is read from the log, not probed over HTTP.
        binary: the executable; ``None``: :func:`ensure_prometheus` (may build it).
        timeout_s: seconds allowed until ready.
        on_progress: called with one human-readable line per step.

    Returns:
        The running server.

    Raises:
        SandboxError: no binary (see :func:`ensure_prometheus`), the server
            exited or was not ready in time (the tail of its log). A server
            that started but failed is stopped again.
    """
    executable = binary or ensure_prometheus(on_progress)
    if not targets:
        raise SandboxError("start_prometheus needs at least one scrape target")
    state_dir.mkdir(parents=True, exist_ok=True)
    config = state_dir / "prometheus.yml"
    config.write_text(_config_text(targets, scrape_interval_s, rule_files), encoding="utf-8")
    web_args: list[str] = []
    scheme = "http"
    if web_config is not None:
        web_file = state_dir / "web.yml"
        # JSON is YAML: Prometheus reads this file as YAML.
        web_file.write_text(json.dumps(dict(web_config), indent=2) + "\n", encoding="utf-8")
        web_args = [f"--web.config.file={web_file}"]
        if "tls_server_config" in web_config:
            scheme = "https"
    log_path = state_dir / "prometheus.log"
    for attempt in range(1, _START_ATTEMPTS + 1):
        port = free_port()
        command = [
            str(executable),
            f"--config.file={config}",
            f"--storage.tsdb.path={state_dir / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            *web_args,
        ]
        log_path.write_bytes(b"")
        pid = spawn_group(command, None, log_path)
        server = PrometheusServer(
            url=f"{scheme}://127.0.0.1:{port}",
            port=port,
            pid=pid,
            state_dir=state_dir,
            log_path=log_path,
            targets=tuple(targets),
        )
        _progress(on_progress, f"Started Prometheus (pid {pid}) on {server.url}")
        ready = _log_says_ready if web_config is not None else _ready_probe
        try:
            wait_for(
                functools.partial(ready, server),
                pid,
                log_path,
                time.monotonic() + timeout_s,
                "Prometheus",
            )
        except SandboxError:
            stop_prometheus(server)
            if "address already in use" in log_tail(log_path).lower() and attempt < _START_ATTEMPTS:
                _progress(on_progress, "Port taken meanwhile; retrying with a new port")
                continue
            raise
        except BaseException:
            stop_prometheus(server)
            raise
        return server
    raise AssertionError("unreachable")


def stop_prometheus(server: PrometheusServer, *, timeout_s: float = 10.0) -> None:
    """Stop ``server``'s process group (SIGTERM, SIGKILL after ``timeout_s``).

    A pid that is no longer that server (its config path not on the command
    line) is never signalled. The state folder is left in place.

    Raises:
        SandboxError: the process survived SIGKILL.
    """
    ours = server.pid in CHILDREN or str(server.state_dir) in (cmdline(server.pid) or "")
    if ours and is_alive(server.pid):
        terminate_group(server.pid, timeout_s)
    CHILDREN.pop(server.pid, None)


def query_range(
    url: str,
    query: str,
    *,
    start: float,
    end: float,
    step_s: float,
    timeout_s: float = 30.0,
    headers: Mapping[str, str] | None = None,
) -> bytes:
    """The raw body of ``GET {url}/api/v1/query_range`` (a loopback server only).

    Args:
        url: ``http://127.0.0.1:PORT`` (see :attr:`PrometheusServer.url`).
        query: PromQL, e.g. ``{__name__=~"kafka_server_produce_.*"}``.
        start, end: unix seconds.
        step_s: seconds between points.
        headers: extra request headers (e.g. ``Authorization``).

    Returns:
        The response body, a ``query_range`` JSON document, unchanged.

    Raises:
        SandboxError: not a loopback URL, no answer, or a non-200 status
            (with the start of Prometheus' error body).
    """
    if not url.startswith(("http://127.0.0.1:", "https://127.0.0.1:")):
        raise SandboxError(f"query_range is only sent to 127.0.0.1, not to {url}")
    params = urllib.parse.urlencode(
        {"query": query, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{step_s:g}s"}
    )
    request = urllib.request.Request(
        f"{url}/api/v1/query_range?{params}", headers=dict(headers or {})
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout_s) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()[:500].decode("utf-8", errors="replace")
        raise SandboxError(f"Prometheus query_range answered {exc.code}: {body}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise SandboxError(f"Prometheus query_range on {url} failed: {exc}") from exc


def prometheus_get(
    url: str,
    path: str,
    params: Mapping[str, str] | None = None,
    *,
    timeout_s: float = 30.0,
) -> bytes:
    """The raw body of ``GET {url}{path}?params`` on a loopback Prometheus:
    ``/api/v1/query``, ``/api/v1/alerts``, ``/api/v1/rules``, ``/metrics``
    (its own metrics, e.g. ``prometheus_rule_group_last_duration_seconds``).

    Raises:
        SandboxError: not a loopback URL, no answer, or a non-200 status
            (with the start of Prometheus' error body).
    """
    if not url.startswith(("http://127.0.0.1:", "https://127.0.0.1:")):
        raise SandboxError(f"requests are only sent to 127.0.0.1, not to {url}")
    query = f"?{urllib.parse.urlencode(dict(params))}" if params else ""
    try:
        with urllib.request.urlopen(f"{url}{path}{query}", timeout=timeout_s) as response:
            return bytes(response.read())
    except urllib.error.HTTPError as exc:
        body = exc.read()[:500].decode("utf-8", errors="replace")
        raise SandboxError(f"Prometheus {path} answered {exc.code}: {body}") from exc
    except (urllib.error.URLError, OSError) as exc:
        raise SandboxError(f"Prometheus {path} on {url} failed: {exc}") from exc


def basic_auth_web_config(users: Mapping[str, str], *, rounds: int = 10) -> dict[str, Any]:
    """A ``--web.config.file`` content requiring HTTP basic auth of ``users``
    (``{name: password}``), passwords stored as bcrypt hashes as Prometheus wants.

    Raises:
        SandboxError: the ``bcrypt`` package is not installed (``pip install bcrypt``;
            it is in quotaform's ``dev`` extra).
    """
    try:
        import bcrypt
    except ImportError as exc:
        raise SandboxError(
            "basic auth for Prometheus needs bcrypt hashes: pip install bcrypt"
        ) from exc
    return {
        "basic_auth_users": {
            name: bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds)).decode()
            for name, password in sorted(users.items())
        }
    }


def _config_text(
    targets: Sequence[str], scrape_interval_s: float, rule_files: Sequence[Path] = ()
) -> str:
    interval = f"{max(1, round(scrape_interval_s * 1000))}ms"
    config: dict[str, Any] = {
        "global": {
            "scrape_interval": interval,
            "scrape_timeout": interval,
            "evaluation_interval": interval,
        },
        "rule_files": [str(Path(f).resolve()) for f in rule_files],
        "scrape_configs": [
            {
                "job_name": "kafka",
                "metrics_path": "/metrics",
                "static_configs": [{"targets": list(targets)}],
            }
        ],
    }
    # JSON is YAML: no YAML writer needed for a generated file.
    return json.dumps(config, indent=2) + "\n"


def _ready_probe(server: PrometheusServer) -> bool:
    try:
        with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _log_says_ready(server: PrometheusServer) -> bool:
    try:
        return _READY_LINE in server.log_path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False


def _progress(on_progress: Callable[[str], None] | None, message: str) -> None:
    log.info("%s", message)
    if on_progress is not None:
        on_progress(message)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m quotaform.sandbox.prometheus``: build (or find) the cached
    binaries (``prometheus`` and ``promtool``, one ``go install``), saying so
    on standard error; exit 0 when they are there, 1 if not. ``scripts/test``
    starts it beside the install so the build is done by the time the live
    tests need it (they wait on the same lock).

    ``--sandbox NAME``: then start a Prometheus scraping the JMX exporters of
    sandbox ``NAME`` (``quotaform sandbox up --exporter RULES``) every
    ``--scrape-interval`` seconds, print its URL on standard output (for
    ``quotaform analyze --prometheus``) and run until interrupted (Ctrl-C,
    SIGTERM); its TSDB and log are under ``<cache>/sandboxes/NAME.prometheus``.
    """
    import argparse
    import signal
    import sys

    parser = argparse.ArgumentParser(
        prog="python -m quotaform.sandbox.prometheus",
        description=f"Build Prometheus {PROMETHEUS_VERSION} and promtool once (cached); "
        "with --sandbox, run a Prometheus scraping a sandbox broker's JMX exporter.",
    )
    parser.add_argument("--sandbox", metavar="NAME", help="scrape this sandbox's exporters")
    parser.add_argument(
        "--scrape-interval", type=float, default=2.0, metavar="SECONDS",
        help="seconds between scrapes (default 2)",
    )  # fmt: skip
    args = parser.parse_args(argv)

    def say(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    try:
        found = ensure_prometheus_tools(on_progress=say)
        say(f"Prometheus {PROMETHEUS_VERSION}: {', '.join(map(str, found.values()))}")
        if args.sandbox is None:
            return 0
        server = _serve_sandbox(args.sandbox, args.scrape_interval, found["prometheus"], say)
    except SandboxError as exc:
        say(f"Error: {exc}")
        return 1
    stop = {"signal": 0}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["signal"] = signum

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(server.url, flush=True)
    try:
        while not stop["signal"] and is_alive(server.pid):
            time.sleep(0.2)
    finally:
        stop_prometheus(server)
    if not stop["signal"]:
        say(f"Error: Prometheus exited; its log: {server.log_path}")
        return 1
    say(f"Stopped Prometheus {server.url}")
    return 0


def _serve_sandbox(
    name: str, interval_s: float, binary: Path, say: Callable[[str], None]
) -> PrometheusServer:
    """Start a Prometheus scraping sandbox ``name``'s exporters.

    Raises:
        SandboxError: the sandbox does not run, or runs no exporter.
    """
    from quotaform.sandbox.broker import broker_status, default_state_dir
    from quotaform.sandbox.exporter import exporter_url

    broker = broker_status(name=name).broker
    if broker is None:
        raise SandboxError(f"sandbox {name!r} is not running (quotaform sandbox up --name {name})")
    ports = [n.prometheus_port for n in broker.brokers if n.prometheus_port is not None]
    if not ports:
        raise SandboxError(
            f"sandbox {name!r} runs no JMX exporter: stop it (quotaform sandbox down --name "
            f"{name}) and start it with --exporter RULES"
        )
    for port in ports:
        say(f"Scraping {exporter_url(port)} every {interval_s:g} s")
    state = default_state_dir() / f"{name}.prometheus"
    shutil.rmtree(state, ignore_errors=True)
    return start_prometheus(
        [f"127.0.0.1:{port}" for port in ports],
        state_dir=state,
        scrape_interval_s=interval_s,
        binary=binary,
        on_progress=say,
    )


if __name__ == "__main__":
    raise SystemExit(main())
