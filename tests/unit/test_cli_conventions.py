"""The CLI's contract with pipelines, without a broker: exit codes of usage
errors, help text, colour, wrapping, the Error: prefix, fast and quiet
connection failures, Terraform's spellings, the describe filter, show.

Tests that need a cluster live in tests/integration/test_cli_pipeline.py.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import click
import pytest
import typer
from typer.testing import CliRunner

from quotaform.cli import output
from quotaform.cli.app import COMMANDS, app
from quotaform.cli.describe import selection
from quotaform.cli.output import make_console, writes_plain
from quotaform.cluster.wire.types import FilterComponent
from quotaform.errors import ClusterConfigError
from quotaform.formats.planfile import write_plan_file
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.plan.diff import compute_plan
from quotaform.plan.review import review_plan
from quotaform.plan.state import LiveState
from quotaform.render.text import render_text
from tests.docblocks import doc_text, table_rows

from .builders import example_plan

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "examples" / "manifests"
runner = CliRunner()
ESCAPE = "\x1b["


def quotaform(
    *args: str, env: dict[str, str] | None = None, **kw: object
) -> subprocess.CompletedProcess[str]:
    """Run the real console script (a separate process: no terminal, real streams)."""
    full = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("QUOTAFORM_", "NO_COLOR", "FORCE_COLOR"))
    }
    full.update(env or {})
    return subprocess.run(
        [sys.executable, "-m", "quotaform", *args],
        capture_output=True,
        text=True,
        env=full,
        timeout=60,
        check=False,
        **kw,  # type: ignore[arg-type]
    )


def bad_manifest(folder: Path, name: str = "bad.yaml") -> Path:
    path = folder / name
    path.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\n"
        "spec:\n  scope: [{shape: user}]\n  quotas:\n"
        "    - entity: {user: a}\n      values: {producer_byte_rate: 10MiBs, nope: 1}\n",
        encoding="utf-8",
    )
    return path


# ----------------------------------------------------------------- exit codes


@pytest.mark.parametrize("command", [c for c in COMMANDS if c != "sandbox"] + ["sandbox up"])
def test_a_usage_error_exits_1_never_2_on_every_command(command: str) -> None:
    # 2 means "changes present" (--detailed-exitcode, drift): a typo must not read as it.
    result = runner.invoke(app, [*command.split(), "--no-such-option"])
    assert result.exit_code == 1, result.output
    assert "No such option: --no-such-option" in result.output


def test_a_misspelt_detailed_exitcode_exits_1_and_suggests_the_option() -> None:
    result = runner.invoke(app, ["plan", str(MANIFESTS), "--detailed-exitcod"])
    assert result.exit_code == 1
    assert "Possible options: --detailed-exitcode" in result.output


def test_a_missing_argument_and_an_unknown_command_exit_1() -> None:
    assert runner.invoke(app, ["plan"]).exit_code == 1
    assert runner.invoke(app, ["destroy"]).exit_code == 1


def test_an_option_before_the_command_gets_a_hint_where_it_goes() -> None:
    result = runner.invoke(app, ["--detailed-exitcode", "plan", str(MANIFESTS)])
    assert result.exit_code == 1
    assert (
        "Options of a command go after it, e.g. quotaform plan MANIFESTS --detailed-exitcode"
        in (result.output)
    )


def test_global_flags_work_before_and_after_the_command() -> None:
    before = quotaform("-v", "--no-color", "validate", str(MANIFESTS))
    after = quotaform("validate", str(MANIFESTS), "-no-color", "-v")
    for result in (before, after):
        assert result.returncode == 0, result.stderr
        assert "INFO quotaform.manifest.loader: loaded 18 entities for cluster 'sandbox'" in (
            result.stderr
        )


def _options(command: str) -> set[str]:
    group = typer.main.get_command(app)
    found = group.get_command(click.Context(group), command)  # type: ignore[attr-defined]
    return {opt for param in found.params for opt in param.opts}


def test_terraform_single_dash_spellings_exist() -> None:
    assert {"-detailed-exitcode", "-out"} <= _options("plan")
    assert "-auto-approve" in _options("apply")
    # -no-color is global and accepted after any command (see above).
    result = runner.invoke(app, ["validate", str(MANIFESTS), "-no-color"])
    assert result.exit_code == 0, result.output


# ----------------------------------------------------------------- help


def _help(*command: str) -> str:
    result = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    "command",
    [[c] for c in COMMANDS if c != "sandbox"]
    + [["sandbox", s] for s in ("up", "down", "status", "fetch")],
    ids=" ".join,
)
def test_help_shows_no_python_type_names(command: list[str]) -> None:
    text = _help(*command)
    assert not re.search(r"<(list|str|int|float|path|file|Path)\b", text), text
    assert "{" not in text.split("\n", 1)[0], text  # the usage line: PATH..., not {manifests}...


def test_the_command_list_shows_every_summary_in_full() -> None:
    text = _help()
    for name, (_, summary) in COMMANDS.items():
        assert re.search(rf"^\s+{re.escape(name)}\s+{re.escape(summary)}$", text, re.M), name


def test_help_is_fast_and_imports_no_command() -> None:
    code = (
        "import sys, time; t=time.perf_counter(); from quotaform.cli.app import app; "
        "import quotaform.cli.app as a; "
        "print(sorted(m for m in sys.modules "
        "if m.startswith(('kafka', 'pydantic', 'quotaform.cluster'))))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


#: Counts the collector's runs while a command's module is imported, first as
#: :func:`quotaform.cli.app.main` imports it, then plainly (the control).
_COLLECTIONS = """
import gc, importlib, json, sys
runs = []
gc.callbacks.append(lambda phase, info: runs.append(phase) if phase == "start" else None)
from quotaform.cli.app import _import_command
runs.clear()
if sys.argv[1] == "paused":
    _import_command(["-v", sys.argv[2], "x.yaml"])
else:
    importlib.import_module("quotaform.cli." + sys.argv[2])
print(json.dumps({"runs": len(runs), "frozen": gc.get_freeze_count(), "on": gc.isenabled()}))
"""


@pytest.mark.parametrize("command", ["plan", "apply", "explain"])
def test_a_command_is_imported_with_the_collector_paused_then_frozen(command: str) -> None:
    def run(how: str) -> dict[str, Any]:
        argv = [sys.executable, "-c", _COLLECTIONS, how, command]
        out = subprocess.run(argv, capture_output=True, text=True, check=True)
        return cast(dict[str, Any], json.loads(out.stdout))

    plain, paused = run("plain"), run("paused")
    assert plain["runs"] > 10 and plain["frozen"] == 0  # the control: imports collect
    assert paused["runs"] == 0
    assert paused["frozen"] > 50_000  # what the imports made is never scanned again
    assert paused["on"]  # the command itself runs with the collector


# ----------------------------------------------------------------- output streams


def test_no_color_and_NO_COLOR_strip_every_style(tmp_path: Path) -> None:
    bad = bad_manifest(tmp_path)
    forced = quotaform("validate", str(bad), env={"FORCE_COLOR": "1"})
    assert forced.returncode == 1
    assert ESCAPE in forced.stderr  # the control: a forced terminal is styled
    for result in (
        quotaform("validate", str(bad), env={"FORCE_COLOR": "1", "NO_COLOR": "1"}),
        quotaform("--no-color", "validate", str(bad), env={"FORCE_COLOR": "1"}),
        quotaform("validate", str(bad), "-no-color", env={"FORCE_COLOR": "1"}),
    ):
        assert result.returncode == 1
        assert ESCAPE not in result.stderr + result.stdout


def test_errors_are_not_wrapped_and_every_line_has_the_error_prefix(tmp_path: Path) -> None:
    folder = tmp_path / ("a-rather-long-directory-name-" * 4)
    folder.mkdir()
    bad = bad_manifest(folder)
    result = quotaform("validate", str(bad), env={"COLUMNS": "40"})
    assert result.returncode == 1
    lines = result.stderr.splitlines()
    assert len(lines) == 2, lines  # two problems, one line each, however narrow
    assert all(line.startswith(f"Error: {bad}:8: spec.quotas[0].values.") for line in lines)


def test_a_silent_port_fails_within_the_timeout_and_quietly() -> None:
    # A loopback listener that accepts and never answers: the worst case.
    with _silent_listener() as port:
        start = time.monotonic()
        result = quotaform("describe", "--bootstrap-server", f"127.0.0.1:{port}", "--timeout", "1")
        took = time.monotonic() - start
    assert result.returncode == 1
    assert took < 10, took
    assert result.stderr.startswith("Error: "), result.stderr
    assert "no Kafka answer within 1 s" in result.stderr
    assert "ERROR" not in result.stderr and "kafka." not in result.stderr  # no library noise


def test_an_unknown_host_says_cannot_resolve() -> None:
    result = quotaform(
        "describe", "--bootstrap-server", "no-such-host.invalid:9092", "--timeout", "2"
    )
    assert result.returncode == 1
    assert "cannot resolve" in result.stderr
    assert "ERROR" not in result.stderr


class _silent_listener:
    def __enter__(self) -> int:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.accepted: list[socket.socket] = []
        self.stop = False

        def accept() -> None:
            self.sock.settimeout(0.2)
            while not self.stop:
                try:
                    conn, _ = self.sock.accept()
                    self.accepted.append(conn)
                except OSError:
                    continue

        self.thread = threading.Thread(target=accept, daemon=True)
        self.thread.start()
        return int(self.sock.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        self.stop = True
        self.thread.join(2)
        for conn in self.accepted:
            conn.close()
        self.sock.close()


# ----------------------------------------------------------------- units


def test_any_unit_spelling_is_shown_normalised_in_the_plan(tmp_path: Path) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\n"
        "spec:\n  scope: [{shape: user}]\n  quotas:\n"
        "    - entity: {user: a}\n"
        "      values: {producer_byte_rate: 10mb, consumer_byte_rate: 2 mib / S}\n",
        encoding="utf-8",
    )
    desired = load_manifests([path])
    plan = compute_plan(desired, LiveState(entities={}))
    text = render_text(plan, review_plan(plan, desired)).plain
    assert "10MB" in text and "2MiB" in text
    assert "10mb" not in text and "mib" not in text


# ----------------------------------------------------------------- show


def test_show_prints_a_saved_plan_in_every_format(tmp_path: Path) -> None:
    plan, review = example_plan(allow_deletes=True)
    path = tmp_path / "plan.json"
    write_plan_file(plan, review, path)
    as_json = runner.invoke(app, ["show", str(path), "-o", "json"])
    assert as_json.exit_code == 0, as_json.output
    document = json.loads(as_json.stdout)
    saved = json.loads(path.read_text(encoding="utf-8"))
    assert document == saved["plan"]  # the plan document, as plan -o json prints it
    text = runner.invoke(app, ["show", str(path)])
    assert text.exit_code == 0
    assert text.stdout == render_text(plan, review).plain + "\n"
    assert "not signed" in text.stderr
    markdown = runner.invoke(app, ["show", str(path), "-o", "markdown"])
    assert markdown.stdout.startswith("### ")


def test_show_refuses_a_damaged_plan_file(tmp_path: Path) -> None:
    plan, review = example_plan(allow_deletes=True)
    path = tmp_path / "plan.json"
    write_plan_file(plan, review, path)
    path.write_text(path.read_text(encoding="utf-8").replace('"create"', '"delete"', 1), "utf-8")
    result = runner.invoke(app, ["show", str(path)])
    assert result.exit_code == 1
    assert "damaged or was edited" in result.output


# ----------------------------------------------------------------- describe's filter


def _sel(
    types: Sequence[str] = (),
    names: Sequence[str] = (),
    default: bool = False,
    **short: tuple[str | None, bool],
) -> list[FilterComponent] | None:
    shorthands = {"user": (None, False), "client-id": (None, False), "ip": (None, False)}
    shorthands.update({k.replace("_", "-"): v for k, v in short.items()})
    return selection(list(types), list(names), default, shorthands)


def test_describe_speaks_kafka_configs() -> None:
    assert _sel() is None  # everything
    assert _sel(["users"]) == [FilterComponent.any("user")]
    assert _sel(["users"], ["alice"]) == [FilterComponent.exact("user", "alice")]
    assert _sel(["users"], [], True) == [FilterComponent.default("user")]
    # Names pair with the --entity-type options in the order given.
    assert _sel(["clients", "users"], ["app", "alice"]) == [
        FilterComponent.exact("user", "alice"),
        FilterComponent.exact("client-id", "app"),
    ]
    assert _sel(["users", "clients"]) == [
        FilterComponent.any("user"),
        FilterComponent.any("client-id"),
    ]
    assert _sel(client_id=("app", False), user=(None, True)) == [
        FilterComponent.default("user"),
        FilterComponent.exact("client-id", "app"),
    ]
    assert _sel(["ips"], ["192.0.2.10"]) == [FilterComponent.exact("ip", "192.0.2.10")]


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"types": ["topics"]}, "client quotas have entity types users|clients|ips"),
        ({"types": ["users"], "names": ["a", "b"]}, "one --entity-name per --entity-type"),
        ({"types": ["users", "clients"], "names": ["a"]}, "--user/--client say which is which"),
        ({"types": ["users", "clients"], "default": True}, "exactly one --entity-type"),
        ({"types": ["users"], "names": ["a"], "default": True}, "and no --entity-name"),
        ({"types": ["users"], "user": ("a", False)}, "entity type user is given twice"),
        ({"types": ["ips", "users"]}, "ips cannot be combined"),
        ({"user": ("a", True)}, "not both"),
    ],
)
def test_describe_refuses_what_kafka_configs_would(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ClusterConfigError, match=re.escape(message)):
        _sel(**kwargs)  # type: ignore[arg-type]


def test_describe_text_is_kafka_configs_wording() -> None:
    from quotaform.render.describe import render_describe_text

    live = LiveState(
        entities={
            Entity.of(user="alice", client_id=None): {"producer_byte_rate": 20971520.0},
            Entity.of(user=None): {"request_percentage": 12.5, "consumer_byte_rate": 1048576.0},
            Entity.of(ip="192.0.2.10"): {"connection_creation_rate": 100.0},
        }
    )
    assert render_describe_text(live).plain.splitlines() == [
        "Quota configs for the default user-principal are consumer_byte_rate=1048576.0, "
        "request_percentage=12.5",
        "Quota configs for user-principal 'alice', the default client-id are "
        "producer_byte_rate=2.097152E7",
        "Quota configs for ip '192.0.2.10' are connection_creation_rate=100.0",
    ]


# ----------------------------------------------------------------- the documentation's contract
# (The exit-code table is written from EXIT_CODE_MEANINGS when the site is
# built: tests/unit/test_docs_site.py reads it back from the built page.)


def test_the_docs_list_every_json_document_and_its_schema() -> None:
    from quotaform.formats.schemas import SCHEMAS

    rows = table_rows("docs/json-documents.md", "# JSON documents")
    assert sorted(row[2].strip("`").removeprefix("schemas/") for row in rows) == sorted(SCHEMAS)
    for name in SCHEMAS:
        schema = json.loads((ROOT / "schemas" / name).read_text(encoding="utf-8"))
        # Inputs versioned otherwise: manifests by apiVersion, usage rows by their
        # fixed contract columns (a table row carries no format_version column).
        if name not in ("manifest.schema.json", "usage.schema.json"):
            assert "format_version" in schema["properties"], name


# ----------------------------------------------------------------- set-up


def test_set_up_installs_only_the_extras_each_script_needs() -> None:
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    extras = project["optional-dependencies"]
    assert not any(d.startswith("pyspark") for d in project["dependencies"] + extras["dev"])
    assert any(d.startswith("pyspark") for d in extras["spark"])  # only the Spark engine's
    assert "quotaform[docs]" in extras["dev"]  # the tests build the documentation site
    demo = (ROOT / "scripts" / "demo").read_text(encoding="utf-8")
    test = (ROOT / "scripts" / "test").read_text(encoding="utf-8")
    assert "\nbash scripts/bootstrap\n" in demo  # quotaform itself, no extras
    assert "\nbash scripts/bootstrap dev,spark\n" in test  # the tests run the Spark engine
    bootstrap = (ROOT / "scripts" / "bootstrap").read_text(encoding="utf-8")
    assert 'PYTHONWARNINGS="ignore::UserWarning"' in bootstrap  # no setuptools banner
    assert "--quiet -c constraints.txt" not in bootstrap  # pip's progress is shown


def test_the_readme_says_how_to_run_quotaform_after_set_up() -> None:
    readme = doc_text("README.md")
    first = readme.split("\n## ", 1)[0]
    assert "bash scripts/demo" in first and "bash scripts/test" in first
    assert ".venv/bin/quotaform" in first and "source .venv/bin/activate" in first
    assert "sandbox up --name demo" in first  # reaching the demo broker again
    assert "examples/ci/workflows/" in first
    assert "(docs/pipelines.md)" in first
    assert doc_text("docs/pipelines.md").startswith(
        "# Pipelines and reviews\n\n`examples/ci/workflows/`"
    )


@pytest.mark.parametrize(
    "env",
    [
        {},
        {"FORCE_COLOR": "1"},
        {"FORCE_COLOR": ""},
        {"TTY_COMPATIBLE": "1"},
        {"TTY_COMPATIBLE": "0"},
    ],
)
@pytest.mark.parametrize("terminal", [False, True])
def test_a_report_is_written_without_rich_only_where_rich_writes_plain_text(
    env: dict[str, str], terminal: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    import pty

    for name in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE", "NO_COLOR"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("TERM", "xterm-256color")
    monkeypatch.setitem(output._COLOUR, "on", True)  # as if no --no-color ran before
    if terminal:
        leader, follower = pty.openpty()  # the leader stays open: a hung-up tty is none
        stream = open(follower, "w", encoding="utf-8")  # noqa: SIM115
    else:
        reader, writer = os.pipe()
        os.close(reader)
        stream = open(writer, "w", encoding="utf-8")  # noqa: SIM115
    with stream:
        monkeypatch.setattr(sys, "stdout", stream)
        plain = writes_plain(stream)
        console = make_console()
        if plain:
            assert console.color_system is None  # rich, asked, writes plain text too
        assert plain is (not terminal and not env)  # the control: a terminal is styled
        if terminal and not env:
            assert console.color_system is not None
    if terminal:
        os.close(leader)
