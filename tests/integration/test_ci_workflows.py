"""The GitHub Actions workflows in examples/ci/workflows run as written
against a real SCRAM sandbox broker.

No ``act`` and no GitHub: a small runner executes each job's ``run:`` steps
in order with ``bash -e`` (as Actions does), with the job's ``env:``, the
secrets put where ``${{ secrets.* }}`` stands, ``$GITHUB_OUTPUT`` /
``$GITHUB_STEP_SUMMARY`` / ``$RUNNER_TEMP`` as files, and ``if:`` conditions
evaluated. ``uses:`` steps are recorded, not run: the sticky comment's file
and the artifacts' paths are what the test reads. ``gh`` is a shim that logs
its arguments. The only step not run is the pip install (quotaform is
installed already), and the only values changed are the two the workflows
say to set for one's cluster (security protocol and mechanism: the sandbox
speaks SASL_PLAINTEXT, not SASL_SSL).

The story: a pull request plans (changes: a comment and a saved plan), the
merge applies that plan, the cron finds the cluster in sync; someone adds a
quota by hand, the cron opens a drift issue, and the next pull request's plan
is refused with the reason and the flag in its comment.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from ruamel.yaml import YAML

from quotaform.cluster.wire import QuotaAlteration, load_connection_settings, open_admin
from quotaform.kafka.entity import Entity
from quotaform.sandbox import SandboxBroker
from tests.integration.helpers import SCRAM_USERS

# Under pytest-xdist one worker holds the session's SCRAM broker and the modules using it.
pytestmark = [pytest.mark.broker, pytest.mark.xdist_group("scram")]

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / "examples" / "ci" / "workflows"
USERS = SCRAM_USERS
#: The values the workflows ask to be set for one's cluster.
CLUSTER_SETTINGS = {"KAFKA_SECURITY_PROTOCOL": "SASL_PLAINTEXT"}
_EXPR = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")
_CONDITION = re.compile(r"^steps\.(\w+)\.outputs\.(\w+)\s*(==|!=)\s*'([^']*)'$")


@dataclass
class Step:
    name: str
    ran: bool
    code: int = 0
    stdout: str = ""
    stderr: str = ""


@dataclass
class Job:
    steps: list[Step] = field(default_factory=list)
    comments: list[str] = field(default_factory=list)
    artifacts: dict[str, list[str]] = field(default_factory=dict)
    summary: str = ""

    @property
    def failed(self) -> bool:
        return any(s.ran and s.code != 0 for s in self.steps)

    def step(self, name: str) -> Step:
        return next(s for s in self.steps if s.name == name)

    def text(self) -> str:
        return "\n".join(s.stdout + s.stderr for s in self.steps) + "\n".join(self.comments)


def _expand(value: str, secrets: dict[str, str]) -> str:
    def one(match: re.Match[str]) -> str:
        expr = match.group(1)
        if expr.startswith("secrets."):
            return secrets[expr.removeprefix("secrets.")]
        if expr == "github.token":
            return "test-github-token"
        raise AssertionError(f"the test runner does not know ${{{{ {expr} }}}}")

    return _EXPR.sub(one, value)


def _should_run(condition: str | None, failed: bool, outputs: dict[str, dict[str, str]]) -> bool:
    if condition is None:
        return not failed
    condition = condition.strip()
    if condition == "always()":
        return True
    match = _CONDITION.match(condition)
    assert match, f"the test runner does not know if: {condition}"
    step, key, op, expected = match.groups()
    actual = outputs.get(step, {}).get(key, "")
    return not failed and ((actual == expected) if op == "==" else (actual != expected))


def run_job(workflow: str, workspace: Path, secrets: dict[str, str], bin_dir: Path) -> Job:
    """Run the one job of ``workflow`` in ``workspace`` (see the module docstring)."""
    doc = YAML(typ="safe").load((WORKFLOWS / workflow).read_text(encoding="utf-8"))
    ((_, spec),) = doc["jobs"].items()
    temp = workspace / "runner-temp"
    temp.mkdir(exist_ok=True)
    summary = workspace / "step-summary.md"
    summary.write_text("", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith("QUOTAFORM_")}
    env.update({k: _expand(str(v), secrets) for k, v in spec.get("env", {}).items()})
    env.update(CLUSTER_SETTINGS)
    env.update(
        {
            "PATH": f"{bin_dir}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
            "RUNNER_TEMP": str(temp),
            "GITHUB_STEP_SUMMARY": str(summary),
            "GITHUB_RUN_ID": "4242",
            "GITHUB_SERVER_URL": "https://github.example",
            "GITHUB_REPOSITORY": "platform/quotas",
            "NO_COLOR": "1",
        }
    )
    job = Job()
    outputs: dict[str, dict[str, str]] = {}
    for index, step in enumerate(spec["steps"]):
        name = step.get("name", step.get("uses", str(index)))
        if not _should_run(step.get("if"), job.failed, outputs):
            job.steps.append(Step(name, ran=False))
            continue
        if "uses" in step:
            _record_action(step, workspace, job)
            job.steps.append(Step(name, ran=True))
            continue
        if step["run"].strip().startswith("pip install"):
            assert step["run"].strip() == "pip install -c constraints.txt .", step["run"]
            job.steps.append(Step(name, ran=True))
            continue
        output = workspace / f"output-{index}"
        output.write_text("", encoding="utf-8")
        step_env = {
            **env,
            **{k: _expand(str(v), secrets) for k, v in step.get("env", {}).items()},
            "GITHUB_OUTPUT": str(output),
        }
        proc = subprocess.run(
            ["bash", "-e", "-c", step["run"]],
            cwd=workspace,
            env=step_env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
        if "id" in step:
            outputs[step["id"]] = dict(
                line.split("=", 1) for line in output.read_text().splitlines() if "=" in line
            )
        job.steps.append(Step(name, True, proc.returncode, proc.stdout, proc.stderr))
    job.summary = summary.read_text(encoding="utf-8")
    return job


def _record_action(step: dict[str, Any], workspace: Path, job: Job) -> None:
    action = step["uses"].split("@")[0]
    inputs = step.get("with", {})
    if action in ("actions/checkout", "actions/setup-python"):
        return
    if action == "marocchino/sticky-pull-request-comment":
        path = workspace / inputs["path"]
        assert path.is_file(), f"the comment file {inputs['path']} was not written"
        job.comments.append(path.read_text(encoding="utf-8"))
        return
    if action == "actions/upload-artifact":
        paths = [p.strip() for p in inputs["path"].splitlines() if p.strip()]
        job.artifacts[inputs["name"]] = [p for p in paths if (workspace / p).exists()]
        return
    raise AssertionError(f"the test runner does not know the action {action}")


# ----------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def ci_broker(scram_broker: SandboxBroker) -> SandboxBroker:
    """The session's SCRAM broker (shared with the SASL tests), without client
    quotas when the module starts: the workflows' first plan creates everything."""
    return scram_broker


@pytest.fixture(scope="module")
def workspace(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A checkout of the repository as the workflows see it: examples/ and constraints.txt."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copytree(ROOT / "examples", root / "examples")
    shutil.copy(ROOT / "constraints.txt", root / "constraints.txt")
    return root


@pytest.fixture(scope="module")
def gh(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A ``gh`` that logs its arguments (one JSON list per line) and finds no open issue."""
    bin_dir = tmp_path_factory.mktemp("bin")
    log = bin_dir / "gh.log"
    shim = bin_dir / "gh"
    shim.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(json.dumps(sys.argv[1:]) + '\\n')\n",
        encoding="utf-8",
    )
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    log.write_text("", encoding="utf-8")
    return bin_dir, log


def _secrets(broker: SandboxBroker) -> dict[str, str]:
    return {
        "KAFKA_BOOTSTRAP_SERVER": broker.bootstrap,
        "QUOTAFORM_PLAN_USERNAME": "admin",
        "QUOTAFORM_PLAN_PASSWORD": USERS["admin"],
        "QUOTAFORM_APPLY_USERNAME": "admin",
        "QUOTAFORM_APPLY_PASSWORD": USERS["admin"],
    }


def _add_by_hand(broker: SandboxBroker, entity: Entity, quotas: dict[str, float]) -> None:
    """What someone running kafka-configs by hand does."""
    settings = replace(
        load_connection_settings(
            bootstrap_server=broker.bootstrap,
            env={"QUOTAFORM_SASL_USERNAME": "admin", "QUOTAFORM_SASL_PASSWORD": USERS["admin"]},
        ),
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="SCRAM-SHA-512",
    )
    client = open_admin(settings, read_only=False)
    try:
        client.alter_client_quotas([QuotaAlteration(entity, quotas)], validate_only=False)
    finally:
        client.close()


# ----------------------------------------------------------------- the story


def test_the_workflows_run_as_written(
    ci_broker: SandboxBroker, workspace: Path, gh: tuple[Path, Path]
) -> None:
    bin_dir, gh_log = gh
    secrets = _secrets(ci_broker)
    schemas = ROOT / "schemas"

    # 1. A pull request: the plan has changes (exit 2), posted as the comment,
    #    the saved plan kept as an artifact; the job passes.
    pr = run_job("quotaform-plan.yml", workspace, secrets, bin_dir)
    assert not pr.failed, pr.text()
    plan_md = (workspace / "plan.md").read_text(encoding="utf-8")
    assert pr.comments == [plan_md]
    assert plan_md.startswith("### quotaform plan")
    assert "18 to create" in plan_md
    assert list(pr.artifacts.values()) == [["plan.json", "plan.md"]]
    assert pr.step("Fail on a plan error").ran is False

    # 2. The merge: plan again, apply that saved plan; one JSON document.
    merged = run_job("quotaform-apply.yml", workspace, secrets, bin_dir)
    assert not merged.failed, merged.text()
    result = json.loads((workspace / "apply.json").read_text(encoding="utf-8"))
    apply_schema = json.loads((schemas / "apply.schema.json").read_text(encoding="utf-8"))
    jsonschema.validate(result, apply_schema)
    assert (result["status"], result["counts"]["applied"]) == ("applied", 18)
    assert result["plan"]["summary"]["create"] == 18
    assert "applied: 18 entities applied." in merged.step("Apply the saved plan").stdout
    assert "18 to create" in merged.summary

    # 3. The cron: in sync, nothing filed.
    cron = run_job("quotaform-drift.yml", workspace, secrets, bin_dir)
    assert not cron.failed, cron.text()
    assert "In sync." in cron.step("Drift").stdout
    assert cron.step("Open or update the drift issue").ran is False
    assert gh_log.read_text(encoding="utf-8") == ""

    # 4. Someone adds a quota by hand: the cron opens the drift issue.
    _add_by_hand(ci_broker, Entity.of(user="by-hand"), {"producer_byte_rate": 1234.0})
    cron = run_job("quotaform-drift.yml", workspace, secrets, bin_dir)
    assert not cron.failed, cron.text()
    assert "::warning title=quotaform drift::" in cron.step("Drift").stdout
    calls = [json.loads(line) for line in gh_log.read_text(encoding="utf-8").splitlines()]
    assert [c[:2] for c in calls] == [["label", "create"], ["issue", "list"], ["issue", "create"]]
    issue = (workspace / "issue.md").read_text(encoding="utf-8")
    assert "1 unexpected" in issue and '"by-hand"' in issue

    # 5. The next pull request: the plan would delete it, so it is refused; the
    #    comment carries the reason and the flag, the job fails, no plan saved.
    (workspace / "plan.json").unlink()
    pr = run_job("quotaform-plan.yml", workspace, secrets, bin_dir)
    assert pr.failed
    assert pr.step("Fail on a plan error").ran
    (comment,) = pr.comments
    assert comment.startswith("### quotaform plan failed")
    assert "After review, allow it with: --allow-deletes (on plan and apply)." in comment
    assert "Error: the plan breaks 1 guard rail(s)" in comment
    assert "See the log" not in comment
    assert not (workspace / "plan.json").exists()
    assert pr.step("Keep the saved plan").ran is False

    # No secret anywhere: step logs, comments, files.
    everything = pr.text() + merged.text() + cron.text() + plan_md + issue
    assert USERS["admin"] not in everything
