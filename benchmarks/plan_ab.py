"""``quotaform plan`` of two checkouts beside the floor, interleaved.

On a shared machine a run of ``benchmarks/performance.py`` per checkout
measures each under other load; here every round runs the floor
(``benchmarks/floor.py plan``), then ``quotaform plan`` from ``--before``,
then from ``--after``, against one sandbox broker, so a burst of load falls
on all three. Medians per size, and each checkout's ratio to the floor::

    .venv/bin/python benchmarks/plan_ab.py --before /tmp/before --after . \\
        [--sizes 100 10000] [--rounds 21 9] [--out FILE]

The benchmark owns the ``bench-*`` user entities on the broker (a sandbox
named ``plan-ab`` is started and stopped).
"""

from __future__ import annotations

import argparse
import compileall
import json
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from performance import Runner, _env, wipe  # noqa: E402
from plan_apply import run_child, wait_converged, write_manifests  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--before", type=Path, required=True)
    parser.add_argument("--after", type=Path, required=True)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 10000])
    parser.add_argument("--rounds", type=int, nargs="+", default=[21, 9])
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    sides = {"before": args.before.resolve(), "after": args.after.resolve()}
    for source in sides.values():  # bytecode as a pip install leaves it
        compileall.compile_dir(str(source / "quotaform"), quiet=1, force=False)
    floor = [sys.executable, str(HERE / "floor.py")]

    from quotaform.sandbox import start_broker, stop_broker

    broker = start_broker(name="plan-ab", on_progress=lambda m: print(m, file=sys.stderr))
    runner = Runner()
    results: dict[str, Any] = {"sides": {k: str(v) for k, v in sides.items()}, "plan": {}}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n, rounds in zip(args.sizes, args.rounds, strict=False):
                manifest = write_manifests(Path(tmp), n)
                wipe(broker.bootstrap)
                run_child("raw-alter", broker.bootstrap, n, None)
                wait_converged(broker.bootstrap, n)
                times: dict[str, list[float]] = {"floor": [], "before": [], "after": []}
                for _ in range(rounds):
                    argv = [*floor, "plan", "--bootstrap-server", broker.bootstrap, str(manifest)]
                    _timed(runner, argv, _env(None), times["floor"])
                    for side, source in sides.items():
                        argv = [sys.executable, "-m", "quotaform", "plan", str(manifest)]
                        argv += ["--bootstrap-server", broker.bootstrap]
                        _timed(runner, argv, _env(source), times[side])
                median = {k: round(statistics.median(v), 4) for k, v in times.items()}
                ratio = {s: round(median[s] / median["floor"], 2) for s in sides}
                results["plan"][str(n)] = {
                    "median_seconds": median,
                    "ratio": ratio,
                    "all_seconds": times,
                }
                said = {f"plan {n}": {"median": median, "ratio": ratio}}
                print(json.dumps(said), file=sys.stderr)
    finally:
        stop_broker(name="plan-ab")
        runner.close()
    text = json.dumps(results, indent=2) + "\n"
    if args.out:
        args.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


def _timed(runner: Runner, argv: list[str], env: dict[str, str], into: list[float]) -> None:
    result = runner.run(argv, env)
    if result["exit"] != 0:
        raise SystemExit(f"{' '.join(argv)} exited {result['exit']}: {result['stderr']}")
    into.append(result["seconds"])


if __name__ == "__main__":
    raise SystemExit(main())
