"""Kafka's own ConfigCommand for the tests, warm: one JVM per Kafka version
and pytest process (``tests/fixtures/configcommand/ConfigCommandServer.java``)
runs ``kafka.admin.ConfigCommand``'s ``main`` once per call, so a call costs
the describe or alter, not a JVM start (about 0.7 s of CPU each: the tests
make hundreds).

:func:`run_config_command` takes and returns what
:func:`quotaform.sandbox.run_config_command` does (the product's, one JVM
per call, which ``tests/integration/test_sandbox.py`` tests): the same class
and arguments, its standard output and error, its exit code (``Exit.exit``
becomes a return), a :class:`~quotaform.errors.SandboxError` on a non-zero one.
Arguments holding a tab or a line break go to the product's function.
"""

from __future__ import annotations

import atexit
import subprocess
import tempfile
import threading
from collections.abc import Sequence
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox import DEFAULT_KAFKA_VERSION
from quotaform.sandbox import run_config_command as run_in_own_jvm
from quotaform.sandbox.jars import (
    FAST_START_JVM_OPTIONS,
    class_data_archive,
    ensure_kafka_jars,
    find_java,
    kafka_java_command,
)
from tests.javaclasses import compiled_classes

__all__ = ["run_config_command"]

SOURCE = Path(__file__).resolve().parent / "fixtures" / "configcommand" / "ConfigCommandServer.java"
SERVER = "quotaform.testing.ConfigCommandServer"
CONFIG_COMMAND = "kafka.admin.ConfigCommand"


class _Server:
    """One ConfigCommandServer JVM; one request at a time."""

    def __init__(self, version: str) -> None:
        self.version = version
        self.lock = threading.Lock()
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = Path(tempfile.mkstemp(prefix="quotaform-configcommand-", suffix=".log")[1])

    def _start(self) -> subprocess.Popen[bytes]:
        java = find_java()
        libs = ensure_kafka_jars(self.version)
        classes = compiled_classes(
            SOURCE, SERVER, self.version, folder="test-classes", tag="configcommand"
        )
        options = ["-Xmx256m", *FAST_START_JVM_OPTIONS]
        archive = class_data_archive(java, libs, CONFIG_COMMAND)  # recorded by the product's runs
        if archive.is_file():
            options.append(f"-XX:SharedArchiveFile={archive}")
        cmd = kafka_java_command(java, libs, SERVER, [], jvm_options=options, classpath=[classes])
        with self.log.open("ab") as log:
            return subprocess.Popen(
                cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, close_fds=True
            )

    def run(self, args: Sequence[str], timeout_s: float) -> tuple[int, str, str]:
        with self.lock:
            if self.proc is None or self.proc.poll() is not None:
                self.proc = self._start()
            proc = self.proc
            assert proc.stdin is not None and proc.stdout is not None
            watchdog = threading.Timer(timeout_s, proc.kill)
            watchdog.start()
            try:
                proc.stdin.write(("\t".join(args) + "\n").encode())
                proc.stdin.flush()
                header = proc.stdout.readline().decode().split()
                if len(header) != 4 or header[0] != "RESULT":
                    raise BrokenPipeError(f"answered {header!r}")
                code, out_len, err_len = map(int, header[1:])
                out = proc.stdout.read(out_len).decode()
                err = proc.stdout.read(err_len).decode()
            except (BrokenPipeError, OSError, ValueError) as exc:
                proc.kill()
                self.proc = None
                timed_out = not watchdog.is_alive()
                reason = f"did not finish within {timeout_s:g} s" if timed_out else str(exc)
                tail = self.log.read_text(encoding="utf-8", errors="replace")[-2000:]
                raise SandboxError(
                    f"the warm ConfigCommand JVM failed ({reason}):\n{tail}"
                ) from None
            finally:
                watchdog.cancel()
            return code, out, err

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # the server ends at the end of its input
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
        self.log.unlink(missing_ok=True)


_servers: dict[str, _Server] = {}
_servers_lock = threading.Lock()


def _server(version: str) -> _Server:
    with _servers_lock:
        if version not in _servers:
            _servers[version] = _Server(version)
        return _servers[version]


@atexit.register
def _close_servers() -> None:
    for server in _servers.values():
        server.close()


def run_config_command(
    args: Sequence[str],
    *,
    bootstrap: str,
    version: str = DEFAULT_KAFKA_VERSION,
    timeout_s: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """``kafka-configs --bootstrap-server <bootstrap> <args...>``, as
    :func:`quotaform.sandbox.run_config_command` runs it, in the warm JVM.

    Raises:
        SandboxError: the JVM failed or timed out, or the tool's non-zero exit
            (the message carries the command line and the tool's stderr).
    """
    full = ["--bootstrap-server", bootstrap, *args]
    if any("\t" in arg or "\n" in arg or "\r" in arg for arg in full):
        return run_in_own_jvm(args, bootstrap=bootstrap, version=version, timeout_s=timeout_s)
    code, out, err = _server(version).run(full, timeout_s)
    if code != 0:
        shown = "kafka-configs " + " ".join(full)
        detail = (err.strip() or out.strip() or "(no output)")[-4000:]
        raise SandboxError(f"{shown} failed (exit {code}):\n{detail}")
    return subprocess.CompletedProcess(["kafka-configs", *full], code, out, err)
