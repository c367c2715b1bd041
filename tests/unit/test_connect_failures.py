"""Connection failures are named at once: the bootstrap probe against local
fake servers (loopback only; DNS failure with a stubbed resolver, so no name
is ever looked up), and the warning for secret files others can read."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.wire.connection import load_connection_settings
from quotaform.cluster.wire.probe import check_bootstrap, probe_server
from quotaform.errors import ConnectionSettingsError


def _serve(behaviour: str) -> Iterator[int]:
    """A loopback server that, per connection: sends garbage, closes at
    once, or stays silent."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    held: list[socket.socket] = []

    def loop() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            if behaviour == "garbage":
                conn.recv(1024)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")
                conn.close()
            elif behaviour == "close":
                conn.close()
            else:
                held.append(conn)

    threading.Thread(target=loop, daemon=True).start()
    yield listener.getsockname()[1]
    listener.close()
    for conn in held:
        conn.close()


@pytest.fixture
def garbage() -> Iterator[int]:
    yield from _serve("garbage")


@pytest.fixture
def closing() -> Iterator[int]:
    yield from _serve("close")


@pytest.fixture
def silent() -> Iterator[int]:
    yield from _serve("silent")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_port_is_named() -> None:
    port = _closed_port()
    failure = probe_server(f"127.0.0.1:{port}", timeout_s=2)
    assert failure is not None and failure.kind == "refused"
    assert failure.message == f"127.0.0.1:{port}: connection refused"


def test_a_port_that_answers_but_is_not_kafka_says_so(garbage: int, closing: int) -> None:
    for port in (garbage, closing):
        failure = probe_server(f"127.0.0.1:{port}", timeout_s=2)
        assert failure is not None and failure.kind == "not-kafka", failure
        assert "answers, but not as Kafka" in failure.message


def test_a_silent_port_times_out_within_the_budget(silent: int) -> None:
    start = time.monotonic()
    failure = probe_server(f"127.0.0.1:{silent}", timeout_s=0.5)
    assert failure is not None and failure.kind == "timeout"
    assert time.monotonic() - start < 5


def test_an_unresolvable_host_says_cannot_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_such_host(*args: object, **kwargs: object) -> None:
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_such_host)
    failure = probe_server("kafka.example.invalid:9092", timeout_s=1)
    assert failure is not None and failure.kind == "resolve"
    assert failure.message == (
        "cannot resolve host 'kafka.example.invalid' (Name or service not known)"
    )


def test_every_server_is_tried_and_every_cause_listed(garbage: int) -> None:
    refused = _closed_port()
    with pytest.raises(ConnectionSettingsError) as info:
        check_bootstrap(f"127.0.0.1:{refused},127.0.0.1:{garbage}", timeout_s=1)
    text = str(info.value)
    assert "connection refused" in text and "not as Kafka" in text


def test_the_cli_names_a_refused_port_at_once(tmp_path: Path) -> None:
    manifest = tmp_path / "m.yaml"
    manifest.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\n"
        "spec:\n  scope: [{shape: user}]\n",
        encoding="utf-8",
    )
    port = _closed_port()
    start = time.monotonic()
    result = CliRunner().invoke(
        app, ["plan", str(manifest), "--bootstrap-server", f"127.0.0.1:{port}"]
    )
    assert result.exit_code == 1
    assert f"Error: cannot reach Kafka: 127.0.0.1:{port}: connection refused" in result.output
    assert "ERROR" not in result.output and "Traceback" not in result.output
    assert time.monotonic() - start < 10, "no bootstrap retries for a refused port"


@pytest.mark.parametrize(("mode", "warned"), [(0o600, False), (0o640, True), (0o644, True)])
def test_a_command_config_with_a_secret_readable_by_others_warns(
    tmp_path: Path, mode: int, warned: bool
) -> None:
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="alice" password="s3cret-value";\n',
        encoding="utf-8",
    )
    config.chmod(mode)
    settings = load_connection_settings(
        bootstrap_server="127.0.0.1:1", command_config=config, env={}
    )
    if warned:
        assert settings.warnings == (
            f"{config} holds a secret but is readable by its group or others "
            f"(mode {mode:04o}): restrict it with chmod 600 {config}",
        )
    else:
        assert settings.warnings == ()
    assert all("s3cret" not in w for w in settings.warnings)


def test_a_command_config_without_a_secret_never_warns(tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("client.id=x\n", encoding="utf-8")
    config.chmod(0o644)
    settings = load_connection_settings(
        bootstrap_server="127.0.0.1:1", command_config=config, env={}
    )
    assert settings.warnings == ()


def test_a_kafka_error_wrapped_in_its_own_class_is_named_once() -> None:
    import kafka.errors as kerrors

    from quotaform.cluster.wire.codes import error_text

    inner = kerrors.SaslAuthenticationFailedError("Authentication failed during authentication")
    wrapped = kerrors.SaslAuthenticationFailedError(str(inner))
    assert error_text(wrapped) == (
        "[Error 58] SaslAuthenticationFailedError: Authentication failed during authentication"
    )
    assert error_text(inner) == str(inner)
