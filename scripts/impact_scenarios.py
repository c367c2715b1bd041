"""Run the impact-model scenarios (tests/integration/test_impact_prediction.py:
a producer held to a third of its rate, a producer staying under its new
quota, consumers admitted 1, 2 and 5 whole fetches per window, each client
measuring its own throughput) on a fresh sandbox broker ``--repeat`` times
and print every run's predicted and measured numbers with the error, then
each row's median error.

    python scripts/impact_scenarios.py --repeat 3 [--long]

``--long``: the long version (``QUOTAFORM_TEST_LONG_WINDOWS=1``): the broker
keeps Kafka's default 30 s metric samples and the clients run 60 s after the
change, read from 36 s on, where the test (10 s samples) runs 48 s, read from
24 s on. Each run takes about 90 s (100 s long, 2 cores) and sends traffic
to 127.0.0.1 only.
A run whose targets are missed is still tabled (the test's failure is expected
information here, not a reason to stop).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TEST = "tests/integration/test_impact_prediction.py"
#: "<scenario> <what> <predicted> <measured> <error>%" lines of the test's table.
ROW = re.compile(r"^(?:E\s+)?(\S.{19}|\s{20}) (B/s|throttle ms)\s+(\S+)\s+(\S+)\s+([+-]\S+)%")


def run_once(*, long: bool = False) -> list[tuple[str, str, float, float, float]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    if long:
        env["QUOTAFORM_TEST_LONG_WINDOWS"] = "1"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-s", "-q", "-p", "no:cacheprovider", TEST],
        cwd=ROOT, env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    rows, scenario, seen = [], "", set()
    for line in proc.stdout.splitlines():
        match = ROW.match(line)
        if not match:
            continue
        name, what, predicted, measured, error = match.groups()
        scenario = name.strip() or scenario
        if (scenario, what) in seen:  # the table is printed and repeated in the failure
            continue
        seen.add((scenario, what))
        rows.append((scenario, what, float(predicted), float(measured), float(error)))
    if not rows:
        print(proc.stdout[-3000:], proc.stderr[-2000:], sep="\n", file=sys.stderr)
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--long", action="store_true", help="Kafka's default metric samples, 60 s of load"
    )
    args = parser.parse_args()
    errors: dict[tuple[str, str], list[float]] = {}
    print(f"{'run':>3} {'scenario':20} {'':12} {'predicted':>10} {'measured':>10} {'error':>8}")
    for run in range(1, args.repeat + 1):
        for scenario, what, predicted, measured, error in run_once(long=args.long):
            errors.setdefault((scenario, what), []).append(error)
            print(
                f"{run:>3} {scenario:20} {what:12} {predicted:10.0f} {measured:10.0f} "
                f"{error:+7.1f}%"
            )
    print("\nmedian error over runs:")
    for (scenario, what), values in errors.items():
        print(
            f"    {scenario:20} {what:12} {statistics.median(values):+7.1f}% ({len(values)} runs)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
