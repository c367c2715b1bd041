"""A sandbox of several brokers and controllers, and apply's read-back on
every broker, against real KRaft nodes: the session's cluster of 3 brokers and
3 controllers (``kafka_cluster``), plus the docs' own ``sandbox up | status |
down`` commands, run as shown. Faults mid-apply (the connected broker
killed, another broker stopped, the active controller killed) are the small
CI version of scripts/kill_mid_apply.py; every node broken is restored."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.wire import QuotaAlteration, load_connection_settings, open_admin
from quotaform.errors import EXIT_NOT_CONVERGED, EXIT_SANDBOX_NOT_RUNNING
from quotaform.errors import EXIT_SANDBOX_UNRESPONSIVE as EXIT_DEGRADED
from quotaform.sandbox import (
    SandboxBroker,
    active_controller,
    broker_status,
    kill_node,
    parse_quota_describe,
    stop_broker,
    suspended_node,
)
from quotaform.sandbox.broker import default_state_dir
from quotaform.sandbox.quorum import describe_cluster, describe_quorum
from quotaform.words import per_broker_sentence, per_broker_text
from tests.configcommand import run_config_command
from tests.integration.helpers import eventually, quota, write_manifest

# Under pytest-xdist one worker runs the whole module: its module fixture starts once.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("cluster")]

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "kill_mid_apply.py"
DOCS = ROOT / "docs" / "sandbox.md"
#: Every user this module creates on the shared cluster starts with it.
PREFIX = f"mn{os.getpid()}-"


@pytest.fixture(scope="module")
def cluster(kafka_cluster: SandboxBroker, restore_cluster: Any) -> Iterator[SandboxBroker]:
    """The session's cluster; this module's users are removed at its end."""
    yield kafka_cluster
    restore_cluster(kafka_cluster)
    admin = open_admin(
        load_connection_settings(bootstrap_server=kafka_cluster.bootstrap, env={}),
        read_only=False,
    )
    try:
        users = admin.describe_client_quotas([], strict=False)
        mine = [
            QuotaAlteration(e, dict.fromkeys(q))
            for e, q in users.items()
            if "user" in e.types and (e.name("user") or "").startswith(PREFIX)
        ]
        if mine:
            admin.alter_client_quotas(mine, validate_only=False)
    finally:
        admin.close()


@pytest.fixture
def restored(cluster: SandboxBroker, restore_cluster: Any) -> Iterator[SandboxBroker]:
    """The cluster, with every node broken by the test restarted after it."""
    yield cluster
    restore_cluster(cluster)


def users_on_each_broker(cluster: SandboxBroker, prefix: str) -> dict[int, dict[str, dict]]:
    """Kafka's ConfigCommand on each broker's own listener (it can reach no
    other broker), side by side: ``{node id: {user: quotas}}``."""
    views: dict[int, dict[str, dict]] = {}

    def read(node_id: int, address: str) -> None:
        proc = run_config_command(
            ["--describe", "--entity-type", "users"], bootstrap=address, version=cluster.version
        )
        views[node_id] = {
            label.split("'")[1]: quotas
            for label, quotas in parse_quota_describe(proc.stdout).items()
            if label.startswith(f"user-principal '{prefix}")
        }

    threads = [
        threading.Thread(target=read, args=(n.node_id, n.solo_address)) for n in cluster.brokers
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return dict(sorted(views.items()))


def manifest(tmp_path: Path, prefix: str, rate: str = "1MiB") -> Path:
    return write_manifest(
        tmp_path / "m.yaml",
        "multinode",
        [quota({"user": f"{prefix}{n}"}, producer_byte_rate=rate) for n in ("a", "b", "c")],
        scope=[{"shape": "user", "prefixes": {"user": [prefix]}}],
    )


def test_the_cluster_registers_three_brokers_under_a_three_voter_quorum(cluster) -> None:  # type: ignore[no-untyped-def]
    view = describe_cluster(cluster.bootstrap, timeout_ms=10_000)
    assert view is not None and view.cluster_id == cluster.cluster_id
    assert view.unfenced == {1, 2, 3} and view.fenced == frozenset()
    quorum = describe_quorum(cluster.bootstrap, timeout_ms=10_000)
    assert quorum is not None and set(quorum.voters) == {1001, 1002, 1003}
    assert quorum.leader_id == active_controller(name=cluster.name)
    # Each broker's own listener shows a cluster of that broker alone, so a
    # tool bootstrapped there can only ask that broker.
    for node in cluster.brokers:
        solo = describe_cluster(node.solo_address, timeout_ms=10_000)
        assert solo is not None and solo.unfenced == {node.node_id}


def test_sandbox_up_and_status_show_every_node_and_the_state_records_them(cluster) -> None:  # type: ignore[no-untyped-def]
    runner = CliRunner()
    up = runner.invoke(
        app, ["sandbox", "up", "--name", cluster.name, "--brokers", "3", "--controllers", "3"]
    )
    assert up.exit_code == 0, up.output
    assert up.stdout == cluster.bootstrap + "\n"  # the bootstrap list, alone on stdout
    assert len(cluster.bootstrap.split(",")) == 3

    status = runner.invoke(app, ["sandbox", "status", "--name", cluster.name])
    assert status.exit_code == 0, status.output
    leader = active_controller(name=cluster.name)
    assert f"is running: {cluster.bootstrap}" in status.stdout
    assert f"3 brokers, 3 controllers (active controller: {leader})" in status.stdout
    for node in cluster.nodes:
        assert f"  {node.label}: {node.address}" in status.stdout
        assert f"pid {node.pid}, running" in status.stdout

    record = json.loads((default_state_dir() / f"{cluster.name}.json").read_text())
    assert [(n["node_id"], n["roles"]) for n in record["nodes"]] == [
        (1, ["broker"]),
        (2, ["broker"]),
        (3, ["broker"]),
        (1001, ["controller"]),
        (1002, ["controller"]),
        (1003, ["controller"]),
    ]
    assert all(Path(n["data_dir"]).is_dir() and n["pid"] > 0 for n in record["nodes"])

    again = runner.invoke(app, ["sandbox", "up", "--name", cluster.name])
    assert again.exit_code == 0, again.output  # found by name, whatever its size
    assert again.stdout == cluster.bootstrap + "\n"
    other = runner.invoke(app, ["sandbox", "up", "--name", cluster.name, "--brokers", "1"])
    assert other.exit_code == 1
    assert "already runs with 3 brokers and 3 controllers" in other.output


def documented_sandbox_commands() -> list[str]:
    """The shell block under "A sandbox of several nodes" in the docs."""
    text = DOCS.read_text(encoding="utf-8")
    start = text.index("### A sandbox of several nodes")
    block = re.search(r"```bash\n(.*?)```", text[start:], re.S)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


def bash(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` in bash with this Python's ``quotaform`` on PATH."""
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))
    return subprocess.run(
        ["bash", "-c", script], env=env, capture_output=True, text=True, timeout=300, check=False
    )


def test_the_documented_sandbox_commands_run_as_shown() -> None:
    up, status, down = documented_sandbox_commands()
    assert "sandbox up --name three --brokers 3 --controllers 3" in up
    name = "three"
    assert broker_status(name=name).broker is None, "a sandbox 'three' runs already"
    try:
        first = bash(f'{up}\n{status}\necho "BOOTSTRAP=$QUOTAFORM_BOOTSTRAP_SERVER"')
        assert first.returncode == 0, first.stderr[-3000:]
        sandbox = broker_status(name=name).broker
        assert sandbox is not None
        assert f"BOOTSTRAP={sandbox.bootstrap}\n" in first.stdout
        assert re.fullmatch(r"(127\.0\.0\.1:\d+,){2}127\.0\.0\.1:\d+", sandbox.bootstrap)
        assert [(n.node_id, n.roles) for n in sandbox.nodes] == [
            (1, ("broker",)),
            (2, ("broker",)),
            (3, ("broker",)),
            (1001, ("controller",)),
            (1002, ("controller",)),
            (1003, ("controller",)),
        ]
        assert "is running" in first.stdout
        assert first.stdout.count(", running, log ") == 6

        kill_node(name=name, node_id=1002)
        degraded = bash(status)
        assert degraded.returncode == EXIT_DEGRADED, degraded.stdout
        assert f"is degraded: {sandbox.bootstrap}" in degraded.stdout
        assert re.search(r"  controller 1002: .*, down, log", degraded.stdout), degraded.stdout

        again = bash(up)  # restarts the killed controller on its own log dir
        assert again.returncode == 0, again.stderr[-3000:]
        assert "runs without controller 1002; restarting" in again.stderr
        restarted = broker_status(name=name)
        assert restarted.state.value == "running" and restarted.broker is not None
        assert restarted.broker.node(1002).pid != sandbox.node(1002).pid

        gone = bash(f"{down}\n{status}")
        assert gone.returncode == EXIT_SANDBOX_NOT_RUNNING, gone.stderr[-3000:]
        assert f"Sandbox {name!r} is not running." in gone.stdout
        assert not sandbox.data_dir.exists()
        assert not (default_state_dir() / f"{name}.json").exists()
        for node in restarted.broker.nodes:
            assert not Path(f"/proc/{node.pid}").exists() or _zombie(node.pid)
    finally:
        stop_broker(name=name)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_apply_is_confirmed_on_every_broker(cluster, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    prefix = f"{PREFIX}every-"
    result = CliRunner().invoke(
        app,
        [
            "apply",
            str(manifest(tmp_path, prefix)),
            "--bootstrap-server",
            cluster.bootstrap,
            "--auto-approve",
            "-o",
            "json",
        ],
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout[result.stdout.rindex('{\n  "format_version"') :])
    assert doc["status"] == "applied"
    assert [(b["node_id"], b["address"], b["state"]) for b in doc["brokers"]] == [
        (n.node_id, n.address, "matched") for n in cluster.brokers
    ]
    assert doc["rpc_counts"]["DescribeCluster"] == 1
    expected = {f"{prefix}{n}": {"producer_byte_rate": 1048576.0} for n in "abc"}
    assert users_on_each_broker(cluster, prefix) == {1: expected, 2: expected, 3: expected}


def test_explain_and_the_probe_view_say_the_limit_is_per_broker_on_each_of_3(  # type: ignore[no-untyped-def]
    cluster, tmp_path: Path
) -> None:
    """Every broker keeps its own sensor per quota group (ClientQuotaManager):
    live explain, plan's and drift's probe views name the 3 brokers DescribeCluster lists."""
    prefix = f"{PREFIX}probe-"
    path = write_manifest(
        tmp_path / "probe.yaml",
        "multinode",
        [quota({"user": f"{prefix}a"}, producer_byte_rate="1MiB")],
        scope=[{"shape": "user", "prefixes": {"user": [prefix]}}],
        probes=[{"user": f"{prefix}a", "client-id": "app"}],
    )
    runner = CliRunner()
    server = ["--bootstrap-server", cluster.bootstrap]
    text = runner.invoke(app, ["explain", "--user", f"{prefix}a", *server])
    assert text.exit_code == 0, text.output
    assert per_broker_sentence(3) in " ".join(text.stdout.split())
    doc = runner.invoke(app, ["explain", "--user", f"{prefix}a", *server, "-o", "json"])
    assert doc.exit_code == 0, doc.output
    assert json.loads(doc.stdout)["brokers"] == 3
    planned = runner.invoke(app, ["plan", str(path), *server, "-o", "json"])
    assert planned.exit_code == 0, planned.output
    enforcement = json.loads(planned.stdout)["enforcement"]
    assert sorted(enforcement["quota_callbacks"]) == ["1", "2", "3"], enforcement
    shown = runner.invoke(app, ["plan", str(path), *server])
    assert per_broker_text(3) in " ".join(shown.stdout.split()), shown.stdout
    # drift's probe view (a drift cron's report) says the same
    drifted = runner.invoke(app, ["drift", str(path), *server])
    assert drifted.exit_code == 2, drifted.output  # the declared quota is not live: drift
    assert per_broker_text(3) in " ".join(drifted.stdout.split()), drifted.stdout
    drift_doc = runner.invoke(app, ["drift", str(path), *server, "-o", "json"])
    assert drift_doc.exit_code == 2, drift_doc.output
    assert json.loads(drift_doc.stdout)["enforcement"]["brokers"] == 3


def test_a_broker_that_cannot_answer_is_named_and_the_exit_is_4(restored, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster = restored
    prefix = f"{PREFIX}hung-"
    hung = cluster.node(3)
    with suspended_node(name=cluster.name, node_id=3):
        result = CliRunner().invoke(
            app,
            [
                "apply",
                str(manifest(tmp_path, prefix, rate="2MiB")),
                "--bootstrap-server",
                cluster.node(1).address,
                "--auto-approve",
                # The lock topic's leader may be the suspended broker: without the
                # lock this test is about the read-back alone.
                "--no-lock",
                "--timeout",
                "5",
                "--readback-timeout",
                "2",
            ],
        )
    assert result.exit_code == EXIT_NOT_CONVERGED, result.output
    label = re.escape(f"broker 3 ({hung.address})")
    # Unreachable while its session lasts, fenced once it timed out (9 s).
    assert re.search(rf"  (unreachable|fenced) +{label}: ", result.stdout), result.stdout
    assert re.search(
        rf"read-back did NOT match on 1 of 3 brokers \({label} (unreachable|fenced)\)",
        result.stdout,
    ), result.stdout
    assert "Apply incomplete: 3 applied, 0 failed, 0 unknown, 0 not applied" in result.stdout
    # The change was committed by the quorum: once broker 3 runs again it shows it.
    expected = {f"{prefix}{n}": {"producer_byte_rate": 2097152.0} for n in "abc"}
    assert eventually(
        lambda: users_on_each_broker(cluster, prefix),
        lambda views: all(view == expected for view in views.values()),
    ) == {1: expected, 2: expected, 3: expected}


def test_faults_mid_apply_are_reported_truthfully_and_reruns_converge(
    restored,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    cluster = restored
    out = tmp_path / "faults.json"
    proc = subprocess.run(
        [
            sys.executable,
            str(SCRIPT),
            "--brokers",
            "3",
            "--controllers",
            "3",
            "--name",
            cluster.name,
            "--prefix",
            f"{PREFIX}k",
            "--fault",
            "connected",
            "--fault",
            "broker",
            "--fault",
            "controller",
            "--runs",
            "1",
            "--entities",
            "300",
            "--max-delay",
            "0.3",
            "--readback-timeout",
            "2",
            "--timeout",
            "120",
            "--skip-final-check",
            "--seed",
            "7",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.exists(), proc.stderr[-3000:]
    document = json.loads(out.read_text(encoding="utf-8"))
    summary = document["summary"]
    assert summary["runs"] == 3
    assert summary["misreported_entities"] == 0, proc.stderr[-3000:]
    assert summary["brokers_agree"] == 3
    assert summary["rerun_converged"] == 3, proc.stderr[-3000:]
    assert summary["hung"] == 0
    runs = {r["fault"]: r for r in document["runs"]}
    assert set(runs) == {"connected", "broker", "controller"}
    assert all(r["killed_during_apply"] and r["altering_before_fault"] for r in runs.values())
    assert runs["connected"]["node"] in runs["connected"]["connected"]
    # A broker apply is not connected to, when there is one (apply may have
    # connections to all three by then: then any broker is one it uses).
    stopped = runs["broker"]
    all_ids = {n.node_id for n in cluster.brokers}
    assert stopped["node"] not in stopped["connected"] or set(stopped["connected"]) == all_ids
    assert runs["controller"]["new_leader"] not in (-1, runs["controller"]["node"])
    assert proc.returncode == 0
    assert "kill_mid_apply: reported outcomes vs what every broker shows" in proc.stdout
    # The script left the shared cluster running, every node restored.
    assert broker_status(name=cluster.name).state.value == "running"
