"""Output defects met on first use (issue 34): a running sandbox found by
name whatever its size, the exit-code table's 4, scaled quotas in readable
units, a duration written with a space, and scripts/bootstrap's last line.
(The sandbox's own start with stand-in nodes: tests/unit/test_sandbox_nodes.py.)"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.errors import EXIT_CODE_MEANINGS, EXIT_SANDBOX_UNRESPONSIVE
from quotaform.kafka.entity import Entity
from quotaform.kafka.units import format_readable
from quotaform.plan.storage_types import ScaledKey, StorageScaling, StorageState
from quotaform.render.storage import scaling_lines

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "tests" / "fixtures" / "analytics"
MiB = 1 << 20
runner = CliRunner()


def test_sandbox_up_by_name_passes_no_size_so_a_running_sandbox_of_any_size_is_found(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    asked: list[dict[str, Any]] = []

    class Found:
        single_node, bootstrap = False, "127.0.0.1:1,127.0.0.1:2,127.0.0.1:3"
        version, cluster_id, data_dir, nodes = "4.3.1", "X", Path("/nowhere"), ()

    def start_broker(**kwargs: Any) -> Found:
        asked.append(kwargs)
        return Found()

    monkeypatch.setattr("quotaform.cli.sandbox.start_broker", start_broker)
    up = runner.invoke(app, ["sandbox", "up", "--name", "three"])
    assert up.exit_code == 0, up.output
    assert up.stdout == Found.bootstrap + "\n"
    assert (asked[0]["brokers"], asked[0]["controllers"]) == (None, None)
    sized = runner.invoke(app, ["sandbox", "up", "--name", "three", "--brokers", "3"])
    assert sized.exit_code == 0, sized.output
    assert (asked[1]["brokers"], asked[1]["controllers"]) == (3, None)


def test_exit_code_4_of_sandbox_status_also_means_some_nodes_down() -> None:
    meaning = EXIT_CODE_MEANINGS[EXIT_SANDBOX_UNRESPONSIVE]
    assert "not answering" in meaning and "some nodes down" in meaning
    shown = runner.invoke(app, ["sandbox", "status", "--help"], env={"COLUMNS": "200"})
    assert "4 not answering or some nodes down" in " ".join(shown.output.split())


def test_scaled_values_read_in_units_not_raw_bytes() -> None:
    scaling = StorageScaling(
        state=StorageState.THROTTLE,
        factor=0.65,
        computed=0.652,
        held=False,
        reason=None,
        ages={"1": 30.0},
        lack_of_data=False,
        scaled=(ScaledKey(Entity.of(user="svc-orders"), 2.0 * MiB, 1363148.0),),
    )
    lines = "\n".join(scaling_lines(scaling))
    assert "declared 2MiB x 0.65 (THROTTLE) -> writes 1.3MiB" in lines
    assert "1363148" not in lines
    # storage watch's "writing ... 1363148 -> 1MiB" reads the same way
    assert format_readable("producer_byte_rate", 1363148.0) == "1.3MiB"
    # what reads exactly in the manifests' units stays exact
    assert format_readable("producer_byte_rate", 2.0 * MiB) == "2MiB"
    assert format_readable("producer_byte_rate", 512.0) == "512"
    assert format_readable("request_percentage", 12.5) == "12.5%"


def test_a_duration_written_with_a_space_says_how_durations_are_written(tmp_path: Path) -> None:
    usage = FIXTURES / "usage.csv"
    result = runner.invoke(
        app,
        ["analyze", "utilisation", "--usage", str(usage), "--out", str(tmp_path / "out"),
         "--since", "5", "minutes"],
    )  # fmt: skip
    assert result.exit_code != 0
    assert "without a space" in result.output and "5m" in result.output, result.output
    assert "(file)" not in result.output and "no such file" not in result.output


def test_bootstrap_labels_the_jars_folder_it_prints(tmp_path: Path) -> None:
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "bootstrap", tmp_path / "scripts" / "bootstrap")
    for name in ("pyproject.toml", "constraints.txt"):
        (tmp_path / name).write_text("", encoding="utf-8")
    bin_dir = tmp_path / ".venv" / "bin"
    bin_dir.mkdir(parents=True)
    for name, body in (("python", "exit 0"), ("quotaform", "echo /cache/kafka-4.3.1/libs")):
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
        (bin_dir / name).chmod(0o755)
    stamp = tmp_path / ".venv" / ".quotaform-installed-bytecode"
    stamp.touch()
    os.utime(stamp, (2e9, 2e9))  # newer than pyproject.toml: nothing to install
    done = subprocess.run(
        ["bash", str(tmp_path / "scripts" / "bootstrap")],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert done.stdout == ""
    lines = done.stderr.splitlines()
    assert all(line.startswith("bootstrap: ") for line in lines), lines
    assert "bootstrap: Kafka broker jars: /cache/kafka-4.3.1/libs" in lines
