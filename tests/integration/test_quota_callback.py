"""A real broker with a custom quota callback (KIP-257): ``client.quota.callback.class``
set to ``tests/fixtures/callback/FlatQuotaCallback.java`` (every client one flat
1 MiB/s produce and fetch limit, one quota group per user, stored quotas
ignored), compiled with javac against the cached Kafka jars.

The broker really enforces the callback's limit with no quota stored, where
Kafka's default resolution says "unlimited"; so ``explain`` (live), ``plan``'s
probe view and ``analyze`` (live quotas) name the class and mark what they
resolve as not enforced, in text and JSON; ``docs/explain.md's per-broker and callbacks section``'s
commands run here exactly as shown. On the session broker (no callback)
``explain`` says the limit applies per broker, on its 1 broker.
"""

from __future__ import annotations

import json
import os
import shlex
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.sandbox import DEFAULT_KAFKA_VERSION, SandboxBroker
from quotaform.words import per_broker_sentence
from tests.docblocks import fenced_blocks, section

from .helpers import write_manifest
from .quota_callback import FLAT_CALLBACK, FLAT_LIMIT, flat_callback_options

# Under pytest-xdist one worker runs the whole module: its module fixture starts once.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("callback")]

ROOT = Path(__file__).resolve().parents[2]
DOC = section("docs/explain.md", "## Per-broker limits and custom quota callbacks")
runner = CliRunner()

#: A 1 s quota window (2 samples of 1 s) so a few MiB cross the flat limit at once.
_FAST_WINDOW = {"quota.window.num": "2", "quota.window.size.seconds": "1"}


@pytest.fixture(scope="module")
def flat_broker(sandbox_broker: Any) -> Iterator[SandboxBroker]:
    """A sandbox broker whose quota callback is the flat 1 MiB/s one."""
    version = os.environ.get("QUOTAFORM_TEST_KAFKA_VERSION", DEFAULT_KAFKA_VERSION)
    failure = None
    try:
        options = flat_callback_options(version, _FAST_WINDOW)
    except Exception as exc:  # no javac or jars: FAIL, never skip
        failure = f"Could not compile the test quota callback ({type(exc).__name__}): {exc}"
    if failure is not None:
        pytest.fail(failure, pytrace=False)
    with sandbox_broker(f"pytest-callback-{os.getpid()}", options=options) as broker:
        yield broker


def _explain(bootstrap: str, *args: str) -> str:
    result = runner.invoke(
        app,
        ["explain", "--bootstrap-server", bootstrap, "--user", "alice", "--client-id", "ingest",
         *args],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return result.stdout


def test_explain_names_the_callback_and_marks_the_default_resolution_not_enforced(
    flat_broker: SandboxBroker,
) -> None:
    text = _explain(flat_broker.bootstrap)
    said = " ".join(text.split())
    assert f"client.quota.callback.class={FLAT_CALLBACK}" in said
    assert "NOT what the brokers enforce" in said
    assert "nothing throttles it" not in said  # what explain said before the callback was read
    assert "every quota key would be unlimited" in said
    for key in ("producer_byte_rate", "consumer_byte_rate", "request_percentage"):
        (line,) = [line for line in text.splitlines() if line.startswith(f"  {key} ")]
        assert "[not enforced] unlimited" in line, line
    doc = json.loads(_explain(flat_broker.bootstrap, "-o", "json"))
    assert (doc["brokers"], doc["quota_callback"], doc["resolution_enforced"]) == (
        1,
        FLAT_CALLBACK,
        False,
    )
    assert {k["enforced"] for k in doc["quotas"].values()} == {False}
    assert doc["enforcement"]["quota_callbacks"] == {"1": FLAT_CALLBACK}


def test_monitor_rules_record_no_limit_where_the_callback_decides_and_alert_why(
    flat_broker: SandboxBroker, tmp_path: Path
) -> None:
    """``monitor rules`` from the live cluster reads the callback: no limit
    rule for the keys it decides (even with an entity stored), the ip keys
    still resolved, a warning, and the callback alert naming the class."""
    from ruamel.yaml import YAML

    from quotaform.monitor.rules import ALERT_CALLBACK, ENTRY, LIMIT

    scope = [{"shape": "user"}, {"shape": "ip"}]
    manifest = write_manifest(
        tmp_path / "quotas.yaml", "flat",
        [{"entity": {"user": "alice"}, "values": {"producer_byte_rate": "10MiB"}},
         {"entity": {"ip": "192.0.2.10"}, "values": {"connection_creation_rate": 5}}],
        scope=scope,
    )  # fmt: skip
    applied = runner.invoke(
        app, ["apply", str(manifest), "--bootstrap-server", flat_broker.bootstrap, "--auto-approve"]
    )
    assert applied.exit_code == 0, applied.output
    try:
        result = runner.invoke(
            app, ["monitor", "rules", "--bootstrap-server", flat_broker.bootstrap, "--out", "-"]
        )
        assert result.exit_code == 0, result.output
        said = " ".join(result.stderr.split())
        assert f"client.quota.callback.class={FLAT_CALLBACK}" in said, said
        assert "limits for connection_creation_rate)" in said, said
        rules = [r for g in YAML(typ="safe").load(result.stdout)["groups"] for r in g["rules"]]
        limits = [r["labels"]["quota_key"] for r in rules if r.get("record") == LIMIT]
        entries = [r["labels"]["quota_key"] for r in rules if r.get("record") == ENTRY]
        assert limits == entries == ["connection_creation_rate"]
        (alert,) = [r for r in rules if r.get("alert") == ALERT_CALLBACK]
        assert (alert["labels"]["quota_callback"], alert["labels"]["brokers"]) == (
            FLAT_CALLBACK,
            "1",
        )
    finally:
        removed = runner.invoke(
            app,
            ["apply", str(write_manifest(tmp_path / "none.yaml", "flat", scope=scope)),
             "--bootstrap-server", flat_broker.bootstrap, "--auto-approve", "--allow-deletes"],
        )  # fmt: skip
        assert removed.exit_code == 0, removed.output


def test_the_broker_throttles_at_the_callbacks_limit_with_no_quota_stored(
    flat_broker: SandboxBroker,
) -> None:
    """Why the statement matters: explain's default resolution says
    unlimited, yet a producer over 1 MiB/s is throttled."""
    from kafka import KafkaProducer

    doc = json.loads(_explain(flat_broker.bootstrap, "-o", "json"))
    assert doc["quotas"]["producer_byte_rate"]["value"] is None  # default resolution: unlimited
    producer = KafkaProducer(
        bootstrap_servers=flat_broker.bootstrap,
        client_id="ingest",
        acks=1,
        linger_ms=5,
        batch_size=256 * 1024,
    )
    try:
        payload = b"x" * 100_000
        sent, throttled, started = 0, 0.0, time.monotonic()
        while not throttled and sent < 10 * FLAT_LIMIT:  # 1 MiB at a time: over 1 MiB/s
            for _ in range(int(FLAT_LIMIT / len(payload))):
                producer.send("flat-quota", payload)
                sent += len(payload)
            producer.flush(timeout=60)
            throttled = producer.metrics()["producer-metrics"]["throttle-time-max"]
        elapsed = time.monotonic() - started
    finally:
        producer.close()
    assert throttled > 0, f"{sent / FLAT_LIMIT:.0f} MiB in {elapsed:.1f} s: never throttled"


def test_the_json_plan_and_drift_record_the_callback_for_their_probes(
    flat_broker: SandboxBroker, tmp_path: Path
) -> None:
    manifest = write_manifest(
        tmp_path / "quotas.yaml",
        "flat",
        [{"entity": {"user": "alice"}, "values": {"producer_byte_rate": "10MiB"}}],
        scope=[{"shape": "user"}],
        probes=[{"user": "alice", "client-id": "ingest"}],
    )
    result = runner.invoke(
        app, ["plan", str(manifest), "--bootstrap-server", flat_broker.bootstrap, "-o", "json"]
    )
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["enforcement"]["quota_callback"] == FLAT_CALLBACK
    assert (doc["enforcement"]["brokers"], doc["enforcement"]["resolution_enforced"]) == (1, False)
    (probe,) = doc["probes"]
    assert probe["resolution_enforced"] is False
    assert probe["keys"]["producer_byte_rate"]["after"]["enforced"] is False
    # drift's probe view too: the cron that watches the quotas says they do not decide
    server = ["--bootstrap-server", flat_broker.bootstrap]
    drifted = runner.invoke(app, ["drift", str(manifest), *server, "-o", "json"])
    assert drifted.exit_code == 2, drifted.output  # alice's quota is declared, not live
    doc = json.loads(drifted.stdout)
    assert doc["enforcement"]["quota_callback"] == FLAT_CALLBACK
    (probe,) = doc["probes"]
    assert probe["resolution_enforced"] is False
    shown = runner.invoke(app, ["drift", str(manifest), *server])
    assert shown.exit_code == 2, shown.output
    text = " ".join(shown.stdout.split())
    assert FLAT_CALLBACK in text and "[not enforced]" in text, shown.stdout


def _usage_line(cluster: str) -> str:
    row = {
        "cluster": cluster, "broker": "1", "timestamp": "2026-11-23T10:00:00Z",
        "metric": "produce-byte-rate", "user": "alice", "client_id": "ingest", "ip": None,
        "value": FLAT_LIMIT,
    }  # fmt: skip
    return json.dumps(row) + "\n"


def test_explain_on_a_broker_without_a_callback_says_per_broker_and_how_many(
    kafka_broker: SandboxBroker,
) -> None:
    text = " ".join(_explain(kafka_broker.bootstrap).split())
    assert "Quotas are limits per broker, enforced on the cluster's 1 broker." in text
    assert "not enforced" not in text and "callback" not in text
    doc = json.loads(_explain(kafka_broker.bootstrap, "-o", "json"))
    assert (doc["brokers"], doc["quota_callback"], doc["resolution_enforced"]) == (1, None, True)
    assert doc["enforcement"]["quota_callbacks"] == {"1": None}


# ------------------------------------------------------------------ the docs


def _blocks(kind: str) -> list[str]:
    return fenced_blocks(DOC, kind)


def test_the_docs_commands_run_as_shown(
    flat_broker: SandboxBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every command of docs/explain.md's per-broker and callbacks section, exactly as shown (plain
    ``quotaform`` command lines: run through the CLI in-process, which the
    ``quotaform`` script is), with ``QUOTAFORM_BOOTSTRAP_SERVER`` naming the
    callback broker (as the page says), in a directory holding the page's
    manifest and a usage file: the page's sample outputs are what explain and
    plan print, and analyze (live quotas) names the callback in its reports."""
    (manifest,) = _blocks("yaml")
    (tmp_path / "quotas.yaml").write_text(manifest, encoding="utf-8")
    (tmp_path / "usage.jsonl").write_text(_usage_line("flat"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    (commands,) = _blocks("bash")
    runs = []
    for command in [line for line in commands.splitlines() if line.strip()]:
        argv = shlex.split(command)
        assert argv[0] == "quotaform" and not set("|<>;&$`") & set(command), command
        done = runner.invoke(
            app, argv[1:], env={"QUOTAFORM_BOOTSTRAP_SERVER": flat_broker.bootstrap}
        )
        assert done.exit_code == 0, (command, done.output)
        runs.append(done)
    explained, as_json, planned, analyzed = runs
    per_broker, explain_sample, probe_sample = _blocks("text")
    assert per_broker.strip() == per_broker_sentence(3)
    for shown in explain_sample.splitlines()[2:]:  # the head names the cluster id
        assert shown in explained.stdout, (shown, explained.stdout)
    assert json.loads(as_json.stdout)["resolution_enforced"] is False
    for shown in probe_sample.splitlines():
        assert shown in planned.stdout, (shown, planned.stdout)
    assert "Warning: The brokers use a custom quota callback" in planned.stdout
    warned = " ".join(analyzed.stderr.split())
    assert "Warning: cluster 'flat': The brokers use a custom quota callback" in warned
    summary = json.loads((tmp_path / "out" / "summary.json").read_text(encoding="utf-8"))
    assert (summary["resolution_enforced"], summary["quota_callback"]) == (False, FLAT_CALLBACK)
    assert summary["enforcement"]["flat"]["brokers"] == 1
    assert FLAT_CALLBACK in (tmp_path / "out" / "report.md").read_text(encoding="utf-8")
