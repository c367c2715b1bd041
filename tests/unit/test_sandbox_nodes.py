"""A sandbox of several nodes without Kafka: the state records (old single-node
files still read), the nodes' server.properties, options refused for several
nodes, and down / status / kill / suspend on stand-in processes whose command
line looks like a node's (``... kafka.Kafka <data_dir>/server.properties``).
(Real nodes: tests/integration/test_multinode.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from quotaform.errors import SandboxError
from quotaform.sandbox import (
    BrokerOptions,
    SandboxBroker,
    SandboxNode,
    SandboxState,
    broker_status,
    kill_node,
    start_broker,
    stop_broker,
    suspended_node,
)
from quotaform.sandbox.broker.config import _layout, _sandbox_of, _server_properties
from quotaform.sandbox.processes import CHILDREN

#: The stand-in: writes "<monotonic ns> <node id>" to the log on SIGTERM, exits;
#: touches "<log>.<node id>.ready" once it listens for SIGTERM.
_STAND_IN = (
    "import pathlib, signal, sys, time\n"
    "def bye(*_):\n"
    "    with open(sys.argv[2], 'a') as f: f.write(f'{time.monotonic_ns()} {sys.argv[3]}\\n')\n"
    "    sys.exit(0)\n"
    "signal.signal(signal.SIGTERM, bye)\n"
    "pathlib.Path(f'{sys.argv[2]}.{sys.argv[3]}.ready').touch()\n"
    "time.sleep(120)\n"
)


def _properties(nodes: tuple[SandboxNode, ...]) -> dict[int, dict[str, str]]:
    voters = ",".join(
        f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in nodes if n.is_controller
    )
    out = {}
    for node in nodes:
        text = _server_properties(node, voters, 3, BrokerOptions())
        out[node.node_id] = dict(line.split("=", 1) for line in text.splitlines())
    return out


def test_several_nodes_get_their_roles_ports_and_a_solo_listener(tmp_path: Path) -> None:
    nodes = _layout(tmp_path, 3, 3, BrokerOptions())
    assert [(n.node_id, n.roles, n.data_dir.name) for n in nodes] == [
        (1, ("broker",), "broker-1"),
        (2, ("broker",), "broker-2"),
        (3, ("broker",), "broker-3"),
        (1001, ("controller",), "controller-1001"),
        (1002, ("controller",), "controller-1002"),
        (1003, ("controller",), "controller-1003"),
    ]
    ports = [p for n in nodes for p in (n.port, n.controller_port, n.solo_port) if p is not None]
    assert len(ports) == len(set(ports)) == 3 * 2 + 3
    props = _properties(nodes)
    voters = props[1001]["controller.quorum.voters"]
    assert voters.count("@127.0.0.1:") == 3 and all(
        p["controller.quorum.voters"] == voters for p in props.values()
    )
    broker = props[2]
    assert broker["process.roles"] == "broker" and broker["node.id"] == "2"
    solo = nodes[1].solo_port
    assert broker["listeners"] == f"PLAINTEXT://127.0.0.1:{nodes[1].port},SOLO2://127.0.0.1:{solo}"
    assert broker["advertised.listeners"] == broker["listeners"]
    assert broker["listener.security.protocol.map"].endswith(",SOLO2:PLAINTEXT")
    assert broker["offsets.topic.replication.factor"] == "3"
    # KRaft: a new topic's defaults are the controller's (Kafka 4 warns on brokers).
    assert "default.replication.factor" not in broker
    controller = props[1003]
    assert controller["process.roles"] == "controller"
    assert controller["listeners"] == f"CONTROLLER://127.0.0.1:{nodes[5].controller_port}"
    assert controller["default.replication.factor"] == "3"
    assert "advertised.listeners" not in controller


def test_the_single_node_keeps_its_layout(tmp_path: Path) -> None:
    (node,) = _layout(tmp_path, 1, 1, BrokerOptions())
    assert node.roles == ("broker", "controller") and node.node_id == 1
    assert node.data_dir == tmp_path and node.log_path == tmp_path / "broker.log"
    assert node.solo_port is None and node.solo_address == node.address
    (props,) = _properties((node,)).values()
    assert props["process.roles"] == "broker,controller"
    assert props["listeners"] == (
        f"PLAINTEXT://127.0.0.1:{node.port},CONTROLLER://127.0.0.1:{node.controller_port}"
    )


def test_an_old_single_node_state_file_is_read_as_one_combined_node(tmp_path: Path) -> None:
    old = {  # as the previous version wrote it: no "nodes"
        "name": "old",
        "version": "4.3.1",
        "bootstrap": "127.0.0.1:9092",
        "port": 9092,
        "controller_port": 9093,
        "pid": 4242,
        "data_dir": str(tmp_path),
        "log_path": str(tmp_path / "broker.log"),
        "cluster_id": "AAAAAAAAAAAAAAAAAAAAAA",
        "security_protocol": "PLAINTEXT",
        "advertised_port": None,
        "jmx_port": 9999,
        "prometheus_port": None,
        "prometheus_config": None,
    }
    broker = SandboxBroker.from_json(old)
    (node,) = broker.nodes
    assert (node.node_id, node.roles, node.pid, node.port, node.jmx_port) == (
        1,
        ("broker", "controller"),
        4242,
        9092,
        9999,
    )
    assert broker.single_node and broker.brokers == broker.controllers == (node,)
    again = broker.to_json()
    assert {k: again[k] for k in old} == old  # the old fields are written as they were
    assert SandboxBroker.from_json(json.loads(json.dumps(again))) == broker


def test_a_state_of_several_nodes_round_trips_and_follows_a_restart(tmp_path: Path) -> None:
    nodes = _layout(tmp_path, 2, 3, BrokerOptions())
    sandbox = _sandbox_of(
        "many", "4.3.1", tmp_path, "AAAAAAAAAAAAAAAAAAAAAA", BrokerOptions(), nodes
    )
    assert sandbox.bootstrap == f"{nodes[0].address},{nodes[1].address}"
    assert sandbox.port == nodes[0].port and sandbox.controller_port == nodes[2].controller_port
    assert SandboxBroker.from_json(json.loads(json.dumps(sandbox.to_json()))) == sandbox
    record = sandbox.to_json()["nodes"][3]
    assert record["node_id"] == 1002 and record["roles"] == ["controller"]
    assert set(record) >= {"node_id", "roles", "pid", "port", "controller_port", "data_dir"}
    moved = sandbox.with_node(SandboxNode(**{**_fields(nodes[0]), "pid": 777}))
    assert moved.pid == 777 and moved.node(1).pid == 777 and moved.node(2) == nodes[1]
    with pytest.raises(
        SandboxError, match=r"has no node 7 \(it has broker 1, broker 2, controller 1001"
    ):
        sandbox.node(7)


def _fields(node: SandboxNode) -> dict:
    return {name: getattr(node, name) for name in SandboxNode.__slots__}


@pytest.mark.parametrize(
    ("options", "brokers", "controllers", "message"),
    [
        (BrokerOptions(), 0, 1, "at least one broker and one controller"),
        (BrokerOptions(port=9092), 3, 1, "port needs the single node"),
        (BrokerOptions(jmx_port=9999), 1, 3, r"jmx_port \(other than 0\) needs the single node"),
    ],
)
def test_options_that_need_one_node_are_refused_before_anything_starts(
    tmp_path: Path, options: BrokerOptions, brokers: int, controllers: int, message: str
) -> None:
    with pytest.raises(SandboxError, match=message):
        start_broker(
            name="refused",
            state_dir=tmp_path,
            options=options,
            brokers=brokers,
            controllers=controllers,
        )
    assert list(tmp_path.iterdir()) == []


@pytest.fixture
def stand_ins(tmp_path: Path) -> Iterator[tuple[SandboxBroker, Path]]:
    """A recorded sandbox of 2 brokers and 2 controllers whose nodes are
    stand-in processes; the SIGTERM order is written to the returned file."""
    states, root = tmp_path / "states", tmp_path / "root"
    order = tmp_path / "order.txt"
    nodes = []
    for node in _layout(root, 2, 2, BrokerOptions()):
        node.data_dir.mkdir(parents=True)
        proc = subprocess.Popen(
            [sys.executable, "-c", _STAND_IN, "kafka.Kafka", str(order), str(node.node_id),
             str(node.data_dir / "server.properties")],
        )  # fmt: skip
        CHILDREN[proc.pid] = proc
        nodes.append(SandboxNode(**{**_fields(node), "pid": proc.pid}))
    sandbox = _sandbox_of(
        "fake", "4.3.1", root, "AAAAAAAAAAAAAAAAAAAAAA", BrokerOptions(), tuple(nodes)
    )
    states.mkdir()
    (states / "fake.json").write_text(json.dumps(sandbox.to_json()))
    deadline = time.monotonic() + 60
    while not all(Path(f"{order}.{n.node_id}.ready").exists() for n in nodes):
        assert time.monotonic() < deadline, "the stand-in processes did not start"
        time.sleep(0.05)
    try:
        yield sandbox, order
    finally:
        for node in nodes:
            proc = CHILDREN.pop(node.pid, None)
            if proc is not None:
                proc.kill()
                proc.wait()


def test_down_stops_every_node_brokers_first_and_removes_the_data(
    stand_ins, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    sandbox, order = stand_ins
    states = tmp_path / "states"
    assert stop_broker(name="fake", state_dir=states) == sandbox
    signalled = sorted(tuple(map(int, line.split())) for line in order.read_text().splitlines())
    # Every broker got SIGTERM (and exited) before any controller did.
    assert [sorted(n for _, n in signalled[:2]), sorted(n for _, n in signalled[2:])] == [
        [1, 2],
        [1001, 1002],
    ]
    assert not sandbox.data_dir.exists() and not (states / "fake.json").exists()


def test_status_is_degraded_while_a_node_is_down_and_names_it(stand_ins, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    sandbox, _ = stand_ins
    states = tmp_path / "states"
    killed = kill_node(name="fake", node_id=1002, state_dir=states)
    assert killed == sandbox.node(1002)
    status = broker_status(name="fake", state_dir=states)
    assert status.state is SandboxState.DEGRADED and status.down == (1002,)
    assert status.broker == sandbox  # the state is kept for a restart
    with pytest.raises(SandboxError, match="controller 1002 is not running"):
        kill_node(name="fake", node_id=1002, state_dir=states)


def test_a_suspended_node_is_stopped_for_the_block_and_runs_after(
    stand_ins, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    sandbox, _ = stand_ins
    pid = sandbox.node(2).pid

    def state() -> str:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]

    with suspended_node(name="fake", node_id=2, state_dir=tmp_path / "states"):
        assert state() == "T"
    assert state() in ("S", "R")


def test_up_by_name_returns_the_running_sandbox_unless_another_size_is_given(
    stand_ins, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    sandbox, _ = stand_ins
    states = tmp_path / "states"
    # the stand-ins speak no Kafka: readiness is taken as given here
    monkeypatch.setattr("quotaform.sandbox.broker.lifecycle._wait_ready", lambda *args: None)
    assert start_broker(name="fake", version="4.3.1", state_dir=states) == sandbox
    assert start_broker(name="fake", version="4.3.1", state_dir=states, brokers=2) == sandbox
    with pytest.raises(SandboxError, match="already runs with 2 brokers and 2 controllers"):
        start_broker(name="fake", version="4.3.1", state_dir=states, controllers=3)
