"""The pipeline examples in examples/ci/ call only the CLI that exists.

Every ``quotaform ...`` command line in a workflow's ``run:`` steps (and in
the shell blocks of examples/ci/README.md, the README and every page of the
documentation site) is checked against the real typer app: the command
exists, every option is one of its options, every choice value is allowed.
So renaming an option breaks this test, not somebody's pipeline or a reader.
"""

from __future__ import annotations

import enum
import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import click
import pytest
import typer
from ruamel.yaml import YAML

from quotaform.cli.app import app
from quotaform.manifest import load_manifests
from tests.docblocks import ROOT, documents

CI = Path(__file__).resolve().parents[2] / "examples" / "ci"
WORKFLOWS = sorted((CI / "workflows").glob("*.yml"))
ROOT_COMMAND = typer.main.get_command(app)

_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")
_SHELL_BLOCK = re.compile(r"```(?:bash|sh|shell)\n(.*?)```", re.DOTALL)
#: Where readers are shown shell blocks: the pipelines' README, the README, the site.
SHOWN = [CI / "README.md", *documents()]


def run_scripts(workflow: Path) -> Iterator[tuple[str, str]]:
    """``(step name, run script)`` of every step of every job."""
    doc = YAML(typ="safe").load(workflow)
    for job_name, job in doc["jobs"].items():
        for index, step in enumerate(job.get("steps", [])):
            if "run" in step:
                yield f"{job_name}/{step.get('name', index)}", step["run"]


def command_lines(script: str) -> Iterator[str]:
    """Logical shell lines: continuations joined, heredoc bodies and comments dropped."""
    lines = script.replace("\\\n", " ").splitlines()
    end: str | None = None
    for line in lines:
        if end is not None:
            if line.strip() == end:
                end = None
            continue
        heredoc = _HEREDOC.search(line)
        if heredoc:
            end = heredoc.group(1)
        if line.strip() and not line.strip().startswith("#"):
            yield line


def invocations(line: str) -> Iterator[list[str]]:
    """The arguments after each ``quotaform`` (or ``.venv/bin/quotaform``) in
    command position, up to the next shell operator (``|``, ``>``, ``&&``,
    ``;``, ``)`` ...)."""
    lexer = shlex.shlex(line, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    tokens = list(lexer)
    for start, token in enumerate(tokens):
        if token != "quotaform" and not token.endswith("/bin/quotaform"):
            continue
        if start > 0 and tokens[start - 1] not in ("|", "||", "&&", ";", "(", "$(", "then", "do"):
            continue
        args: list[str] = []
        rest = tokens[start + 1 :]
        for index, arg in enumerate(rest):
            following = rest[index + 1] if index + 1 < len(rest) else ""
            redirect = re.fullmatch(r"\d+", arg) and following.startswith((">", "<"))
            if set(arg) <= set("|&;<>()") or redirect:
                break
            args.append(arg)
        yield args


def _options(command: Any) -> dict[str, Any]:
    return {
        opt: param
        for param in command.params
        if param.param_type_name == "option"
        for opt in (*param.opts, *param.secondary_opts)
    }


def _choices(param: Any) -> list[str] | None:
    annotation = getattr(getattr(param, "type_descriptor", None), "annotation", None)
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return [str(m.value) for m in annotation]
    return None


def check_invocation(args: list[str]) -> list[str]:
    """Problems with ``quotaform ARGS`` (empty: it would parse)."""
    problems: list[str] = []
    command = ROOT_COMMAND
    path = ["quotaform"]
    rest = list(args)
    while hasattr(command, "list_commands"):  # a group: options, then a subcommand
        options = _options(command)
        while rest and rest[0].startswith("-"):
            if rest[0] not in options:
                return [f"{' '.join(path)}: no option {rest[0]}"]
            rest.pop(0)
        if not rest:
            return [f"{' '.join(path)}: no command given"]
        name = rest.pop(0)
        found = command.get_command(click.Context(command), name)
        if found is None:
            return [f"{' '.join(path)}: no command {name!r}"]
        command, path = found, [*path, name]
    options = _options(command)
    arguments = [p for p in command.params if p.param_type_name == "argument"]
    positional = 0
    while rest:
        token = rest.pop(0)
        if not token.startswith("-") or token == "-":
            positional += 1
            continue
        name, has_value, value = token.partition("=")
        param = options.get(name)
        if param is None:
            problems.append(f"{' '.join(path)}: no option {name}")
            continue
        if param.is_flag or getattr(param, "count", False):
            continue
        if not has_value:
            if not rest:
                problems.append(f"{' '.join(path)}: {name} needs a value")
                continue
            value = rest.pop(0)
        choices = _choices(param)
        if choices is not None and "$" not in value and value not in choices:
            problems.append(f"{' '.join(path)}: {name} {value!r} is not one of {choices}")
    if arguments and arguments[0].required and positional == 0:
        problems.append(f"{' '.join(path)}: missing {arguments[0].name}")
    return problems


def test_there_are_four_workflows() -> None:
    assert [w.name for w in WORKFLOWS] == [
        "quotaform-apply.yml",
        "quotaform-drift.yml",
        "quotaform-monitor.yml",
        "quotaform-plan.yml",
    ]


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_every_quotaform_call_uses_existing_commands_and_options(workflow: Path) -> None:
    calls = [
        (step, args)
        for step, script in run_scripts(workflow)
        for line in command_lines(script)
        for args in invocations(line)
    ]
    assert calls, f"{workflow.name} calls quotaform nowhere"
    problems = [f"{step}: {p}" for step, args in calls for p in check_invocation(args)]
    assert problems == []


@pytest.mark.parametrize("workflow", WORKFLOWS, ids=lambda p: p.name)
def test_secrets_only_reach_environment_variables(workflow: Path) -> None:
    for step, script in run_scripts(workflow):
        assert "secrets." not in script, f"{workflow.name} {step}: a secret in a run script"
    text = workflow.read_text(encoding="utf-8")
    for line in text.splitlines():
        if "${{ secrets." in line:
            assert re.match(r"^\s+[A-Z][A-Z0-9_]*: \$\{\{ secrets\.[A-Z0-9_]+ \}\}$", line), line


@pytest.mark.parametrize("document", SHOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_the_commands_readers_are_shown_exist_too(document: Path) -> None:
    text = document.read_text(encoding="utf-8")
    calls = [
        args
        for block in _SHELL_BLOCK.findall(text)
        for line in command_lines(block)
        for args in invocations(line)
    ]
    problems = [p for args in calls for p in check_invocation(args)]
    assert problems == [], document.name


def test_the_readme_and_the_site_show_commands() -> None:
    # Not vacuous: the documents above do show quotaform commands, and the
    # checker sees the README's .venv/bin/quotaform ones too.
    shown = {
        path.name: len(
            [
                args
                for block in _SHELL_BLOCK.findall(path.read_text(encoding="utf-8"))
                for line in command_lines(block)
                for args in invocations(line)
            ]
        )
        for path in SHOWN
    }
    assert shown["README.md"] >= 9, shown
    assert all(shown[name] > 0 for name in ("plan-and-apply.md", "explain.md", "analytics.md"))
    assert sum(shown.values()) >= 40, shown


def test_the_checker_catches_rot() -> None:
    assert check_invocation(["plan", "x", "--detailed-exitcode"]) == []
    assert check_invocation(["-v", "sandbox", "up", "--name", "ci"]) == []
    assert check_invocation(["plan", "x", "--detailed-exit-code"]) == [
        "quotaform plan: no option --detailed-exit-code"
    ]
    assert check_invocation(["plan", "x", "-o", "yaml"]) == [
        "quotaform plan: -o 'yaml' is not one of ['text', 'json', 'markdown']"
    ]
    assert check_invocation(["destroy", "x"]) == ["quotaform: no command 'destroy'"]
    assert check_invocation(["plan"]) == ["quotaform plan: missing manifests"]
    line = 'set +e; quotaform drift "$M" --command-config "$T/c.properties" -o json > d.json'
    assert list(invocations(line)) == [
        ["drift", "$M", "--command-config", "$T/c.properties", "-o", "json"]
    ]
    assert list(invocations("pip install quotaform")) == []
    line = "export S=$(.venv/bin/quotaform sandbox up --name demo)  # already up"
    assert list(invocations(line)) == [["sandbox", "up", "--name", "demo"]]


def test_workflows_sit_beside_the_manifests_not_among_them() -> None:
    # Visible workflows (examples/ci/workflows), and examples/manifests still
    # loads as one manifest set: the folder every workflow names.
    assert load_manifests([CI.parent / "manifests"]).cluster == "sandbox"
    for workflow in WORKFLOWS:
        assert "MANIFESTS: examples/manifests" in workflow.read_text(encoding="utf-8")
