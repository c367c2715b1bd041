"""Where the test suite's time goes (issue 35): the ``--durations`` lines of a
pytest run, grouped by tier, by module and by phase (setup = fixture
start-up: brokers, clusters, Spark sessions and servers, Prometheus, the
thin-client venv; call = the tests themselves, their load windows and waits
included), as the Markdown table of ``benchmarks/README.md``.

Usage::

    bash scripts/test --durations=0 --durations-min=0.05 2>&1 | tee run.log
    .venv/bin/python scripts/test_durations.py run.log [--top 25]

Times are per test as pytest measures them; under ``-n 3`` three workers
run side by side, so the sums exceed the wall time (up to three times it).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

LINE = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S+)")
SUMMARY = re.compile(r"=+ (.*?) in ([\d.]+)s")


def tier(module: str) -> str:
    """``tests/<tier>/...`` -> ``<tier>``."""
    parts = module.split("/")
    return parts[1] if len(parts) > 2 else parts[0]


def parse(text: str) -> tuple[dict[tuple[str, str], float], str | None]:
    """``{(module, phase): seconds}`` and pytest's last summary line."""
    sums: dict[tuple[str, str], float] = defaultdict(float)
    summary = None
    for line in text.splitlines():
        if match := LINE.match(line):
            seconds, phase, nodeid = float(match[1]), match[2], match[3]
            sums[(nodeid.split("::", 1)[0], phase)] += seconds
        elif match := SUMMARY.search(line):
            summary = f"{match[1]} in {float(match[2]):.0f} s"
    return sums, summary


def table(sums: dict[tuple[str, str], float], top: int) -> str:
    """The tiers, then the ``top`` modules by total, as Markdown."""
    by_module: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for (module, phase), seconds in sums.items():
        by_module[module][phase] += seconds
    by_tier: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for module, phases in by_module.items():
        for phase, seconds in phases.items():
            by_tier[tier(module)][phase] += seconds
    out = ["| tier | setup (fixtures) s | call s | teardown s | total s |", "|---|---|---|---|---|"]
    for name, p in sorted(by_tier.items(), key=lambda kv: -sum(kv[1].values())):
        out.append(
            f"| {name} | {p['setup']:.0f} | {p['call']:.0f} | {p['teardown']:.0f} | "
            f"{sum(p.values()):.0f} |"
        )
    out += ["", "| module | setup (fixtures) s | call s | total s |", "|---|---|---|---|"]
    ranked = sorted(by_module.items(), key=lambda kv: -sum(kv[1].values()))
    for module, p in ranked[:top]:
        out.append(
            f"| `{module}` | {p['setup']:.0f} | {p['call']:.0f} | {sum(p.values()):.0f} |"
        )
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("log", type=Path, help="the output of a pytest run with --durations=0")
    parser.add_argument("--top", type=int, default=25, help="modules listed (default 25)")
    args = parser.parse_args()
    sums, summary = parse(args.log.read_text(encoding="utf-8", errors="replace"))
    if not sums:
        print(f"{args.log}: no --durations lines (run pytest with --durations=0)", file=sys.stderr)
        return 1
    if summary:
        print(f"pytest: {summary}\n")
    print(table(sums, args.top))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
