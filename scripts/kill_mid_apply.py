"""Kill the broker in the middle of a real apply, then judge what apply said.

For each run: a manifest of N user entities (4 quota keys each, so the apply
sends several AlterClientQuotas batches) is applied with ``quotaform apply
--auto-approve -o json`` while the sandbox broker is SIGKILLed at a random
moment; the broker is restarted on the same log dir; Kafka's own ConfigCommand
then shows what landed, and every entity's reported outcome is checked
against it:

* ``applied`` must be live with the planned values;
* ``not-applied`` and ``failed`` must not have landed;
* ``unknown`` may be either (the report says so; we count which);
* exit 1 (nothing applied) only when nothing landed.

Then the stuck apply lock is released (``quotaform unlock --lock-id``, as the
README says), apply is run again and must converge (exit 0, then a plan with no
changes). Traffic stays on loopback; every run is bounded in time.

Usage::

    .venv/bin/python scripts/kill_mid_apply.py [--runs 11] [--entities 10000]
        [--seed 1] [--out results.json]
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
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quotaform.sandbox import (  # noqa: E402
    kill_broker,
    parse_quota_describe,
    resume_broker,
    run_config_command,
    start_broker,
    stop_broker,
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
    return subprocess.run(
        [sys.executable, "-m", "quotaform", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def live_users(bootstrap: str, version: str, prefix: str) -> dict[str, dict[str, float]]:
    proc = run_config_command(
        ["--describe", "--entity-type", "users"], bootstrap=bootstrap, version=version
    )
    found = {}
    for label, quotas in parse_quota_describe(proc.stdout).items():
        name = label.split("'")[1]
        if name.startswith(prefix):
            found[name] = quotas
    return found


def judge(
    report: dict[str, Any] | None, live: dict[str, dict[str, float]], code: int
) -> dict[str, Any]:
    """Compare apply's per-entity report with what the broker holds."""
    counts = {"applied": 0, "failed": 0, "unknown": 0, "not-applied": 0}
    landed_unknown = 0
    misreports: list[str] = []
    if report is None:
        if live and code == 1:
            misreports.append(f"exit 1 with no report, but {len(live)} entities landed")
        return {"counts": counts, "landed_unknown": 0, "misreports": misreports, "report": False}
    for entry in report["entities"]:
        name = entry["entity"]["user"]
        outcome = entry["outcome"]
        counts[outcome] += 1
        landed = live.get(name) == KEYS
        if outcome == "applied" and not landed:
            misreports.append(f"{name}: reported applied, broker shows {live.get(name)}")
        elif outcome in ("not-applied", "failed") and name in live:
            misreports.append(f"{name}: reported {outcome}, broker shows {live[name]}")
        elif outcome == "unknown" and landed:
            landed_unknown += 1
    if code == 1 and live:
        misreports.append(f"exit 1 (nothing applied), but {len(live)} entities landed")
    return {
        "counts": counts,
        "landed_unknown": landed_unknown,
        "misreports": misreports,
        "report": True,
    }


def one_run(
    run: int, args: argparse.Namespace, rng: random.Random, broker: Any, tmp: Path
) -> dict[str, Any]:
    prefix = f"kill{run:02d}-"
    manifest = tmp / f"{prefix}.yaml"
    write_manifest(manifest, prefix, args.entities)
    env = {**os.environ, "QUOTAFORM_BOOTSTRAP_SERVER": broker.bootstrap}
    out, err = tmp / f"{prefix}.out", tmp / f"{prefix}.err"
    delay = rng.uniform(args.min_delay, args.max_delay)
    with out.open("w") as stdout, err.open("w") as stderr:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "quotaform",
                "apply",
                str(manifest),
                "--auto-approve",
                "-o",
                "json",
                "--readback-timeout",
                "5",
            ],
            env=env,
            stdout=stdout,
            stderr=stderr,
        )
        time.sleep(delay)
        killed_during = proc.poll() is None
        kill_broker(name=args.name)
        code = proc.wait(timeout=args.timeout)
    resume_broker(name=args.name)
    text = out.read_text(encoding="utf-8")
    starts = [m.start() for m in re.finditer(r'^\{\n  "format_version"', text, re.M)]
    report = None
    for start in reversed(starts):
        doc = json.loads(text[start:])
        if "entities" in doc and "status" in doc:
            report = doc
            break
    live = live_users(broker.bootstrap, broker.version, prefix)
    verdict = judge(report, live, code)

    # A killed broker leaves the apply lock held: release it as documented.
    lock_id = re.search(r"--lock-id ([0-9a-f]+)", err.read_text(encoding="utf-8"))
    unlocked = None
    if lock_id:
        unlocked = quotaform(
            "unlock", "--lock-id", lock_id.group(1), env=env, timeout=60
        ).returncode
    again = quotaform("apply", str(manifest), "--auto-approve", env=env, timeout=args.timeout)
    if again.returncode == 1 and "holds this cluster's apply lock" in again.stderr:
        held = re.search(r"--lock-id ([0-9a-f]+)", again.stderr)
        if held:
            unlocked = quotaform(
                "unlock", "--lock-id", held.group(1), env=env, timeout=60
            ).returncode
            again = quotaform(
                "apply", str(manifest), "--auto-approve", env=env, timeout=args.timeout
            )
    check = quotaform("plan", str(manifest), "--detailed-exitcode", env=env, timeout=args.timeout)
    converged = again.returncode == 0 and check.returncode == 0
    final = live_users(broker.bootstrap, broker.version, prefix)
    result = {
        "run": run,
        "kill_after_s": round(delay, 3),
        "killed_during_apply": killed_during,
        "exit_code": code,
        "status": report["status"] if report else None,
        **verdict,
        "live_after_restart": len(live),
        "unlock_exit": unlocked,
        "rerun_exit": again.returncode,
        "plan_after_rerun_exit": check.returncode,
        "converged": converged and len(final) == args.entities,
    }
    print(json.dumps(result), file=sys.stderr)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=11)
    parser.add_argument("--entities", type=int, default=10000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--min-delay", type=float, default=3.0, help="seconds after launch")
    parser.add_argument("--max-delay", type=float, default=4.8, help="seconds after launch")
    parser.add_argument("--timeout", type=float, default=300.0, help="per command, seconds")
    parser.add_argument("--name", default=f"kill-{os.getpid()}", help="sandbox name")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    broker = start_broker(name=args.name)
    runs = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for run in range(1, args.runs + 1):
                runs.append(one_run(run, args, rng, broker, Path(tmp)))
    finally:
        stop_broker(name=args.name)
    summary = {
        "runs": len(runs),
        "entities_per_run": args.entities,
        "killed_during_apply": sum(r["killed_during_apply"] for r in runs),
        "misreported_entities": sum(len(r["misreports"]) for r in runs),
        "runs_without_report": sum(not r["report"] for r in runs),
        "reported": {
            k: sum(r["counts"][k] for r in runs)
            for k in ("applied", "failed", "unknown", "not-applied")
        },
        "unknown_that_landed": sum(r["landed_unknown"] for r in runs),
        "exit_codes": sorted({r["exit_code"] for r in runs}),
        "rerun_converged": sum(r["converged"] for r in runs),
    }
    document = {"summary": summary, "runs": runs}
    text = json.dumps(document, indent=2)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return (
        0 if summary["misreported_entities"] == 0 and summary["rerun_converged"] == len(runs) else 1
    )


if __name__ == "__main__":
    raise SystemExit(main())
