"""Build ``promtool`` without the Kubernetes client it links for one check.

``remove_all_sd`` drops Prometheus' service-discovery plugins from both
binaries, but ``cmd/promtool/main.go`` also imports
``discovery/kubernetes`` directly, for one check of ``promtool check
config``: the TLS files of a ``kubernetes_sd_configs`` entry. That one
import links Kubernetes' typed client (``k8s.io/client-go/kubernetes``, its
apply configurations and every ``k8s.io/api`` group): 306 of promtool's
1,117 packages, the largest share of the build's CPU time on a new machine.

The Prometheus this sandbox builds has no Kubernetes service discovery, so a
configuration naming one cannot run on it anyway. This module builds
promtool from the same release as ``go install`` would (the module is
fetched from the Go module proxy and checked against its ``go.sum`` hash),
as a copy of ``cmd/promtool`` in a module of its own whose requirements are
Prometheus' own ``go.mod`` (so every dependency is the version ``go install``
selects), with that import and its one ``case`` removed. Every other command
(``check rules``, ``test rules``, ``check config``, ``query``) is upstream's
code unchanged.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox.processes import run_build_tool

__all__ = ["PROMTOOL_CHANGE", "build_promtool", "run_go", "without_kubernetes"]

#: What the copy changes in ``cmd/promtool/main.go``: the import and the one
#: ``case`` that uses it (Prometheus v0.316.0's text, tabs as in the file).
_IMPORT = '\t"github.com/prometheus/prometheus/discovery/kubernetes"\n'
_CASE = (
    "\t\t\tcase *kubernetes.SDConfig:\n"
    "\t\t\t\tif err := checkTLSConfig(c.HTTPClientConfig.TLSConfig, checkSyntaxOnly);"
    " err != nil {\n"
    "\t\t\t\t\treturn nil, nil, err\n"
    "\t\t\t\t}\n"
)
#: One line for the build stamp: what differs from upstream's promtool.
PROMTOOL_CHANGE = "promtool: cmd/promtool without its kubernetes_sd_configs TLS check\n"
_MODULE = "github.com/prometheus/prometheus"


def build_promtool(
    go: str,
    gobin: Path,
    version: str,
    go_args: Sequence[str],
    env: Mapping[str, str],
    timeout_s: float,
) -> Path:
    """Build ``promtool`` of Prometheus ``version`` into ``gobin`` as the
    module docstring says, and return its path.

    Args:
        go: the ``go`` executable.
        gobin: a scratch folder the caller owns and removes; the copy is
            written beneath it, the binary into it.
        version: a module version (``v0.316.0``).
        go_args: build flags both binaries get (``-tags``, ``-ldflags``).
        env: the build's environment (``CGO_ENABLED=0``).
        timeout_s: seconds each ``go`` step may take.

    Raises:
        SandboxError: ``go mod download`` or ``go build`` failed or timed out
            (with the tail of its output); the release's ``main.go`` does not
            hold the import and the ``case`` exactly once each.
    """
    download = ["mod", "download", "-json", f"{_MODULE}@{version}"]
    fetched = json.loads(run_go(go, download, gobin, env, timeout_s, what="promtool"))
    upstream = Path(fetched["Dir"])
    work = gobin / "promtool-src"
    work.mkdir()
    requirements = (upstream / "go.mod").read_text(encoding="utf-8")
    (work / "go.mod").write_text(
        requirements.replace(f"module {_MODULE}\n", "module quotaform.invalid/promtool\n", 1)
        + f"\nrequire {_MODULE} {version}\n",
        encoding="utf-8",
    )
    (work / "go.sum").write_text(
        (upstream / "go.sum").read_text(encoding="utf-8")
        + f"{_MODULE} {version} {fetched['Sum']}\n"
        + f"{_MODULE} {version}/go.mod {fetched['GoModSum']}\n",
        encoding="utf-8",
    )
    for source in sorted((upstream / "cmd" / "promtool").glob("*.go")):
        if not source.name.endswith("_test.go"):
            text = source.read_text(encoding="utf-8")
            if source.name == "main.go":
                text = without_kubernetes(text, source)
            (work / source.name).write_text(text, encoding="utf-8")
    built = gobin / "promtool"
    build = ["build", "-mod=readonly", *go_args, "-o", str(built), "."]
    run_go(go, build, work, env, timeout_s, what="promtool")
    return built


def without_kubernetes(main: str, where: Path) -> str:
    """``cmd/promtool/main.go``'s text ``main`` without the
    ``discovery/kubernetes`` import and its one ``case``.

    Raises:
        SandboxError: ``main`` (read from ``where``) does not hold each of
            them exactly once: a release this module was not written for.
    """
    if main.count(_IMPORT) != 1 or main.count(_CASE) != 1:
        raise SandboxError(
            f"{where} does not import discovery/kubernetes for one case as Prometheus "
            "v0.316.0 does; quotaform cannot build promtool without it from this release."
        )
    return main.replace(_IMPORT, "", 1).replace(_CASE, "", 1)


def run_go(
    go: str,
    args: Sequence[str],
    cwd: Path,
    env: Mapping[str, str],
    timeout_s: float,
    *,
    what: str,
) -> str:
    """Run ``go args`` in ``cwd`` with ``env`` over the caller's environment;
    its standard output. ``what`` names the build in errors.

    Raises:
        SandboxError: ``go`` could not run, failed (with the tail of its
            output) or ran over ``timeout_s`` seconds.
    """
    return run_build_tool(
        [go, *args],
        doing=f"Building {what}",
        advice="Check the Go version (1.24+) and access to the Go module proxy.",
        timeout_advice="check network access to the Go module proxy (GOPROXY) and retry.",
        timeout_s=timeout_s,
        cwd=cwd,
        env={**os.environ, **env},
    )
