"""What every command's request shares: where to connect
(:class:`ConnectionOptions`, one value for the five connection options) and
what it tells its user while it runs (:class:`View`, injected callables, as
Terraform's backend gets a ``View``).

Nothing in :mod:`quotaform.app` prints, reads standard input or exits: a
request goes in, a result comes out, and the callables of its ``view`` are
the only way out while it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from quotaform.cluster.profiles import ClusterTarget, resolve_target
from quotaform.manifest import load_manifests
from quotaform.plan.state import DesiredState

__all__ = [
    "ConnectionOptions",
    "Progress",
    "View",
    "load_and_target",
    "no_progress",
    "target",
]

#: ``(stage, done, total)``: one stage's progress (``"validate"``, ``"alter"``,
#: ``"read-back"``), counted in entities.
Progress = Callable[[str, int, int], None]


def _silent(message: str) -> None:
    """Say nothing (the default of every :class:`View` callable)."""


@contextmanager
def no_progress() -> Iterator[Progress | None]:
    """No progress display: the default of :attr:`View.progress`."""
    yield None


@dataclass(frozen=True, slots=True)
class View:
    """What a command tells its user while it runs; each callable takes one
    message (plain text, one or more lines) and returns nothing.

    Attributes:
        warn: something the user should act on (``Warning:`` in the CLI),
            e.g. a connection setting's warning or a lock left held.
        note: something worth knowing that changes nothing (``Note:``).
        info: progress messages and confirmations (``Saved the plan to ...``).
        progress: opens a progress display for the duration of a long step;
            it yields the :data:`Progress` callable (or ``None``).
    """

    warn: Callable[[str], None] = _silent
    note: Callable[[str], None] = _silent
    info: Callable[[str], None] = _silent
    progress: Callable[[], AbstractContextManager[Progress | None]] = no_progress


@dataclass(frozen=True, slots=True)
class ConnectionOptions:
    """Where a command connects: the one rule of
    :func:`quotaform.cluster.profiles.resolve_target`.

    Attributes:
        cluster: ``--cluster NAME``: a profile of the profiles file (and the
            manifests for that cluster).
        config: ``--config FILE``: the profiles file (default: found near the
            manifests or in the working directory).
        bootstrap_server: ``--bootstrap-server HOST:PORT[,HOST:PORT]``.
        command_config: ``--command-config FILE``: Kafka client properties.
        timeout_s: ``--timeout``: bounds each connection attempt and each
            request, seconds (``None``: 15 s to connect, 30 s per request).
    """

    cluster: str | None = None
    config: Path | None = None
    bootstrap_server: str | None = None
    command_config: Path | None = None
    timeout_s: float | None = None

    def flags_given(self) -> list[str]:
        """The command-line spellings of the options that select a single
        cluster and were given (``--cluster``, ``--bootstrap-server``,
        ``--command-config``)."""
        given = {
            "--cluster": self.cluster,
            "--bootstrap-server": self.bootstrap_server,
            "--command-config": self.command_config,
        }
        return [flag for flag, value in given.items() if value is not None]


def target(
    options: ConnectionOptions,
    view: View | None = None,
    *,
    implied: str | None = None,
    near: Sequence[Path] = (),
) -> ClusterTarget:
    """Where the command connects (``--cluster``, else the connection flags,
    else the profile of ``implied``, the cluster the manifests ``near`` name),
    with ``--timeout`` applied; each warning of the connection settings goes
    to ``view.warn``.

    Raises:
        ClusterConfigError, ConnectionSettingsError: as
            :func:`~quotaform.cluster.profiles.resolve_target`.
    """
    view = view or View()
    found = resolve_target(
        options.cluster,
        options.config,
        options.bootstrap_server,
        options.command_config,
        implied=implied,
        near=near,
    )
    found = replace(found, settings=found.settings.with_timeout(options.timeout_s))
    for warning in found.settings.warnings:
        view.warn(warning)
    return found


def load_and_target(
    manifests: Sequence[Path], options: ConnectionOptions, view: View
) -> tuple[DesiredState, ClusterTarget]:
    """The manifests loaded for ``--cluster``, then where to connect: first
    the files (bad manifests, or a set naming several clusters without
    ``--cluster``, fail before any connection), then :func:`target` with the
    cluster they name.

    Raises:
        ManifestError: as :func:`~quotaform.manifest.load_manifests`.
        ClusterConfigError, ConnectionSettingsError: as :func:`target`.
    """
    desired = load_manifests(manifests, cluster=options.cluster)
    return desired, target(options, view, implied=desired.cluster, near=manifests)
