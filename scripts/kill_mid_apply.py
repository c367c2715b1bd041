"""Break a node in the middle of a real apply, then judge what apply said.

For each run: a manifest of N user entities (4 quota keys each, so the apply
sends several AlterClientQuotas batches of 2,500 entities) is applied with
``quotaform -v apply --auto-approve -o json`` against a sandbox; a random
moment after apply logged that it starts altering (``apply: altering``), one
fault strikes:

* ``connected``: the broker quotaform is connected to is SIGKILLed (found from
  the apply process's open TCP connections; on the single node: the node);
* ``broker``: another broker is stopped (SIGTERM: a controlled shutdown);
* ``controller``: the active controller (the metadata quorum's leader, from
  DescribeQuorum) is SIGKILLed; a new leader is elected (needs 3 controllers).

The node is restarted on its own log dir once apply has ended. Kafka's own
ConfigCommand then shows what landed, asked of EVERY broker on its own (each
broker's ``SOLO<id>`` listener, so the tool can reach no other broker), and
every entity's reported outcome is checked against it:

* ``applied`` must be live with the planned values on every broker;
* ``not-applied`` and ``failed`` must not have landed on any broker;
* ``unknown`` may be either (the report says so; we count which);
* exit 1 (nothing applied) only when nothing landed;
* every broker must show the same.

Then the stuck apply lock is released (``quotaform unlock --lock-id``, as
documented), apply is run again and must converge (exit 0, then a plan with no
changes). Every command is bounded by ``--timeout``; a command that hits it is
counted as hung. Durations are recorded. Traffic stays on loopback.

Usage::

    .venv/bin/python scripts/kill_mid_apply.py [--runs 11] [--entities 10000]
        [--brokers 1 --controllers 1] [--fault connected|broker|controller ...]
        [--seed 1] [--out results.json]

``--fault`` may be given several times: ``--runs`` runs of each, one sandbox.
A sandbox ``--name`` that already runs (with that many brokers and
controllers) is used and left running; otherwise one is started and stopped
at the end. Prints a summary table; the JSON document (``summary``,
``by_fault``, ``runs``) goes to ``--out`` (or to standard output without it).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quotaform.sandbox import (  # noqa: E402
    SandboxBroker,
    SandboxNode,
    SandboxState,
    active_controller,
    broker_status,
    kill_node,
    parse_quota_describe,
    restart_node,
    run_config_command,
    start_broker,
    stop_broker,
    stop_node,
    wait_for_leader,
)

KEYS = {
    "producer_byte_rate": 1048576.0,
    "consumer_byte_rate": 2097152.0,
    "request_percentage": 50.0,
    "controller_mutation_rate": 2.0,
}
_VALUES = (
    "{producer_byte_rate: 1MiB, consumer_byte_rate: 2MiB, request_percentage: 50, "
    "controller_mutation_rate: 2}"
)
FAULTS = ("connected", "broker", "controller")
OUTCOMES = ("applied", "failed", "unknown", "not-applied")
#: How long to look for the apply's connection to a broker before giving up.
_FIND_CONNECTION_S = 2.0


def write_manifest(path: Path, prefix: str, n: int) -> None:
    lines = [
        "apiVersion: quotaform.io/v1",
        "kind: ClientQuotas",
        "metadata: {cluster: kill}",
        "spec:",
        f"  scope: [{{shape: user, prefixes: {{user: [{prefix}]}}}}]",
        "  allowDeletes: true",
        "  quotas:",
    ]
    for i in range(n):
        lines.append(f"    - entity: {{user: {prefix}{i:06d}}}")
        lines.append(f"      values: {_VALUES}")
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")


def quotaform(*args: str, env: dict[str, str], timeout: float) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            [sys.executable, "-m", "quotaform", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else exc.stdout or ""
        err = exc.stderr.decode() if isinstance(exc.stderr, bytes) else exc.stderr or ""
        return subprocess.CompletedProcess(exc.cmd, -9, out, err + "\n(hung: timed out)")


def live_users(address: str, version: str, prefix: str) -> dict[str, dict[str, float]]:
    """What ConfigCommand shows for the ``prefix`` users through ``address``."""
    proc = run_config_command(
        ["--describe", "--entity-type", "users"], bootstrap=address, version=version
    )
    found = {}
    for label, quotas in parse_quota_describe(proc.stdout).items():
        name = label.split("'")[1]
        if name.startswith(prefix):
            found[name] = quotas
    return found


def live_on_every_broker(
    broker: SandboxBroker, prefix: str
) -> dict[int, dict[str, dict[str, float]]]:
    """ConfigCommand against each broker on its own listener, side by side."""
    views: dict[int, dict[str, dict[str, float]]] = {}

    def read(node: SandboxNode) -> None:
        views[node.node_id] = live_users(node.solo_address, broker.version, prefix)

    threads = [threading.Thread(target=read, args=(n,)) for n in broker.brokers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    missing = [n.node_id for n in broker.brokers if n.node_id not in views]
    if missing:
        raise RuntimeError(f"ConfigCommand failed on broker(s) {missing}")
    return dict(sorted(views.items()))


def judge(
    report: dict[str, Any] | None, views: dict[int, dict[str, dict[str, float]]], code: int
) -> dict[str, Any]:
    """Compare apply's per-entity report with what every broker holds."""
    counts = dict.fromkeys(OUTCOMES, 0)
    landed_unknown = 0
    misreports: list[str] = []
    first = next(iter(views.values()))
    disagree = [node for node, view in views.items() if view != first]
    if disagree:
        misreports.append(f"brokers {disagree} show otherwise than broker {next(iter(views))}")
    anywhere = set().union(*views.values())
    if report is None:
        if anywhere and code == 1:
            misreports.append(f"exit 1 with no report, but {len(anywhere)} entities landed")
        return {
            "counts": counts,
            "landed_unknown": 0,
            "misreports": misreports,
            "report": False,
            "brokers_agree": not disagree,
        }
    for entry in report["entities"]:
        name = entry["entity"]["user"]
        outcome = entry["outcome"]
        counts[outcome] += 1
        on_all = all(view.get(name) == KEYS for view in views.values())
        if outcome == "applied" and not on_all:
            shown = {node: view.get(name) for node, view in views.items()}
            misreports.append(f"{name}: reported applied, brokers show {shown}")
        elif outcome in ("not-applied", "failed") and name in anywhere:
            misreports.append(f"{name}: reported {outcome}, but it landed")
        elif outcome == "unknown" and on_all:
            landed_unknown += 1
    if code == 1 and anywhere:
        misreports.append(f"exit 1 (nothing applied), but {len(anywhere)} entities landed")
    return {
        "counts": counts,
        "landed_unknown": landed_unknown,
        "misreports": misreports,
        "report": True,
        "brokers_agree": not disagree,
    }


def connected_brokers(pid: int, broker: SandboxBroker) -> list[int]:
    """Node ids of the brokers process ``pid`` has an established TCP
    connection to (from /proc: its socket inodes, and the TCP table)."""
    inodes = set()
    try:
        for fd in Path(f"/proc/{pid}/fd").iterdir():
            with_target = os.readlink(fd) if fd.is_symlink() else ""
            if with_target.startswith("socket:["):
                inodes.add(int(with_target[8:-1]))
        table = Path(f"/proc/{pid}/net/tcp").read_text().splitlines()[1:]
    except OSError:
        return []
    ports = set()
    for line in table:
        fields = line.split()
        if fields[3] == "01" and int(fields[9]) in inodes:  # 01: ESTABLISHED
            ports.add(int(fields[2].rsplit(":", 1)[1], 16))
    return [n.node_id for n in broker.brokers if n.port in ports]


def last_report(text: str) -> dict[str, Any] | None:
    starts = [m.start() for m in re.finditer(r'^\{\n  "format_version"', text, re.M)]
    for start in reversed(starts):
        doc = json.loads(text[start:])
        if "entities" in doc and "status" in doc:
            return dict(doc)
    return None


def strike(
    fault: str, args: argparse.Namespace, rng: random.Random, broker: SandboxBroker, pid: int
) -> dict[str, Any]:
    """Break one node while apply (``pid``) runs; return what was done."""
    if fault == "controller":
        leader = active_controller(name=args.name, timeout_s=10)
        kill_node(name=args.name, node_id=leader)
        t = time.monotonic()
        successor = wait_for_leader(name=args.name, other_than=leader, timeout_s=60)
        return {
            "node": leader,
            "signal": "SIGKILL",
            "new_leader": successor,
            "election_s": round(time.monotonic() - t, 3),
        }
    connected: list[int] = []
    until = time.monotonic() + _FIND_CONNECTION_S
    while not connected and time.monotonic() < until:
        connected = connected_brokers(pid, broker)
        if not connected:
            time.sleep(0.05)
    if fault == "connected":
        node = connected[0] if connected else broker.brokers[0].node_id
        kill_node(name=args.name, node_id=node)
        return {"node": node, "signal": "SIGKILL", "connected": connected}
    others = [n.node_id for n in broker.brokers if n.node_id not in connected]
    node = rng.choice(others or [n.node_id for n in broker.brokers])
    t = time.monotonic()
    stop_node(name=args.name, node_id=node, timeout_s=30)
    return {
        "node": node,
        "signal": "SIGTERM",
        "connected": connected,
        "stop_s": round(time.monotonic() - t, 3),
    }


class Restart(threading.Thread):
    """Restart node ``node_id`` on its own log dir in the background; after
    ``join()``: ``seconds`` it took and the ``error`` it raised, if any."""

    def __init__(self, name: str, node_id: int, timeout: float) -> None:
        super().__init__(daemon=True)
        self.sandbox, self.node_id, self.timeout = name, node_id, timeout
        self.seconds = 0.0
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        t = time.monotonic()
        try:
            restart_node(name=self.sandbox, node_id=self.node_id, timeout_s=self.timeout)
        except BaseException as exc:  # re-raised by the caller
            self.error = exc
        self.seconds = time.monotonic() - t


def wait_for_text(path: Path, needle: str, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait until ``path`` contains ``needle`` (or ``proc`` ended / timeout),
    reading only what was appended since the last look."""
    deadline = time.monotonic() + timeout
    seen = b""
    with path.open("rb") as growing:
        while time.monotonic() < deadline:
            seen = seen[-len(needle) :] + growing.read()
            if needle.encode() in seen:
                return True
            if proc.poll() is not None:
                return False
            time.sleep(0.02)
    return False


def one_run(
    run: int, fault: str, args: argparse.Namespace, rng: random.Random, tmp: Path
) -> dict[str, Any]:
    broker = broker_status(name=args.name).broker
    assert broker is not None
    prefix = f"{args.prefix}{run:02d}-"
    manifest = tmp / f"{prefix}.yaml"
    write_manifest(manifest, prefix, args.entities)
    env = {**os.environ, "QUOTAFORM_BOOTSTRAP_SERVER": broker.bootstrap}
    out, err = tmp / f"{prefix}.out", tmp / f"{prefix}.err"
    delay = rng.uniform(args.min_delay, args.max_delay)
    hung = False
    with out.open("w") as stdout, err.open("w") as stderr:
        started = time.monotonic()
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quotaform",
                "-v",
                "apply",
                str(manifest),
                "--auto-approve",
                "-o",
                "json",
                "--readback-timeout",
                str(args.readback_timeout),
            ],
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
        altering = wait_for_text(err, "apply: altering", proc, args.timeout)
        time.sleep(delay)
        struck_during = proc.poll() is None
        struck_at = time.monotonic() - started
        done = strike(fault, args, rng, broker, proc.pid)
        try:
            code = proc.wait(timeout=max(args.timeout - (time.monotonic() - started), 1))
        except subprocess.TimeoutExpired:
            hung = True
            proc.kill()
            code = proc.wait()
        apply_s = time.monotonic() - started
    restart = Restart(args.name, done["node"], args.timeout)
    if broker.node(done["node"]).is_broker:  # the judge asks every broker
        restart.join()
    report = last_report(out.read_text(encoding="utf-8"))
    t = time.monotonic()
    views = live_on_every_broker(broker, prefix)
    judge_s = time.monotonic() - t
    restart.join()  # a controller comes back while the brokers are judged
    if restart.error is not None:
        raise restart.error
    verdict = judge(report, views, code)

    # A broken node can leave the apply lock held: release it as documented.
    unlocked = None
    lock_id = re.search(r"--lock-id ([0-9a-f]+)", err.read_text(encoding="utf-8"))
    t = time.monotonic()
    if lock_id:
        unlocked = quotaform(
            "unlock", "--lock-id", lock_id.group(1), env=env, timeout=args.timeout
        ).returncode
    again = quotaform("apply", str(manifest), "--auto-approve", env=env, timeout=args.timeout)
    if again.returncode == 1 and "holds this cluster's apply lock" in again.stderr:
        held = re.search(r"--lock-id ([0-9a-f]+)", again.stderr)
        if held:
            unlocked = quotaform(
                "unlock", "--lock-id", held.group(1), env=env, timeout=args.timeout
            ).returncode
            again = quotaform(
                "apply", str(manifest), "--auto-approve", env=env, timeout=args.timeout
            )
    check = quotaform("plan", str(manifest), "--detailed-exitcode", env=env, timeout=args.timeout)
    rerun_s = time.monotonic() - t
    hung = hung or -9 in (again.returncode, check.returncode)
    converged = again.returncode == 0 and check.returncode == 0
    if not args.skip_final_check:
        final = live_on_every_broker(broker, prefix)
        expected = {f"{prefix}{i:06d}": KEYS for i in range(args.entities)}
        converged = converged and all(view == expected for view in final.values())
    result = {
        "run": run,
        "fault": fault,
        **done,
        "altering_before_fault": altering,
        "fault_after_alter_start_s": round(delay, 3),
        "fault_at_s": round(struck_at, 3),
        "killed_during_apply": struck_during,
        "exit_code": code,
        "status": report["status"] if report else None,
        "brokers_reported": {
            str(b["node_id"]): b["state"] for b in (report or {}).get("brokers", [])
        },
        "broker_errors": {
            str(b["node_id"]): b["error"] for b in (report or {}).get("brokers", []) if b["error"]
        },
        **verdict,
        "live_after_restart": {str(node): len(view) for node, view in views.items()},
        "unlock_exit": unlocked,
        "rerun_exit": again.returncode,
        "plan_after_rerun_exit": check.returncode,
        "converged": converged,
        "hung": hung,
        "durations_s": {
            "apply": round(apply_s, 3),
            "restart": round(restart.seconds, 3),
            "judge": round(judge_s, 3),
            "rerun": round(rerun_s, 3),
        },
    }
    print(json.dumps(result), file=sys.stderr)
    return result


def summarize(runs: list[dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    def total(key: Callable[[dict[str, Any]], int]) -> int:
        return sum(key(r) for r in runs)

    reported_brokers: dict[str, int] = {}
    for r in runs:
        for state in r["brokers_reported"].values():
            reported_brokers[state] = reported_brokers.get(state, 0) + 1
    return {
        "runs": len(runs),
        "entities_per_run": args.entities,
        "brokers": args.brokers,
        "controllers": args.controllers,
        "killed_during_apply": total(lambda r: r["killed_during_apply"]),
        "misreported_entities": total(lambda r: len(r["misreports"])),
        "runs_without_report": total(lambda r: not r["report"]),
        "reported": {k: total(lambda r, k=k: r["counts"][k]) for k in OUTCOMES},
        "unknown_that_landed": total(lambda r: r["landed_unknown"]),
        "brokers_agree": total(lambda r: r["brokers_agree"]),
        "broker_read_backs_reported": dict(sorted(reported_brokers.items())),
        "exit_codes": sorted({r["exit_code"] for r in runs}),
        "rerun_converged": total(lambda r: r["converged"]),
        "hung": total(lambda r: r["hung"]),
        "max_apply_s": max((r["durations_s"]["apply"] for r in runs), default=0.0),
    }


def print_table(by_fault: dict[str, dict[str, Any]], console: Console) -> None:
    table = Table(title="kill_mid_apply: reported outcomes vs what every broker shows")
    for column in (
        "fault",
        "runs",
        "entities",
        "applied",
        "failed",
        "unknown (landed)",
        "not-applied",
        "misreported",
        "brokers agree",
        "read-back per broker",
        "exit codes",
        "re-run converged",
        "hung",
        "apply s (max)",
    ):
        table.add_column(column, justify="right" if column not in ("fault",) else "left")
    for fault, s in by_fault.items():
        reported = s["reported"]
        table.add_row(
            fault,
            str(s["runs"]),
            str(s["runs"] * s["entities_per_run"]),
            str(reported["applied"]),
            str(reported["failed"]),
            f"{reported['unknown']} ({s['unknown_that_landed']})",
            str(reported["not-applied"]),
            str(s["misreported_entities"]),
            f"{s['brokers_agree']}/{s['runs']}",
            ", ".join(f"{k} {v}" for k, v in s["broker_read_backs_reported"].items()) or "-",
            ",".join(map(str, s["exit_codes"])),
            f"{s['rerun_converged']}/{s['runs']}",
            str(s["hung"]),
            f"{s['max_apply_s']:.1f}",
        )
    console.print(table)


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=11, help="runs per fault")
    parser.add_argument("--entities", type=int, default=10000)
    parser.add_argument("--brokers", type=int, default=1)
    parser.add_argument("--controllers", type=int, default=1)
    parser.add_argument(
        "--fault",
        action="append",
        choices=FAULTS,
        help="what breaks (repeatable); default: connected",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--min-delay", type=float, default=0.0, help="seconds after the alter starts"
    )
    parser.add_argument(
        "--max-delay", type=float, default=3.0, help="seconds after the alter starts"
    )
    parser.add_argument("--readback-timeout", type=float, default=5.0)
    parser.add_argument("--timeout", type=float, default=300.0, help="per command, seconds")
    parser.add_argument("--name", default=f"kill-{os.getpid()}", help="sandbox name")
    parser.add_argument(
        "--prefix", default="kill", help="user names are PREFIX<run>-<n> (left in the cluster)"
    )
    parser.add_argument(
        "--skip-final-check",
        action="store_true",
        help="after the re-run, skip ConfigCommand on every broker (the re-run's exit 0 and "
        "the empty plan still decide convergence)",
    )
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    faults = args.fault or ["connected"]
    several = args.brokers > 1 or args.controllers > 1
    if "broker" in faults and args.brokers < 2:
        parser.error("--fault broker needs --brokers 2 or more (another broker than quotaform's)")
    if "controller" in faults and args.controllers < 3:
        parser.error("--fault controller needs --controllers 3 (a quorum that survives one)")
    rng = random.Random(args.seed)
    started = time.monotonic()
    ours = broker_status(name=args.name).state is SandboxState.STOPPED
    broker = start_broker(name=args.name, brokers=args.brokers, controllers=args.controllers)
    up_s = time.monotonic() - started
    runs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            run = 0
            for fault in faults:
                for _ in range(args.runs):
                    run += 1
                    runs.append(one_run(run, fault, args, rng, Path(tmp)))
    finally:
        if ours:
            stop_broker(name=args.name)
    by_fault = {
        fault: summarize([r for r in runs if r["fault"] == fault], args) for fault in faults
    }
    summary = summarize(runs, args)
    summary["sandbox_up_s"] = round(up_s, 3)
    summary["total_s"] = round(time.monotonic() - started, 3)
    document = {
        "summary": summary,
        "by_fault": by_fault,
        "sandbox": {"bootstrap": broker.bootstrap, "several_nodes": several},
        "runs": runs,
    }
    text = json.dumps(document, indent=2)
    print_table(by_fault, Console(width=200))
    print(
        f"{summary['runs']} runs in {summary['total_s']:.0f} s "
        f"(sandbox up {summary['sandbox_up_s']:.1f} s)"
    )
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    else:
        print(text)
    ok = (
        summary["misreported_entities"] == 0
        and summary["rerun_converged"] == len(runs)
        and summary["hung"] == 0
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
