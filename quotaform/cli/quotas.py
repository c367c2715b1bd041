"""``quotaform validate | plan | apply``.

Exit codes:

* validate: 0 valid, 1 invalid.
* plan: 0 success, 1 error; with ``--detailed-exitcode`` 0 no changes,
  1 error, 2 changes present. With ``--all-clusters`` over every cluster: 1
  if any failed, else (with ``--detailed-exitcode``) 2 if any has changes,
  else 0.
* apply: 0 applied and read back (or nothing to do); 1 error with nothing
  applied (bad manifests, connection, wrong cluster, deletes not allowed,
  validate_only pre-check rejected, cancelled, unusable plan file); 3 partial
  failure (some entities applied, others failed or unknown); 4 every alter
  succeeded but the read-back did not match within ``--readback-timeout``;
  5 a saved plan is stale (``quotaform.planfile.EXIT_STALE_PLAN``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

from quotaform.apply import (
    ApplyResult,
    ApplyStatus,
    EntityOutcome,
    GuardRefusedError,
    apply_plan,
    check_allowed,
)
from quotaform.cli.options import (
    AllClustersOption,
    AllowDefaultRemovalOption,
    AllowMassDeleteOption,
    AllowRelaxOption,
    ClusterOption,
    ConfigOption,
    MaxDeleteFractionOption,
    MaxDeletesOption,
    MaxRelaxFactorOption,
)
from quotaform.cli.output import OutputFormat, emit
from quotaform.clusters import ClusterConfigError, load_required_profiles, resolve_target
from quotaform.desired import DesiredState
from quotaform.guards import GuardFlags
from quotaform.manifest import ManifestError, ManifestProblem, load_manifests, manifest_clusters
from quotaform.multicluster import (
    MultiClusterPlan,
    render_multi_json,
    render_multi_markdown,
    render_multi_text,
)
from quotaform.plan import Plan
from quotaform.planfile import (
    PlanFileError,
    check_not_stale,
    is_plan_file,
    read_plan_file,
    write_plan_file,
)
from quotaform.render import entity_label, render_json, render_markdown, render_text
from quotaform.wire.connection import ENV_BOOTSTRAP, ENV_COMMAND_CONFIG
from quotaform.workflow import connect, make_plan, plan_clusters

__all__ = ["EXIT_NOT_CONVERGED", "EXIT_PARTIAL", "register"]

EXIT_CHANGES = 2
EXIT_PARTIAL = 3
EXIT_NOT_CONVERGED = 4


Manifests = Annotated[
    list[Path],
    typer.Argument(
        help="Manifest files or directories (searched recursively for *.yaml, *.yml).",
        show_default=False,
    ),
]
ApplyTargets = Annotated[
    list[Path],
    typer.Argument(
        help="Manifest files or directories (searched recursively for *.yaml, *.yml), "
        "or one saved plan file from `plan --out`.",
        show_default=False,
    ),
]
BootstrapServer = Annotated[
    str | None,
    typer.Option(
        "--bootstrap-server",
        envvar=ENV_BOOTSTRAP,
        help="Kafka bootstrap server(s), HOST:PORT[,HOST:PORT].",
        show_default=False,
    ),
]
CommandConfig = Annotated[
    Path | None,
    typer.Option(
        "--command-config",
        envvar=ENV_COMMAND_CONFIG,
        help="Kafka client properties file (security.protocol, sasl.*, ssl.*), as for "
        "kafka-configs. Secrets may come from QUOTAFORM_SASL_USERNAME / "
        "QUOTAFORM_SASL_PASSWORD instead.",
        show_default=False,
    ),
]
Output = Annotated[OutputFormat, typer.Option("--output", "-o", help="How to print the plan.")]
AllowDeletes = Annotated[
    bool,
    typer.Option(
        "--allow-deletes",
        help="Allow deleting in-scope entities that no manifest declares "
        "(same as spec.allowDeletes: true).",
    ),
]


def _print_plan(plan: Plan, output: OutputFormat, console: Console) -> None:
    emit(
        plan, output, text=render_text, markdown=render_markdown, json=render_json, console=console
    )


def _print_multi(report: MultiClusterPlan, output: OutputFormat) -> None:
    emit(
        report,
        output,
        text=render_multi_text,
        markdown=render_multi_markdown,
        json=render_multi_json,
    )


def _load_for_validate(
    paths: list[Path], cluster: str | None, all_clusters: bool
) -> list[DesiredState]:
    """The set loaded for ``cluster`` (``None``: the set names one), or for
    every cluster it names, with every cluster's problems reported together."""
    if all_clusters and cluster is not None:
        raise ClusterConfigError("give --cluster or --all-clusters, not both")
    targets: list[str | None] = [cluster]
    if all_clusters:
        # A set naming no cluster falls through to load_manifests, which says so.
        targets = list(manifest_clusters(paths)) or [None]
    states: list[DesiredState] = []
    problems: list[ManifestProblem] = []
    for name in targets:
        try:
            states.append(load_manifests(paths, cluster=name))
        except ManifestError as exc:
            problems.extend(exc.problems)
    if problems:
        raise ManifestError(sorted(set(problems), key=lambda p: p.sort_key()))
    return states


def validate(
    manifests: Manifests,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster",
            help="Validate the set for this cluster (documents naming it, and shared "
            "ones); needed when the set names several clusters.",
            show_default=False,
        ),
    ] = None,
    all_clusters: Annotated[
        bool,
        typer.Option("--all-clusters", help="Validate the set for every cluster it names."),
    ] = False,
) -> None:
    """Check manifests offline: syntax, fields, quota values, scope. No RPC."""
    err = Console(stderr=True)
    states = _load_for_validate(manifests, cluster, all_clusters)
    for warning in sorted({w for desired in states for w in desired.warnings}):
        err.print(f"Warning: {warning}", style="yellow", highlight=False)
    for desired in states:
        typer.echo(
            f"Valid: {len(desired.entities)} entities for cluster {desired.cluster!r} "
            f"in {len(desired.scope.rules)} scope rule(s)."
        )


def plan(
    manifests: Manifests,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    all_clusters: AllClustersOption = False,
    output: Output = OutputFormat.text,
    allow_deletes: AllowDeletes = False,
    max_deletes: MaxDeletesOption = None,
    max_delete_fraction: MaxDeleteFractionOption = None,
    max_relax_factor: MaxRelaxFactorOption = None,
    allow_mass_delete: AllowMassDeleteOption = False,
    allow_default_removal: AllowDefaultRemovalOption = False,
    allow_relax: AllowRelaxOption = False,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 0 with no changes, 1 on error, 2 with changes."
        ),
    ] = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            "-out",
            help="Also save the plan to this file, for `quotaform apply FILE`.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Show what apply would change. Reads the cluster with a read-only client.

    A plan that breaks a guard rail (protected entities, the change budget) is
    shown with every violation and exits 1; --out then saves nothing.

    With --all-clusters: every cluster the manifests name, each through its
    profile, in one report; exit 1 if any cluster failed, else with
    --detailed-exitcode 2 if any has changes, else 0.
    """
    guard_flags = GuardFlags(
        max_deletes,
        max_delete_fraction,
        max_relax_factor,
        allow_mass_delete,
        allow_default_removal,
        allow_relax,
    )
    if all_clusters:
        given = {
            "--cluster": cluster,
            "--bootstrap-server": bootstrap_server,
            "--command-config": command_config,
            "--out": out,
        }
        clash = [flag for flag, value in given.items() if value is not None]
        if clash:
            raise ClusterConfigError(
                f"--all-clusters connects through the cluster profiles: drop {', '.join(clash)}"
            )
        report = plan_clusters(
            manifests,
            load_required_profiles(config),
            allow_deletes=allow_deletes,
            guard_flags=guard_flags,
        )
        _print_multi(report, output)
        code = report.exit_code(detailed=detailed_exitcode)
        if code:
            raise typer.Exit(code)
        return
    target = resolve_target(cluster, config, bootstrap_server, command_config)
    with connect(target.settings, read_only=True, cluster_id=target.cluster_id) as client:
        _, the_plan = make_plan(
            manifests,
            client,
            allow_deletes=allow_deletes,
            cluster=target.cluster,
            guard_flags=guard_flags,
        )
    _print_plan(the_plan, output, Console())
    if the_plan.violations:
        raise GuardRefusedError(
            f"the plan breaks {len(the_plan.violations)} guard rail(s) (listed above)"
            + ("; no plan file was written" if out is not None else "")
        )
    if out is not None:
        write_plan_file(the_plan, out)
        Console(stderr=True).print(
            f"Saved the plan to {out}. Apply exactly this plan with: quotaform apply {out}",
            highlight=False,
        )
    if detailed_exitcode and the_plan.summary.has_changes:
        raise typer.Exit(EXIT_CHANGES)


def _confirm(console: Console) -> bool:
    console.print(
        "\nDo you want to perform these actions?\n"
        "  quotaform will perform the actions described above.\n"
        "  Only 'yes' will be accepted to approve.\n",
        highlight=False,
    )
    answer: str = typer.prompt("  Enter a value", default="", show_default=False)
    return answer.strip() == "yes"


def apply(
    manifests: ApplyTargets,
    bootstrap_server: BootstrapServer = None,
    command_config: CommandConfig = None,
    cluster: ClusterOption = None,
    config: ConfigOption = None,
    output: Output = OutputFormat.text,
    allow_deletes: AllowDeletes = False,
    max_deletes: MaxDeletesOption = None,
    max_delete_fraction: MaxDeleteFractionOption = None,
    max_relax_factor: MaxRelaxFactorOption = None,
    allow_mass_delete: AllowMassDeleteOption = False,
    allow_default_removal: AllowDefaultRemovalOption = False,
    allow_relax: AllowRelaxOption = False,
    auto_approve: Annotated[
        bool, typer.Option("--auto-approve", help="Skip the typed 'yes' (for pipelines).")
    ] = False,
    readback_timeout: Annotated[
        float,
        typer.Option(
            "--readback-timeout", help="Seconds to wait for the cluster to show the plan."
        ),
    ] = 30.0,
) -> None:
    """Plan, ask for 'yes', then apply: validate_only pre-check, alter, read-back.

    With a single saved plan file (from `plan --out FILE`) instead of
    manifests, apply exactly that plan without asking, after checking that it
    is intact, for this cluster, and not stale.

    Exit codes: 0 applied, 1 nothing applied (error, rejected, guard rails,
    cancelled, bad plan file), 3 partial failure, 4 read-back did not match in time,
    5 the saved plan is stale (the cluster changed since it was made).
    """
    console = Console()
    err = Console(stderr=True)
    saved = len(manifests) == 1 and is_plan_file(manifests[0])
    guard_flags = GuardFlags(
        max_deletes,
        max_delete_fraction,
        max_relax_factor,
        allow_mass_delete,
        allow_default_removal,
        allow_relax,
    )
    if saved and (allow_deletes or guard_flags != GuardFlags()):
        raise PlanFileError(
            "--allow-deletes and the change-budget flags cannot change a saved plan: "
            "pass them to `plan --out` instead"
        )
    target = resolve_target(cluster, config, bootstrap_server, command_config)
    with connect(target.settings, read_only=False, cluster_id=target.cluster_id) as client:
        if saved:
            the_plan = read_plan_file(manifests[0])
            if target.cluster is not None and the_plan.cluster != target.cluster:
                raise PlanFileError(
                    f"{manifests[0]} is a plan for cluster {the_plan.cluster!r}, "
                    f"not {target.cluster!r}"
                )
            check_not_stale(the_plan, client, client.cluster_id())
        else:
            _, the_plan = make_plan(
                manifests,
                client,
                allow_deletes=allow_deletes,
                cluster=target.cluster,
                guard_flags=guard_flags,
            )
        _print_plan(the_plan, output, console if output is OutputFormat.text else err)
        if not the_plan.summary.has_changes:
            return
        check_allowed(the_plan)
        if not saved and not auto_approve and not _confirm(console):
            err.print("Apply cancelled.", style="bold red")
            raise typer.Exit(1)
        with _progress(err) as on_progress:
            result = apply_plan(
                the_plan, client, on_progress=on_progress, readback_timeout_s=readback_timeout
            )
    _report(result, output, console)
    raise typer.Exit(_EXIT[result.status])


_EXIT = {
    ApplyStatus.NOTHING_TO_DO: 0,
    ApplyStatus.APPLIED: 0,
    ApplyStatus.REJECTED: 1,
    ApplyStatus.PARTIAL: EXIT_PARTIAL,
    ApplyStatus.NOT_CONVERGED: EXIT_NOT_CONVERGED,
}


class _progress:
    """A rich progress bar on standard error while apply runs (a TTY only)."""

    def __init__(self, console: Console) -> None:
        self.bar = Progress(
            TextColumn("{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            console=console,
            transient=True,
            disable=not console.is_terminal,
        )
        self.tasks: dict[str, TaskID] = {}

    def __enter__(self) -> Callable[[str, int, int], None]:
        self.bar.start()

        def update(stage: str, done: int, total: int) -> None:
            if stage not in self.tasks:
                self.tasks[stage] = self.bar.add_task(stage, total=total)
            self.bar.update(self.tasks[stage], completed=done, total=total)

        return update

    def __exit__(self, *exc: object) -> None:
        self.bar.stop()


def _report(result: ApplyResult, output: OutputFormat, console: Console) -> None:
    if output is OutputFormat.json:
        doc = {
            "status": result.status.value,
            "entities": [
                {
                    "entity": r.change.entity.as_dict(),
                    "action": r.change.action.value,
                    "outcome": r.outcome.value,
                    "message": r.message,
                    "converged": r.converged,
                }
                for r in result.entities
            ],
            "rpc_counts": dict(result.rpc_counts),
        }
        sys.stdout.write(json.dumps(doc, indent=2, ensure_ascii=False) + "\n")
        return
    if result.status is ApplyStatus.REJECTED:
        rejected = [r for r in result.entities if r.message]
        console.print(
            f"\nApply refused by the validate_only pre-check: {len(rejected)} "
            f"entit{'y' if len(rejected) == 1 else 'ies'} rejected. Nothing was applied.",
            style="bold red",
            highlight=False,
        )
        for r in rejected:
            console.print(f"  ! {entity_label(r.change.entity)}: {r.message}", highlight=False)
        return
    counts = {o: len(result.by_outcome(o)) for o in EntityOutcome}
    for r in result.entities:
        if r.outcome is EntityOutcome.FAILED:
            console.print(
                f"  failed   {entity_label(r.change.entity)}: {r.message}",
                style="red",
                highlight=False,
            )
        elif r.outcome is EntityOutcome.UNKNOWN:
            seen = "matches the plan" if r.converged else "does not match the plan"
            console.print(
                f"  unknown  {entity_label(r.change.entity)}: {r.message}; read-back {seen}",
                style="yellow",
                highlight=False,
            )
        elif not r.converged:
            console.print(
                f"  applied  {entity_label(r.change.entity)}, but read-back shows "
                f"{dict(r.live_after or {})} instead of {dict(r.change.after)}",
                style="yellow",
                highlight=False,
            )
    rpcs = ", ".join(f"{n} {api}" for api, n in result.rpc_counts.items())
    line = (
        f"Apply {'complete' if result.status is ApplyStatus.APPLIED else 'incomplete'}: "
        f"{counts[EntityOutcome.APPLIED]} applied, {counts[EntityOutcome.FAILED]} failed, "
        f"{counts[EntityOutcome.UNKNOWN]} unknown; read-back "
        f"{'matched' if all(r.converged for r in result.entities) else 'did NOT match'} "
        f"after {result.readback_seconds:.1f}s ({rpcs})."
    )
    style = "bold green" if result.status is ApplyStatus.APPLIED else "bold red"
    console.print("\n" + line, style=style, highlight=False, soft_wrap=True)


def register(app: typer.Typer) -> None:
    """Add validate, plan and apply to ``app``."""
    app.command()(validate)
    app.command()(plan)
    app.command()(apply)
