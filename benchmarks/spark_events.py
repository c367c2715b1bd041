"""Where a Spark run's time went: its event log as one line per job (start
after the application started, wall time, description) and per stage (wall
time, tasks, summed task run time in ms, shuffle bytes written and read,
input records).

    SPARK_CONF_DIR=D quotaform analyze utilisation ... --engine spark   # D/spark-defaults.conf:
    #   spark.eventLog.enabled true / spark.eventLog.dir file:///E / spark.eventLog.compress false
    .venv/bin/python benchmarks/spark_events.py E      # the newest log under E

Gaps between jobs are driver time (Python, Catalyst planning); a stage whose
task run time does not grow with the input is a fixed cost.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    path = Path((argv or sys.argv[1:])[0])
    while path.is_dir():
        path = max(path.iterdir(), key=lambda p: p.stat().st_mtime)
    jobs: dict[int, dict] = {}
    stages: dict[int, dict] = {}
    app_start = 0
    for line in path.open(encoding="utf-8"):
        event = json.loads(line)
        kind = event["Event"]
        if kind == "SparkListenerApplicationStart":
            app_start = event["Timestamp"]
        elif kind == "SparkListenerJobStart":
            props = event.get("Properties", {})
            desc = props.get("spark.job.description") or props.get("callSite.short", "")
            jobs[event["Job ID"]] = {
                "start": event["Submission Time"],
                "stages": event["Stage IDs"],
                "desc": desc,
            }
        elif kind == "SparkListenerJobEnd":
            jobs[event["Job ID"]]["end"] = event["Completion Time"]
        elif kind == "SparkListenerStageCompleted":
            info = event["Stage Info"]
            acc = {a["Name"]: a.get("Value") for a in info.get("Accumulables", [])}
            stages[info["Stage ID"]] = {
                "name": info["Stage Name"][:60],
                "tasks": info["Number of Tasks"],
                "wall": (info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1000,
                "run_ms": acc.get("internal.metrics.executorRunTime"),
                "shuffle_w": acc.get("internal.metrics.shuffle.write.bytesWritten"),
                "shuffle_r": acc.get("internal.metrics.shuffle.read.localBytesRead"),
                "records": acc.get("internal.metrics.input.recordsRead"),
            }
    total = 0.0
    for job_id, job in sorted(jobs.items()):
        wall = (job.get("end", job["start"]) - job["start"]) / 1000
        total += wall
        at = (job["start"] - app_start) / 1000 if app_start else 0.0
        print(f"job {job_id:3d} @{at:6.1f}s {wall:6.2f}s  {job['desc'][:70]}")
        for stage_id in job["stages"]:
            s = stages.get(stage_id)
            if s is not None:
                print(
                    f"    stage {stage_id:3d} {s['wall']:6.2f}s tasks={s['tasks']:3d} "
                    f"run_ms={s['run_ms']} shuffle_w={s['shuffle_w']} shuffle_r={s['shuffle_r']} "
                    f"records={s['records']} {s['name']}"
                )
    print(f"jobs: {len(jobs)}, sum of job wall times {total:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
