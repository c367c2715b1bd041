"""Sandbox failure paths without a broker: missing tools, bad cache, stale state."""

from __future__ import annotations

import json
import os
import stat
import tempfile
from pathlib import Path

import pytest

from quotaform.errors import SandboxError
from quotaform.sandbox import SandboxBroker, SandboxState, broker_status, stop_broker
from quotaform.sandbox.broker import new_cluster_id, start_broker
from quotaform.sandbox.jars import (
    DEFAULT_KAFKA_VERSION,
    complete_marker,
    ensure_kafka_jars,
    find_java,
    find_maven,
    parse_java_major,
    run_kafka_tool,
)


def _script(directory: Path, name: str, body: str) -> Path:
    path = directory / name
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


@pytest.fixture
def empty_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """PATH holds one empty directory (add fake tools to it); JAVA_HOME unset."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    return bin_dir


@pytest.fixture
def cold_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cache = tmp_path / "cache"
    monkeypatch.setenv("QUOTAFORM_CACHE_DIR", str(cache))
    return cache


def test_missing_maven_says_how_to_install_it(empty_path: Path, cold_cache: Path) -> None:
    with pytest.raises(SandboxError, match=r"Maven \(mvn\) not found.*apt-get install maven"):
        ensure_kafka_jars(DEFAULT_KAFKA_VERSION)
    with pytest.raises(SandboxError, match="mvn"):
        find_maven()


def test_failing_maven_reports_its_output_and_the_coordinates(
    empty_path: Path, cold_cache: Path
) -> None:
    _script(empty_path, "mvn", "echo '[ERROR] Could not resolve dependencies: boom'\nexit 1\n")
    with pytest.raises(SandboxError) as caught:
        ensure_kafka_jars("4.99.0")
    message = str(caught.value)
    assert "org.apache.kafka:kafka_2.13:4.99.0" in message
    assert "Could not resolve dependencies: boom" in message
    assert not (cold_cache / "kafka-4.99.0" / "libs").exists()
    assert not list((cold_cache / "kafka-4.99.0").glob("libs.partial-*"))


def test_warm_cache_needs_no_maven(empty_path: Path, cold_cache: Path) -> None:
    libs = cold_cache / "kafka-9.9.9" / "libs"
    libs.mkdir(parents=True)
    (libs / ".complete").write_text(complete_marker("9.9.9"))
    assert ensure_kafka_jars("9.9.9") == libs


def test_a_cache_of_an_older_jar_set_is_fetched_again(empty_path: Path, cold_cache: Path) -> None:
    # A cache written before kafka-tools joined the set (its marker is the bare version).
    old = cold_cache / "kafka-9.9.9" / "libs"
    old.mkdir(parents=True)
    (old / ".complete").write_text("9.9.9\n")
    (old / "kafka_2.13-9.9.9.jar").write_bytes(b"old")
    _script(
        empty_path,
        "mvn",
        'for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";;'
        " esac; done\n"
        ': > "$out/kafka_2.13-9.9.9.jar"; : > "$out/kafka-tools-9.9.9.jar"\n',
    )
    libs = ensure_kafka_jars("9.9.9")
    assert sorted(p.name for p in libs.iterdir()) == [
        ".complete",
        "kafka-tools-9.9.9.jar",
        "kafka_2.13-9.9.9.jar",
    ]
    assert (libs / ".complete").read_text() == complete_marker("9.9.9")
    pom = (cold_cache / "kafka-9.9.9" / "pom.xml").read_text()
    assert "<artifactId>kafka-tools</artifactId>" in pom


def test_unfinished_download_is_replaced_not_reused(empty_path: Path, cold_cache: Path) -> None:
    half = cold_cache / "kafka-9.9.9" / "libs"
    half.mkdir(parents=True)
    (half / "truncated.jar").write_bytes(b"")
    _script(
        empty_path,
        "mvn",
        'for a in "$@"; do case "$a" in -DoutputDirectory=*) out="${a#-DoutputDirectory=}";;'
        " esac; done\n"
        ': > "$out/kafka_2.13-9.9.9.jar"\n',  # PATH is empty: builtins only
    )
    libs = ensure_kafka_jars("9.9.9")
    assert sorted(p.name for p in libs.iterdir()) == [".complete", "kafka_2.13-9.9.9.jar"]
    pom = (cold_cache / "kafka-9.9.9" / "pom.xml").read_text()
    assert "<artifactId>kafka_2.13</artifactId><version>9.9.9</version>" in pom


def test_bad_version_string_is_refused(cold_cache: Path) -> None:
    with pytest.raises(SandboxError, match="Invalid Kafka version"):
        ensure_kafka_jars("4.3.1; rm -rf /")


def test_missing_java_says_how_to_install_it(empty_path: Path) -> None:
    with pytest.raises(SandboxError, match=r"Java \(java\) not found.*17.*JAVA_HOME"):
        find_java()


def test_old_java_is_refused(empty_path: Path) -> None:
    _script(empty_path, "java", "echo 'java version \"1.8.0_292\"' >&2\n")
    with pytest.raises(SandboxError, match=r"is Java 8; Kafka 4 needs Java 17 or newer"):
        find_java()


def test_java_home_is_honoured(
    empty_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "jdk"
    (home / "bin").mkdir(parents=True)
    java = _script(home / "bin", "java", "echo 'openjdk version \"21.0.2\" 2024-01-16' >&2\n")
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert find_java() == str(java)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "nowhere"))
    with pytest.raises(SandboxError, match="JAVA_HOME is set to"):
        find_java()


@pytest.mark.parametrize(
    ("output", "major"),
    [
        ('openjdk version "17.0.15" 2025-04-15', 17),
        ('java version "1.8.0_292"', 8),
        ('openjdk version "21" 2023-09-19', 21),
        ('openjdk version "23-ea" 2024-09-17', 23),
        ("no version here", None),
    ],
)
def test_parse_java_major(output: str, major: int | None) -> None:
    assert parse_java_major(output) == major


def test_start_without_java_fails_cleanly(empty_path: Path, tmp_path: Path) -> None:
    states = tmp_path / "states"
    with pytest.raises(SandboxError, match="Java"):
        start_broker(name="nojava", state_dir=states)
    assert not (states / "nojava.json").exists()


def test_invalid_sandbox_name_is_refused(tmp_path: Path) -> None:
    with pytest.raises(SandboxError, match="Invalid sandbox name"):
        broker_status(name="../etc", state_dir=tmp_path)


def _record(states: Path, *, pid: int) -> SandboxBroker:
    data_dir = Path(tempfile.mkdtemp(prefix="quotaform-sandbox-unit-"))
    broker = SandboxBroker(
        name="unit",
        version=DEFAULT_KAFKA_VERSION,
        bootstrap="127.0.0.1:1",
        port=1,
        controller_port=2,
        pid=pid,
        data_dir=data_dir,
        log_path=data_dir / "broker.log",
        cluster_id=new_cluster_id(),
    )
    states.mkdir(parents=True, exist_ok=True)
    (states / "unit.json").write_text(json.dumps(broker.to_json()))
    return broker


def _dead_pid() -> int:
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    return pid


def test_stale_state_is_cleaned_up_by_status(tmp_path: Path) -> None:
    broker = _record(tmp_path, pid=_dead_pid())
    status = broker_status(name="unit", state_dir=tmp_path)
    assert status.state is SandboxState.STOPPED and status.broker is None
    assert not (tmp_path / "unit.json").exists()
    assert not broker.data_dir.exists()


def test_down_never_signals_a_pid_that_is_not_the_sandbox(tmp_path: Path) -> None:
    # Our own pid is alive but is no kafka.Kafka process: stop must not kill it.
    broker = _record(tmp_path, pid=os.getpid())
    assert stop_broker(name="unit", state_dir=tmp_path) == broker
    assert not (tmp_path / "unit.json").exists()
    assert not broker.data_dir.exists()
    assert stop_broker(name="unit", state_dir=tmp_path) is None


def test_unreadable_state_file_says_what_to_do(tmp_path: Path) -> None:
    (tmp_path / "unit.json").write_text("{not json")
    with pytest.raises(SandboxError, match="delete the file"):
        broker_status(name="unit", state_dir=tmp_path)


def test_cluster_ids_look_like_kafkas() -> None:
    for _ in range(200):
        cid = new_cluster_id()
        assert len(cid) == 22 and not cid.startswith("-")
        assert set(cid) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


_FAKE_JAVA = """\
for a in "$@"; do
  case "$a" in
    -version) echo 'openjdk version "17.0.15" 2025-04-15' >&2; exit 0;;
    -XX:ArchiveClassesAtExit=*) {record};;
    -XX:SharedArchiveFile=*) echo "shared"; exit 0;;
  esac
done
echo "unshared"
"""


@pytest.mark.parametrize("supported", [True, False])
def test_tools_record_a_class_data_archive_or_run_without(
    empty_path: Path, cold_cache: Path, supported: bool
) -> None:
    libs = cold_cache / "kafka-9.9.9" / "libs"
    libs.mkdir(parents=True)
    (libs / ".complete").write_text(complete_marker("9.9.9"))
    if supported:
        record = ': > "${a#-XX:ArchiveClassesAtExit=}"; echo recorded; exit 0'
    else:  # a JDK without a base CDS archive refuses to start with the flag
        record = "echo 'Error occurred during initialization of VM' >&2; exit 1"
    _script(empty_path, "java", _FAKE_JAVA.replace("{record}", record))

    first = run_kafka_tool("kafka.Tool", ["x"], version="9.9.9")
    second = run_kafka_tool("kafka.Tool", ["x"], version="9.9.9")

    assert first.returncode == 0 and second.returncode == 0
    cds = sorted(p.name for p in (cold_cache / "kafka-9.9.9" / "cds").iterdir())
    if supported:
        assert (first.stdout, second.stdout) == ("recorded\n", "shared\n")
        assert len(cds) == 1 and cds[0].startswith("kafka.Tool-") and cds[0].endswith(".jsa")
    else:
        assert (first.stdout, second.stdout) == ("unshared\n", "unshared\n")
        assert len(cds) == 1 and cds[0].endswith(".unsupported")


def test_extra_broker_properties_are_appended_and_line_breaks_refused(tmp_path: Path) -> None:
    from quotaform.sandbox.broker.config import _add_properties
    from quotaform.sandbox.jars import kafka_java_command

    properties = tmp_path / "server.properties"
    properties.write_text("node.id=1\n", encoding="utf-8")
    _add_properties(properties, {"client.quota.callback.class": "a.B", "quota.window.num": "2"})
    assert properties.read_text(encoding="utf-8") == (
        "node.id=1\nclient.quota.callback.class=a.B\nquota.window.num=2\n"
    )
    for bad in ({"x": "1\nnode.id=2"}, {"a\rb": "1"}, {" ": "1"}):
        with pytest.raises(SandboxError, match="line break"):
            _add_properties(properties, bad)
    assert properties.read_text(encoding="utf-8").count("\n") == 3  # nothing half-written
    command = kafka_java_command("java", tmp_path, "kafka.Kafka", [], classpath=[Path("/cb")])
    assert command[1:3] == ["-cp", f"{tmp_path}/*{os.pathsep}/cb"]


# ----------------------------------------------------------- build and fetch tools


def test_a_build_tool_that_fails_times_out_or_is_missing_is_one_sandbox_error(
    tmp_path: Path,
) -> None:
    from quotaform.sandbox.processes import run_build_tool

    def run(cmd: list[str], timeout_s: float = 10) -> str:
        return run_build_tool(
            cmd,
            doing="Building x",
            advice="Check y.",
            timeout_advice="check z.",
            timeout_s=timeout_s,
        )

    assert run(["sh", "-c", "echo built"]) == "built\n"
    with pytest.raises(SandboxError) as failed:
        run(["sh", "-c", "echo one; echo two >&2; exit 3"])
    assert str(failed.value).startswith("Building x failed (exit 3): sh -c ")
    assert "Check y. Output (tail):\none\ntwo" in str(failed.value)
    with pytest.raises(
        SandboxError, match=r"Building x \(sleep 5\) did not finish within 0.2 s; check z"
    ):
        run(["sleep", "5"], timeout_s=0.2)
    with pytest.raises(SandboxError, match=r"Could not run .*no-such-tool"):
        run([str(tmp_path / "no-such-tool")])
