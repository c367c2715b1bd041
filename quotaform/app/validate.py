"""``quotaform validate``: check manifests offline, for one cluster or for
every cluster the set names."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from quotaform.errors import ClusterConfigError, ManifestError, ManifestProblem
from quotaform.manifest import load_manifests, manifest_clusters
from quotaform.plan.state import DesiredState

__all__ = ["ValidateRequest", "run_validate"]


@dataclass(frozen=True, slots=True)
class ValidateRequest:
    """One ``quotaform validate`` run: the manifests, ``--cluster NAME`` and
    ``--all-clusters``."""

    manifests: tuple[Path, ...]
    cluster: str | None = None
    all_clusters: bool = False


def run_validate(request: ValidateRequest) -> list[DesiredState]:
    """The set loaded for ``cluster`` (``None``: the set names one), or for
    every cluster it names, with every cluster's problems reported together.
    No connection is made.

    Raises:
        ClusterConfigError: ``--cluster`` with ``--all-clusters``.
        ManifestError: every problem of every cluster's set, sorted.
    """
    paths, cluster, all_clusters = request.manifests, request.cluster, request.all_clusters
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
