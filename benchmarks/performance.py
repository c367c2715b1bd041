"""quotaform beside its floor: start-up, plan, apply, and the JSON plan.

Every figure is a whole process measured from spawn to exit (wall time, the
median of ``--repeat`` runs; peak RSS of that process from ``wait4``), run
side by side in one invocation against the same broker:

* ``startup``: ``python -c pass`` (the floor) vs ``quotaform --help``, plus the
  top cumulative imports of ``quotaform --help`` and ``quotaform plan`` from
  ``python -X importtime``, and what importing the libraries alone costs:
  kafka-python and PyYAML (the floor's) and kafka-python with typer,
  pydantic, rich and ruamel.yaml (quotaform's stack).
* ``plan`` at each of ``--plan-sizes`` (N user entities, two quota keys each,
  all live: a no-change plan): ``quotaform plan FILE`` vs
  ``benchmarks/floor.py plan`` (Python, kafka-python, libyaml's CSafeLoader
  reading the same file, the same four strict DescribeClientQuotas).
* ``apply`` at each of ``--apply-sizes`` (N creates on a broker without them):
  ``quotaform apply FILE --auto-approve`` vs ``benchmarks/floor.py apply``
  (the same parse, a validate_only AlterClientQuotas, the real one, one
  DescribeClientQuotas).
* ``render``: in one process, ``render_json`` of an N-entity plan of creates
  vs ``json.dumps`` of the same document as plain dicts (``indent=2``, the
  same text).

``--source DIR`` runs quotaform from another checkout (``PYTHONPATH=DIR``),
for before/after figures in the same run. Usage::

    .venv/bin/python benchmarks/performance.py [--plan-sizes 100 10000 100000]
        [--apply-sizes 10000] [--render-size 10000] [--repeat 3]
        [--bootstrap-server HOST:PORT] [--source DIR] [--out FILE]

Without ``--bootstrap-server`` a sandbox named ``bench`` is started and
stopped. The benchmark owns the ``bench-*`` user entities on the broker.
Needs PyYAML with libyaml (the ``dev`` extra) for the floor.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from plan_apply import (  # noqa: E402
    PREFIX,
    run_child,
    wait_converged,
    write_manifests,
    write_results,
)


def wipe(bootstrap: str) -> None:
    """Remove every ``bench-*`` user entity (whatever size a run left) and wait
    until describe shows none. Not part of any timing."""
    from quotaform.cluster.wire import (
        FilterComponent,
        QuotaAlteration,
        load_connection_settings,
        open_admin,
    )

    with open_admin(load_connection_settings(bootstrap_server=bootstrap), read_only=False) as c:
        deadline = time.monotonic() + 120
        while True:
            live = c.describe_client_quotas([FilterComponent.any("user")], strict=True)
            mine = [e for e in live if (e.name("user") or "").startswith(PREFIX)]
            if not mine:
                return
            assert time.monotonic() < deadline, f"{len(mine)} bench entities left"
            c.alter_client_quotas(
                [QuotaAlteration(e, dict.fromkeys(live[e])) for e in mine], validate_only=False
            )
            time.sleep(0.2)


def _env(source: Path | None) -> dict[str, str]:
    env = dict(os.environ, NO_COLOR="1")
    env.pop("FORCE_COLOR", None)
    if source is not None:
        env["PYTHONPATH"] = str(source)
    return env


RUNNER = """
import json, os, subprocess, sys, time
for line in sys.stdin:
    argv, env = json.loads(line)
    t = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - t
    proc.stderr.close()
    print(json.dumps({"seconds": seconds, "peak_rss_mib": usage.ru_maxrss / 1024,
                      "exit": os.waitstatus_to_exitcode(status),
                      "stderr": err.decode(errors="replace")[-2000:]}), flush=True)
"""


class Runner:
    """Spawns the measured processes from a small Python process of its own.

    Linux counts a parent's peak RSS into a child's (``ru_maxrss`` survives
    fork and exec), so children spawned by this benchmark, which holds a
    broker's worth of entities, would all report its size. The runner stays
    at about 10 MiB, the floor of any Python process."""

    def __init__(self) -> None:
        # Children start in a neutral directory: ``python -m quotaform`` puts
        # the working directory first on sys.path, ahead of --source.
        self._proc = subprocess.Popen(
            [sys.executable, "-S", "-c", RUNNER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=tempfile.gettempdir(),
        )

    def run(self, argv: list[str], env: dict[str, str]) -> dict[str, Any]:
        """Run ``argv`` to completion: wall seconds, peak RSS (MiB), exit code."""
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(json.dumps([argv, env]) + "\n")
        self._proc.stdin.flush()
        result: dict[str, Any] = json.loads(self._proc.stdout.readline())
        return result

    def close(self) -> None:
        assert self._proc.stdin is not None
        self._proc.stdin.close()
        self._proc.wait()


def median_of(runs: list[dict[str, Any]], ok_exit: tuple[int, ...] = (0,)) -> dict[str, Any]:
    for r in runs:
        if r["exit"] not in ok_exit:
            raise RuntimeError(f"exit {r['exit']}: {r['stderr']}")
    seconds = [r["seconds"] for r in runs]
    return {
        "median_seconds": round(statistics.median(seconds), 4),
        "all_seconds": [round(s, 4) for s in seconds],
        "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs), 1),
    }


def top_imports(argv: list[str], env: dict[str, str], count: int = 12) -> list[dict[str, Any]]:
    """The ``count`` top-level imports with the largest cumulative time (ms)."""
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", *argv],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=False,
    )
    rows: list[tuple[int, str, bool]] = []  # (cumulative us, module, top-level)
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line[len("import time:") :].split("|")
        rows.append((int(cumulative), name.strip(), not name[1:].startswith(" ")))
    total = sum(c for c, _, top in rows if top)
    top = sorted(rows, reverse=True)[:count]
    return [{"module": n, "cumulative_ms": round(c / 1000, 1)} for c, n, _ in top] + [
        {"module": "(all top-level imports)", "cumulative_ms": round(total / 1000, 1)}
    ]


def quotaform_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "quotaform", *args]


def measure_render(manifest: Path, repeat: int) -> dict[str, Any]:
    """In this process: render_json of an N-create plan vs json.dumps of the same dicts."""
    from quotaform.formats.plan import render_json
    from quotaform.manifest import load_manifests
    from quotaform.plan.diff import compute_plan
    from quotaform.plan.review import review_plan
    from quotaform.plan.state import LiveState

    desired = load_manifests([manifest])
    plan = compute_plan(desired, LiveState({}))
    review = review_plan(plan, desired)
    rendered, render_s, dumps_s = "", [], []
    for _ in range(repeat):
        t = time.perf_counter()
        rendered = render_json(plan, review)
        render_s.append(time.perf_counter() - t)
    doc = json.loads(rendered)
    for _ in range(repeat):
        t = time.perf_counter()
        dumped = json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
        dumps_s.append(time.perf_counter() - t)
    assert json.loads(dumped) == doc
    return {
        "entities": len(plan.changes),
        "render_json_seconds": round(statistics.median(render_s), 4),
        "json_dumps_seconds": round(statistics.median(dumps_s), 4),
        "same_text": dumped == rendered,
        "ratio": round(statistics.median(render_s) / statistics.median(dumps_s), 2),
    }


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--plan-sizes", type=int, nargs="*", default=[100, 10000, 100000])
    parser.add_argument("--apply-sizes", type=int, nargs="*", default=[10000])
    parser.add_argument("--render-size", type=int, default=10000)
    parser.add_argument("--startup-runs", type=int, default=21)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--source", type=Path, help="run quotaform from this checkout")
    parser.add_argument("--out", type=Path)
    parser.add_argument("--child-render", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child_render:
        print(json.dumps(measure_render(args.child_render, args.repeat)))
        return 0

    runner = Runner()
    env = _env(args.source)
    # Bytecode as a pip install leaves it (pip compiles every module; the
    # floor's kafka-python and PyYAML have theirs): with PYTHONDONTWRITEBYTECODE
    # set, as on CI machines, an editable checkout would otherwise recompile
    # every quotaform module in every process (about 65 ms).
    import compileall

    compileall.compile_dir(str((args.source or HERE.parent) / "quotaform"), quiet=1, force=False)
    floor = [sys.executable, str(HERE / "floor.py")]
    measured = subprocess.run(
        [sys.executable, "-c", "import quotaform; print(quotaform.__file__)"],
        env=env,
        cwd=tempfile.gettempdir(),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    expected = (args.source or HERE.parent).resolve() / "quotaform" / "__init__.py"
    if Path(measured).resolve() != expected:
        raise SystemExit(f"quotaform would be imported from {measured}, not {expected}")
    results: dict[str, Any] = {
        "source": str(args.source or HERE.parent),
        "quotaform_imported_from": measured,
        "python": sys.version.split()[0],
        "machine_cpus": os.cpu_count(),
        "bytecode": "precompiled (compileall), as a pip install leaves it",
    }

    # -- start-up -----------------------------------------------------------
    bare = median_of(
        [runner.run([sys.executable, "-c", "pass"], env) for _ in range(args.startup_runs)]
    )
    helped = median_of(
        [runner.run(quotaform_argv("--help"), env) for _ in range(args.startup_runs)]
    )
    # What the libraries alone cost: the floor's imports, and the stack the
    # project is built on (typer, pydantic, rich, ruamel.yaml) on top of them.
    floor_imports = median_of(
        [
            runner.run([sys.executable, "-c", "import kafka, yaml"], env)
            for _ in range(args.startup_runs)
        ]
    )
    stack_imports = median_of(
        [
            runner.run(
                [
                    sys.executable,
                    "-c",
                    "import kafka, yaml, typer.main, pydantic, rich.console, ruamel.yaml",
                ],
                env,
            )
            for _ in range(args.startup_runs)
        ]
    )
    results["startup"] = {
        "import_kafka_yaml": floor_imports,
        "import_kafka_and_stack": stack_imports,
        "python_c_pass": bare,
        "quotaform_help": helped,
        "ratio": round(helped["median_seconds"] / bare["median_seconds"], 2),
        "help_imports": top_imports(["-m", "quotaform", "--help"], env),
    }
    print(json.dumps({"startup": results["startup"]["ratio"]}), file=sys.stderr)

    from quotaform.sandbox import start_broker, stop_broker

    started = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        started = start_broker(name="bench", on_progress=lambda m: print(m, file=sys.stderr))
        bootstrap = started.bootstrap
    try:
        with tempfile.TemporaryDirectory() as tmp:
            # -- plan: N live entities, no change ------------------------------
            results["plan"] = {}
            for n in args.plan_sizes:
                manifest = write_manifests(Path(tmp), n)
                wipe(bootstrap)
                run_child("raw-alter", bootstrap, n, None)
                wait_converged(bootstrap, n)
                qf_argv = quotaform_argv("plan", str(manifest), "--bootstrap-server", bootstrap)
                fl_argv = [*floor, "plan", "--bootstrap-server", bootstrap, str(manifest)]
                fl, qf = [], []
                for _ in range(args.repeat):
                    fl.append(runner.run(fl_argv, env))
                    qf.append(runner.run(qf_argv, env))
                entry = {"floor": median_of(fl), "quotaform": median_of(qf)}
                entry["ratio"] = round(
                    entry["quotaform"]["median_seconds"] / entry["floor"]["median_seconds"], 2
                )
                results["plan"][str(n)] = entry
                print(json.dumps({f"plan {n}": entry}), file=sys.stderr)
                if n == args.plan_sizes[0]:
                    results["startup"]["plan_imports"] = top_imports(
                        ["-m", "quotaform", *qf_argv[3:]], env
                    )

            # -- apply: N creates ---------------------------------------------
            results["apply"] = {}
            for n in args.apply_sizes:
                manifest = write_manifests(Path(tmp), n)
                fl_argv = [*floor, "apply", "--bootstrap-server", bootstrap, str(manifest)]
                qf_argv = quotaform_argv(
                    "apply", str(manifest), "--bootstrap-server", bootstrap, "--auto-approve"
                )
                fl, qf = [], []
                for _ in range(args.repeat):
                    wipe(bootstrap)
                    fl.append(runner.run(fl_argv, env))
                    wipe(bootstrap)
                    qf.append(runner.run(qf_argv, env))
                wipe(bootstrap)
                entry = {"floor": median_of(fl), "quotaform": median_of(qf)}
                entry["ratio"] = round(
                    entry["quotaform"]["median_seconds"] / entry["floor"]["median_seconds"], 2
                )
                results["apply"][str(n)] = entry
                print(json.dumps({f"apply {n}": entry}), file=sys.stderr)

            # -- JSON rendering -----------------------------------------------
            if args.render_size:
                manifest = write_manifests(Path(tmp), args.render_size)
                proc = subprocess.run(
                    [
                        sys.executable,
                        __file__,
                        "--child-render",
                        str(manifest),
                        "--repeat",
                        str(args.repeat),
                    ],
                    env=env,
                    cwd=tempfile.gettempdir(),
                    capture_output=True,
                    text=True,
                    check=True,
                )
                results["render"] = json.loads(proc.stdout.strip().splitlines()[-1])
                print(json.dumps({"render": results["render"]["ratio"]}), file=sys.stderr)
    finally:
        if started is not None:
            stop_broker(name="bench")
        runner.close()
    write_results(results, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
