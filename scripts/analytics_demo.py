"""The fleet analytics end to end on a JMX sandbox broker (run by scripts/analytics-demo).

Applies examples/analytics/manifest.yaml, drives real kafka-python clients on
loopback for --seconds (a saturated producer, a light one, a saturated
consumer), collects the broker's quota MBeans with JmxTool into the usage
table, then runs analyze utilisation, recommend, and impact of a plan that
lowers the default user's produce quota below the light producer's rate.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import threading
from pathlib import Path

from kafka.admin import KafkaAdminClient, NewTopic

from quotaform.app.collect import collect_jmx
from quotaform.sandbox import BrokerOptions, start_broker, stop_broker
from quotaform.sandbox.load import consume, produce

KiB = 1024
ROOT = Path(__file__).resolve().parent.parent
QF = [sys.executable, "-m", "quotaform"]


def run(*args: str, ok: tuple[int, ...] = (0,)) -> None:
    print("==", "quotaform", *args, file=sys.stderr, flush=True)
    code = subprocess.run([*QF, *args], check=False).returncode
    if code not in ok:
        raise SystemExit(f"quotaform {args[0]} exited {code}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=ROOT / "analytics-demo-out")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--engine", default="spark", choices=("spark", "python"))
    parser.add_argument("--keep", action="store_true", help="leave the broker running")
    args = parser.parse_args()
    shutil.rmtree(args.out, ignore_errors=True)
    (args.out / "manifests").mkdir(parents=True)
    manifest = args.out / "manifests" / "quotas.yaml"
    manifest.write_text(
        (ROOT / "examples" / "analytics" / "manifest.yaml").read_text(encoding="utf-8"),
        encoding="utf-8",
    )
    broker = start_broker(name="analytics-demo", options=BrokerOptions(jmx_port=0))
    bootstrap = broker.bootstrap
    try:
        common = ["--bootstrap-server", bootstrap]
        run("apply", str(manifest), *common, "--auto-approve", "--allow-deletes",
            "--allow-relax", "--allow-default-removal")  # fmt: skip
        admin = KafkaAdminClient(bootstrap_servers=bootstrap)
        existing = set(admin.list_topics())
        admin.create_topics(
            [NewTopic(t, 1, 1) for t in ("demo-load", "demo-fill") if t not in existing]
        )
        admin.close()
        produce(bootstrap, "demo-fill", client_id="demo-fill", seconds=60, max_bytes=16 << 20)
        jobs = [
            lambda: produce(bootstrap, "demo-load", client_id="demo-saturated",
                            seconds=args.seconds),
            lambda: produce(bootstrap, "demo-load", client_id="demo-light",
                            seconds=args.seconds, rate=100 * KiB),
            lambda: consume(bootstrap, "demo-fill", client_id="demo-consumer",
                            seconds=args.seconds, max_bytes=16 << 20),
        ]  # fmt: skip
        threads = [threading.Thread(target=job, daemon=True) for job in jobs]
        for thread in threads:
            thread.start()
        usage = args.out / "usage.jsonl"
        print(f"== collecting the broker's quota MBeans for {args.seconds:g} s", file=sys.stderr)
        with usage.open("w", encoding="utf-8") as fh:
            collect_jmx(broker.jmx_port or 0, fh, cluster="analytics-demo", broker="1",
                        seconds=args.seconds, interval_s=2.0)  # fmt: skip
        for thread in threads:
            thread.join(60)
        engine = ["--engine", args.engine]
        run("analyze", "utilisation", str(manifest), "--usage", str(usage),
            "--out", str(args.out / "utilisation"), *engine)  # fmt: skip
        run("analyze", "recommend", str(manifest), "--usage", str(usage),
            "--out", str(args.out / "recommend"), *engine)  # fmt: skip
        manifest.write_text(
            manifest.read_text(encoding="utf-8").replace("4MiB", "48KiB"), encoding="utf-8"
        )
        plan = args.out / "plan.json"
        run("plan", str(manifest), *common, "--out", str(plan), "--allow-relax", ok=(0, 2))
        run("analyze", "impact", "--plan", str(plan), "--usage", str(usage),
            "--out", str(args.out / "impact"), *engine)  # fmt: skip
        for part in ("utilisation", "recommend", "impact"):
            print(f"\n{(args.out / part / 'report.md').read_text(encoding='utf-8')}")
        print(f"== reports (HTML with plots) in {args.out}/*/report.html", file=sys.stderr)
    finally:
        if not args.keep:
            stop_broker(name="analytics-demo")


if __name__ == "__main__":
    main()
