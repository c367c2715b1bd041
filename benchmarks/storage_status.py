"""``quotaform storage status`` over many brokers' snapshots, end to end.

    .venv/bin/python benchmarks/storage_status.py --brokers 100 --volumes 12 \
        --out benchmarks/results/storage_status.json

Writes one Volume Metrics snapshot per broker (JSON Lines; every volume 1 TiB,
consumed drawn at random so some volumes throttle) and times, in fresh
processes (median of --repeat): ``storage status examples/storage/
--snapshots FILE -o json`` (offline: read + validate + evaluate + render),
and in-process the parse and the evaluation alone.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TiB = 1 << 40


def snapshots(brokers: int, volumes: int, path: Path, seed: int = 3) -> None:
    rng = random.Random(seed)
    now = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    with path.open("w", encoding="utf-8") as fh:
        for b in range(brokers):
            record = {
                "brokerId": str(b),
                "snapshotAt": now,
                "hardLimit": {"type": "MinFreeBytes", "level": 50 << 30},
                "softLimit": {"type": "MinFreePercentage", "level": 20},
                "volumes": [
                    {
                        "volumeName": f"/data/{v}",
                        "capacity": TiB,
                        "consumed": int(TiB * rng.uniform(0.3, 0.85)),
                    }
                    for v in range(volumes)
                ],
            }
            fh.write(json.dumps(record) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--brokers", type=int, default=100)
    parser.add_argument("--volumes", type=int, default=12)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    from quotaform.formats.storage import read_snapshot_text
    from quotaform.manifest import load_manifests
    from quotaform.plan.storage import evaluate

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "snapshots.jsonl"
        snapshots(args.brokers, args.volumes, path)
        examples = str(ROOT / "examples" / "storage")
        command = [sys.executable, "-m", "quotaform", "storage", "status", examples,
                   "--snapshots", str(path), "-o", "json"]  # fmt: skip
        walls = []
        for _ in range(args.repeat):
            start = time.perf_counter()
            done = subprocess.run(command, capture_output=True, text=True, check=True)
            walls.append(time.perf_counter() - start)
        state = json.loads(done.stdout)
        text = path.read_text(encoding="utf-8")
        policy = load_manifests([ROOT / "examples" / "storage"]).storage
        assert policy is not None
        start = time.perf_counter()
        parsed = list(read_snapshot_text(text, str(path)))
        parse_s = time.perf_counter() - start
        start = time.perf_counter()
        evaluate(policy, parsed, now=datetime.now(UTC))
        evaluate_s = time.perf_counter() - start
    result = {
        "machine": f"{platform.machine()}, CPython {platform.python_version()}",
        "brokers": args.brokers,
        "volumes_per_broker": args.volumes,
        "snapshot_bytes": len(text),
        "status_command_s_median": round(statistics.median(walls), 3),
        "status_command_s_runs": [round(w, 3) for w in walls],
        "parse_s": round(parse_s, 4),
        "evaluate_s": round(evaluate_s, 4),
        "state": state["state"],
        "factor": state["factor"],
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
