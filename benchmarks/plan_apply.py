"""Benchmark plan and apply against the sandbox broker, beside the raw limits.

For each size N (default 1,000 and 10,000 user entities):

* ``raw-alter``: batched AlterClientQuotas sent directly with kafka-python
  (no manifests, no planning, no validate_only, no read-back): the floor for
  creating N entities.
* ``apply``: ``quotaform`` load + plan + validate_only + alter + read-back of
  the same N creates, through the library the CLI calls.
* ``raw-describe``: one strict DescribeClientQuotas of the user shape.
* ``plan``: ``quotaform`` load + describe + diff + JSON rendering, with the N
  entities live (a no-change plan).
* ``kafka-configs``: Kafka's own ConfigCommand creating a sample of the same
  entities, one JVM invocation each (time per entity, extrapolated to N).

Every measurement runs in its own Python process, so its peak RSS is its own.
Usage::

    .venv/bin/python benchmarks/plan_apply.py [--sizes 1000 10000] [--repeat 3]
        [--bootstrap-server HOST:PORT] [--config-command-sample 10] [--out FILE]

Without ``--bootstrap-server`` a sandbox named ``bench`` is started and stopped.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
PREFIX = "bench-"


def write_manifests(directory: Path, n: int) -> Path:
    """N user entities in one manifest file, scope = users named bench-*."""
    lines = [
        "apiVersion: quotaform.io/v1",
        "kind: ClientQuotas",
        "metadata:",
        "  cluster: bench",
        "spec:",
        "  scope:",
        "    - shape: user",
        f'      prefixes: {{user: ["{PREFIX}"]}}',
        "      includeDefaults: false",
        "  allowDeletes: true",
        "  quotas:",
    ]
    for i in range(n):
        lines.append(f"    - entity: {{user: {PREFIX}{i:06d}}}")
        lines.append("      values: {producer_byte_rate: 1MiB, consumer_byte_rate: 2MiB}")
    path = directory / f"bench-{n}.yaml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def write_results(results: dict[str, Any], out: Path | None) -> None:
    """Print the results as JSON, and write them to ``out`` when given."""
    text = json.dumps(results, indent=2)
    print(text)
    if out is not None:
        out.write_text(text + "\n", encoding="utf-8")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _entities(n: int) -> list[Any]:
    from quotaform.kafka.entity import Entity

    return [Entity.of(user=f"{PREFIX}{i:06d}") for i in range(n)]


def measure(kind: str, bootstrap: str, n: int, manifest: str | None) -> dict[str, Any]:
    """One measurement in this process; returns seconds, RPC counts, peak RSS."""
    from quotaform.cluster.wire import (
        FilterComponent,
        QuotaAlteration,
        load_connection_settings,
        open_admin,
    )

    settings = load_connection_settings(bootstrap_server=bootstrap)
    client = open_admin(settings, read_only=kind in ("plan", "raw-describe"))
    phases: dict[str, float] = {}
    try:
        t0 = time.perf_counter()
        if kind == "raw-alter":
            # kafka-python directly: build the requests and send them.
            from kafka.protocol.admin import AlterClientQuotasRequest as Req

            names = [f"{PREFIX}{i:06d}" for i in range(n)]
            for start in range(0, n, 5000):  # 2 ops per entity: 10,000 records
                request = Req(
                    entries=[
                        Req.EntryData(
                            entity=[Req.EntryData.EntityData(entity_type="user", entity_name=name)],
                            ops=[
                                Req.EntryData.OpData(
                                    key="producer_byte_rate", value=1048576.0, remove=False
                                ),
                                Req.EntryData.OpData(
                                    key="consumer_byte_rate", value=2097152.0, remove=False
                                ),
                            ],
                        )
                        for name in names[start : start + 5000]
                    ],
                    validate_only=False,
                )

                async def send(req: Any = request) -> Any:
                    return await client._manager.send(req)

                response = client._manager.run(send)
                client.rpc_counts["AlterClientQuotas"] = (
                    client.rpc_counts.get("AlterClientQuotas", 0) + 1
                )
                bad = [e for e in response.entries if e.error_code]
                assert not bad, bad[:3]
        elif kind == "raw-describe":
            got = client.describe_client_quotas([FilterComponent.any("user")], strict=True)
            assert len(got) >= n, (len(got), n)
        elif kind in ("plan", "apply"):
            from quotaform.cluster.apply import apply_plan
            from quotaform.cluster.read import read_live_state
            from quotaform.formats.plan import render_json
            from quotaform.manifest import load_manifests
            from quotaform.plan.diff import compute_plan
            from quotaform.plan.outcome import ApplyStatus
            from quotaform.plan.review import review_plan

            assert manifest is not None
            t = time.perf_counter()
            desired = load_manifests([manifest])
            phases["load"] = time.perf_counter() - t
            t = time.perf_counter()
            live = read_live_state(client, desired.scope, count_unmanaged=False)
            phases["describe"] = time.perf_counter() - t
            t = time.perf_counter()
            plan = compute_plan(desired, live)
            review = review_plan(plan, desired)
            phases["diff"] = time.perf_counter() - t
            if kind == "plan":
                t = time.perf_counter()
                render_json(plan, review)
                phases["render"] = time.perf_counter() - t
                assert not plan.summary.has_changes, plan.summary
            else:
                assert plan.summary.create == n, plan.summary
                t = time.perf_counter()
                result = apply_plan(plan, client)
                phases["apply"] = time.perf_counter() - t
                assert result.status is ApplyStatus.APPLIED, result.status
        elif kind == "wipe":
            alts = [
                QuotaAlteration(e, {"producer_byte_rate": None, "consumer_byte_rate": None})
                for e in _entities(n)
            ]
            client.alter_client_quotas(alts, validate_only=False)
            deadline = time.monotonic() + 60
            while _bench_count(client):
                assert time.monotonic() < deadline, "wipe did not converge"
                time.sleep(0.1)
        else:
            raise ValueError(kind)
        seconds = time.perf_counter() - t0
    finally:
        client.close()
    return {
        "kind": kind,
        "n": n,
        "seconds": seconds,
        "phases": phases,
        "rpc_counts": dict(client.rpc_counts),
        "peak_rss_mib": _peak_rss_mib(),
    }


def _bench_count(client: Any) -> int:
    from quotaform.cluster.wire import FilterComponent

    live = client.describe_client_quotas([FilterComponent.any("user")], strict=True)
    return sum(1 for e in live if (e.name("user") or "").startswith(PREFIX))


def run_child(kind: str, bootstrap: str, n: int, manifest: Path | None) -> dict[str, Any]:
    args = [
        sys.executable,
        str(HERE),
        "--child",
        kind,
        "--bootstrap-server",
        bootstrap,
        "--n",
        str(n),
    ]
    if manifest is not None:
        args += ["--manifest", str(manifest)]
    proc = subprocess.run(args, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} n={n} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def wait_converged(bootstrap: str, n: int) -> None:
    """After a raw alter: wait until describe shows all N (not part of any timing)."""
    from quotaform.cluster.wire import load_connection_settings, open_admin

    with open_admin(load_connection_settings(bootstrap_server=bootstrap), read_only=True) as c:
        deadline = time.monotonic() + 60
        while _bench_count(c) < n:
            assert time.monotonic() < deadline
            time.sleep(0.1)


def kafka_configs_sample(bootstrap: str, version: str, sample: int) -> dict[str, Any]:
    from quotaform.sandbox import run_config_command

    times = []
    for i in range(sample):
        t = time.perf_counter()
        run_config_command(
            [
                "--alter",
                "--add-config",
                "producer_byte_rate=1048576,consumer_byte_rate=2097152",
                "--entity-type",
                "users",
                "--entity-name",
                f"kc-{PREFIX}{i:06d}",
            ],
            bootstrap=bootstrap,
            version=version,
        )
        times.append(time.perf_counter() - t)
    for i in range(sample):
        run_config_command(
            [
                "--alter",
                "--delete-config",
                "producer_byte_rate,consumer_byte_rate",
                "--entity-type",
                "users",
                "--entity-name",
                f"kc-{PREFIX}{i:06d}",
            ],
            bootstrap=bootstrap,
            version=version,
        )
    return {"sample": sample, "median_seconds_per_entity": statistics.median(times)}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000])
    parser.add_argument(
        "--repeat", type=int, default=3, help="runs per measurement; the median is reported"
    )
    parser.add_argument("--bootstrap-server")
    parser.add_argument("--config-command-sample", type=int, default=10)
    parser.add_argument("--out", type=Path, help="also write the JSON results here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--n", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--manifest", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.child:
        print(json.dumps(measure(args.child, args.bootstrap_server, args.n, args.manifest)))
        return 0

    from quotaform.sandbox import DEFAULT_KAFKA_VERSION, start_broker, stop_broker

    started = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        started = start_broker(name="bench", on_progress=lambda m: print(m, file=sys.stderr))
        bootstrap = started.bootstrap
    results: dict[str, Any] = {"bootstrap": bootstrap, "sizes": {}}
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for n in args.sizes:
                manifest = write_manifests(Path(tmp), n)
                runs: dict[str, list[dict[str, Any]]] = {
                    k: [] for k in ("raw-alter", "apply", "raw-describe", "plan")
                }
                for _ in range(args.repeat):
                    run_child("wipe", bootstrap, n, None)
                    runs["raw-alter"].append(run_child("raw-alter", bootstrap, n, None))
                    wait_converged(bootstrap, n)
                    runs["raw-describe"].append(run_child("raw-describe", bootstrap, n, None))
                    run_child("wipe", bootstrap, n, None)
                    runs["apply"].append(run_child("apply", bootstrap, n, manifest))
                    runs["plan"].append(run_child("plan", bootstrap, n, manifest))
                run_child("wipe", bootstrap, n, None)
                summary = {}
                for kind, rs in runs.items():
                    median = sorted(rs, key=lambda r: r["seconds"])[len(rs) // 2]
                    summary[kind] = {
                        "median_seconds": round(median["seconds"], 3),
                        "all_seconds": [round(r["seconds"], 3) for r in rs],
                        "phases": {k: round(v, 3) for k, v in median["phases"].items()},
                        "rpc_counts": median["rpc_counts"],
                        "peak_rss_mib": round(max(r["peak_rss_mib"] for r in rs), 1),
                    }
                summary["ratio_apply_to_raw_alter"] = round(
                    summary["apply"]["median_seconds"] / summary["raw-alter"]["median_seconds"], 2
                )
                summary["ratio_plan_to_raw_describe"] = round(
                    summary["plan"]["median_seconds"] / summary["raw-describe"]["median_seconds"], 2
                )
                results["sizes"][str(n)] = summary
                print(json.dumps({str(n): summary}, indent=2), file=sys.stderr)
        version = started.version if started else DEFAULT_KAFKA_VERSION
        kc = kafka_configs_sample(bootstrap, version, args.config_command_sample)
        kc["extrapolated_seconds"] = {
            str(n): round(kc["median_seconds_per_entity"] * n, 1) for n in args.sizes
        }
        results["kafka_configs"] = kc
    finally:
        if started is not None:
            stop_broker(name="bench")
    write_results(results, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
