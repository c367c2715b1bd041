"""Two applies never both succeed: the cluster's apply lock (a topic whose
creation only one client can win), tested with the lock held in-process, with
``--lock-timeout``, with ``unlock``, and with two real ``quotaform apply``
processes racing on saved plans made from the same state."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.cluster.lock import LOCK_TOPIC, acquire, release
from quotaform.cluster.wire import load_connection_settings, open_admin
from quotaform.kafka.entity import Entity

from .helpers import config_command_view, eventually, quota, write_manifest

pytestmark = pytest.mark.broker
runner = CliRunner()


def manifest(path: Path, prefix: str, n: int, value: str) -> Path:
    return write_manifest(
        path,
        "sandbox",
        [quota({"user": f"{prefix}{i:04d}"}, producer_byte_rate=value) for i in range(n)],
        scope=[{"shape": "user", "prefixes": {"user": [prefix]}}],
    )


@pytest.fixture
def held(kafka_broker):  # type: ignore[no-untyped-def]
    """The apply lock, taken in this process as another apply would."""
    settings = load_connection_settings(bootstrap_server=kafka_broker.bootstrap, env={})
    client = open_admin(settings, read_only=False)
    holder = acquire(client, settings, command="another apply (test)")
    yield client, holder
    release(client)
    client.close()


def test_a_held_lock_refuses_apply_and_names_the_holder(
    held, kafka_broker, clean, config_command, tmp_path: Path, uniq: str
) -> None:  # type: ignore[no-untyped-def]
    client, holder = held
    path = manifest(tmp_path / "m.yaml", uniq, 1, "1MiB")
    args = ["--bootstrap-server", kafka_broker.bootstrap]
    refused = runner.invoke(app, ["apply", str(path), *args, "--auto-approve"])
    assert refused.exit_code == 1, refused.output
    assert "another apply holds this cluster's apply lock" in refused.output
    assert f"lock id {holder.lock_id}" in refused.output
    assert f"quotaform unlock --lock-id {holder.lock_id}" in refused.output
    assert config_command_view(config_command) == {}

    shown = runner.invoke(app, ["unlock", *args])
    assert shown.exit_code == 1 and f"--lock-id {holder.lock_id}" in shown.output
    wrong = runner.invoke(app, ["unlock", *args, "--lock-id", "0000"])
    assert wrong.exit_code == 1 and "not lock id 0000" in wrong.output
    released = runner.invoke(app, ["unlock", *args, "--lock-id", holder.lock_id])
    assert released.exit_code == 0, released.output
    assert LOCK_TOPIC not in client.list_topics()
    assert (
        runner.invoke(app, ["unlock", *args]).output.strip()
        == "The cluster's apply lock is not held."
    )

    applied = runner.invoke(app, ["apply", str(path), *args, "--auto-approve"])
    assert applied.exit_code == 0, applied.output
    assert LOCK_TOPIC not in client.list_topics(), "apply releases its lock"


def test_lock_timeout_waits_for_the_holder(
    held, kafka_broker, clean, tmp_path: Path, uniq: str
) -> None:  # type: ignore[no-untyped-def]
    client, _ = held
    path = manifest(tmp_path / "m.yaml", uniq, 1, "1MiB")
    threading.Timer(2.0, release, args=(client,)).start()
    start = time.monotonic()
    result = runner.invoke(
        app,
        [
            "apply",
            str(path),
            "--bootstrap-server",
            kafka_broker.bootstrap,
            "--auto-approve",
            "--lock-timeout",
            "30",
        ],
    )
    assert result.exit_code == 0, result.output
    assert time.monotonic() - start >= 1.5


@pytest.mark.parametrize("lock_timeout", ["0", "60"])
def test_two_saved_plans_applied_at_once_never_both_succeed(
    kafka_broker, clean, config_command, tmp_path: Path, uniq: str, lock_timeout: str
) -> None:  # type: ignore[no-untyped-def]
    n = 500
    env = {**os.environ, "QUOTAFORM_BOOTSTRAP_SERVER": kafka_broker.bootstrap}
    plans = []
    for name, value in (("a", "1MiB"), ("b", "2MiB")):
        path = manifest(tmp_path / f"{name}.yaml", uniq, n, value)
        planfile = tmp_path / f"{name}.json"
        made = runner.invoke(app, ["plan", str(path), "--out", str(planfile)], env=env)
        assert made.exit_code == 0, made.output
        plans.append(planfile)
    logs = [(tmp_path / f"{name}.out", tmp_path / f"{name}.err") for name in ("a", "b")]
    procs = []
    for planfile, (out, err) in zip(plans, logs, strict=True):
        # Files, not pipes: a full pipe would stall the lock holder while it prints.
        with out.open("w") as stdout, err.open("w") as stderr:
            procs.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "quotaform",
                        "apply",
                        str(planfile),
                        "--lock-timeout",
                        lock_timeout,
                    ],
                    env=env,
                    stdout=stdout,
                    stderr=stderr,
                )
            )
    codes = [p.wait(timeout=300) for p in procs]
    errors = [err.read_text(encoding="utf-8") for _, err in logs]
    assert codes.count(0) == 1, (codes, errors)
    loser = codes.index(0) ^ 1
    if lock_timeout == "0" and codes[loser] == 1:
        # It found the lock held and gave up at once.
        assert "another apply holds this cluster's apply lock" in errors[loser], errors
    else:
        # It waited for the lock (or came after), then found its plan stale.
        assert codes[loser] == 5, (codes, errors)
        assert "the saved plan is stale: 500 entities changed" in errors[loser], errors
        assert (
            f'user="{uniq}0000": planned from (no quotas), now producer_byte_rate=' in errors[loser]
        )
    winner_value = 1048576.0 if codes[0] == 0 else 2097152.0
    live = eventually(
        lambda: config_command_view(config_command),
        lambda v: (
            len(v) == n and all(q == {"producer_byte_rate": winner_value} for q in v.values())
        ),
    )
    assert set(live) == {Entity.of(user=f"{uniq}{i:04d}") for i in range(n)}


def test_reading_a_released_lock_never_recreates_it(kafka_broker) -> None:  # type: ignore[no-untyped-def]
    # A blocked apply reads the holder record while the holder releases: its
    # consumer's metadata request must not re-create the lock topic (the
    # broker auto-creates topics by default), or the lock would stay held by
    # nobody. Found when apply got fast enough for the race to happen.
    from quotaform.cluster.lock import current_holder

    settings = load_connection_settings(bootstrap_server=kafka_broker.bootstrap, env={})
    client = open_admin(settings, read_only=False)
    try:
        acquire(client, settings, command="test")
        release(client)
        assert current_holder(settings) is None
        time.sleep(0.5)
        assert LOCK_TOPIC not in client.list_topics()
        holder = acquire(client, settings, command="test")  # free: not left held
        assert current_holder(settings) == holder
        release(client)
    finally:
        client.close()
