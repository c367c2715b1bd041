"""Every error quotaform raises on purpose, and the one exit-code table.

Library code raises these and never prints or exits; the CLI catches
:class:`QuotaformError` once, prints ``Error: <message>`` to standard error and
exits with ``error.exit_code``.

Exit codes, for every command: :data:`EXIT_CODE_MEANINGS` (the README's table).
``sandbox status`` follows LSB init scripts: 3 not running, 4 not answering
or degraded (some nodes down).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:  # the CLI imports this module for every command, --help included
    from quotaform.kafka.entity import Entity

__all__ = [
    "EXIT_CHANGES",
    "EXIT_CODE_MEANINGS",
    "EXIT_ERROR",
    "EXIT_LOCK_HELD",
    "EXIT_NOT_CONVERGED",
    "EXIT_OK",
    "EXIT_PARTIAL",
    "EXIT_SANDBOX_NOT_RUNNING",
    "EXIT_SANDBOX_UNRESPONSIVE",
    "EXIT_STALE_PLAN",
    "AnalyticsError",
    "ApplyCancelledError",
    "ApplyLockedError",
    "AuthorizationError",
    "BrokerError",
    "ClusterConfigError",
    "ClusterMismatchError",
    "ConnectionSettingsError",
    "ExportError",
    "GuardRefusedError",
    "InputError",
    "LockError",
    "ManifestError",
    "ManifestProblem",
    "MonitorError",
    "PlanFileError",
    "PlanKeyError",
    "QuotaformError",
    "ReadOnlyError",
    "SandboxError",
    "StalePlanError",
    "StaleStorageError",
    "StorageError",
    "plan_exit_code",
]

EXIT_OK = 0
EXIT_ERROR = 1
EXIT_CHANGES = 2
EXIT_PARTIAL = 3
EXIT_NOT_CONVERGED = 4
EXIT_STALE_PLAN = 5
EXIT_LOCK_HELD = 6
EXIT_SANDBOX_NOT_RUNNING = 3
EXIT_SANDBOX_UNRESPONSIVE = 4

#: The one exit-code table of every command; the README's "Exit codes" table
#: is this table (a unit test compares them).
EXIT_CODE_MEANINGS: Mapping[int, str] = MappingProxyType(
    {
        EXIT_OK: "success (valid, planned, applied, in sync, shown); with "
        "--detailed-exitcode: no changes",
        EXIT_ERROR: "error, nothing changed: a usage error (unknown option, missing "
        "argument), bad manifests or options, no connection, not authorized, a plan the "
        "guard rails refuse (plan saves no file), apply cancelled or rejected by the "
        "validate_only pre-check",
        EXIT_CHANGES: "changes present (plan --detailed-exitcode) or drift found (drift); "
        "never an error",
        EXIT_PARTIAL: "apply: partial (some entities applied, others failed, unknown or not "
        "sent); sandbox status: not running",
        EXIT_NOT_CONVERGED: "apply: every entity applied but the read-back did not match "
        "in time; sandbox status: not answering, or some nodes down (degraded)",
        EXIT_STALE_PLAN: "apply PLANFILE: the saved plan is stale (the cluster changed since "
        "it was made); nothing applied",
        EXIT_LOCK_HELD: "apply: everything the report says was done, but the apply lock could "
        "not be released (a Warning: line names the lock id): it blocks the next apply until "
        "quotaform unlock; any other failure keeps its own exit code",
    }
)


class QuotaformError(Exception):
    """Base class of every error quotaform raises on purpose.

    ``exit_code`` is the process exit code the CLI uses for it (1 unless a
    subclass documents another).
    """

    exit_code: int = EXIT_ERROR


# ----------------------------------------------------------------- input


@dataclass(frozen=True, slots=True)
class ManifestProblem:
    """One thing wrong with the manifests.

    Attributes:
        path: the file, as given or as found under a given directory.
        line: 1-based line of the offending key or item, ``None`` when unknown
            (unreadable file, a problem of the whole set).
        field: dotted field path inside the document, e.g.
            ``spec.quotas[2].values.producer_byte_rate``; ``(yaml)`` for YAML
            syntax, ``(file)`` for files that cannot be read.
        message: what is wrong and, where possible, how to fix it.
    """

    path: str
    line: int | None
    field: str
    message: str

    def sort_key(self) -> tuple[str, int, str, str]:
        """By path, then line (unknown lines first), field, message."""
        return (self.path, self.line or 0, self.field, self.message)

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.field}: {self.message}"


class InputError(QuotaformError):
    """A file or an answer cannot be read within its bounds
    (:mod:`quotaform.inputs`): not a regular file, too large, nested too
    deeply, a number or a line too long, not UTF-8, a NUL byte, cut short.

    ``str()`` is one line: ``source[:line]: reason``, the source's name with
    unprintable characters escaped, the limit named where one was passed.

    Attributes:
        source: the file (or URL) as shown.
        line: 1-based line, ``None`` when unknown or not line-oriented.
        reason: what is wrong, without the source.
    """

    def __init__(self, source: str, reason: str, *, line: int | None = None) -> None:
        self.source = source
        self.line = line
        self.reason = reason
        where = source if line is None else f"{source}:{line}"
        super().__init__(f"{where}: {reason}")


class ManifestError(QuotaformError):
    """The manifests are invalid; ``problems`` lists every problem found.

    ``str()`` gives one problem per line, ``path:line: field: message``, sorted
    by path and line.
    """

    def __init__(self, problems: Iterable[ManifestProblem]) -> None:
        self.problems: tuple[ManifestProblem, ...] = tuple(
            sorted(problems, key=ManifestProblem.sort_key)
        )
        super().__init__("\n".join(str(p) for p in self.problems))


class ClusterConfigError(QuotaformError):
    """The cluster profiles file is missing, invalid, holds an inline secret,
    does not have the profile asked for, or a profile's secret cannot be read.

    ``str()`` gives one problem per line, ``path:line: field: message`` where
    a file and line are known.
    """


class ConnectionSettingsError(QuotaformError):
    """A bootstrap server, ``--command-config`` file or environment variable is
    missing, unreadable or names a setting kafka-python cannot honour; or the
    cluster cannot be reached or refuses the credentials."""


class ExportError(QuotaformError):
    """Export or import cannot proceed (bad options, file exists, not a manifest
    of the set, edited manifests that would not load)."""


class PlanFileError(QuotaformError):
    """A saved plan cannot be used: unreadable, damaged, from a newer
    quotaform, or for another cluster. Nothing was applied."""


class PlanKeyError(QuotaformError):
    """``QUOTAFORM_PLAN_KEY`` is set but empty: neither signing nor checking
    a signature is possible, and going on unsigned would be silent."""


class SandboxError(QuotaformError):
    """The local sandbox broker could not be fetched, started, found or stopped.

    The message says what to do about it (install Java 17+, install Maven, ...).
    """


# ----------------------------------------------------------------- refusals


class ClusterMismatchError(QuotaformError):
    """The manifests or the cluster profile name a cluster id and the
    connected cluster has another. Nothing was read or changed."""


class ReadOnlyError(QuotaformError):
    """An alter was attempted through a client opened read-only (plan, drift)."""


class LockError(QuotaformError):
    """The apply lock cannot be taken or released (permissions, the cluster)."""


class ApplyLockedError(LockError):
    """Another apply holds the cluster's apply lock; nothing was read or changed.

    Args:
        holder: who holds it (``quotaform.cluster.lock.LockHolder``), ``None``
            when its record cannot be read.
        topic: the lock topic.
    """

    def __init__(self, holder: object | None, topic: str) -> None:
        self.holder = holder
        describe = getattr(holder, "describe", None)
        who = describe() if callable(describe) else "a holder whose record cannot be read"
        lock_id = getattr(holder, "lock_id", "ID")
        super().__init__(
            f"another apply holds this cluster's apply lock ({who}); nothing was read or "
            f"changed. Wait for it (--lock-timeout SECONDS), or, if it died, release it with: "
            f"quotaform unlock --lock-id {lock_id} (the lock is the topic {topic})"
        )


class GuardRefusedError(QuotaformError):
    """The plan breaks a guard rail (protection, change budget); nothing was sent.

    Args:
        reasons: one worded line per violation, flag to allow it included.
        summary: the first line; the default says nothing was applied.
    """

    def __init__(self, reasons: Sequence[str], summary: str | None = None) -> None:
        self.reasons = tuple(reasons)
        head = summary or (
            f"the plan breaks {len(self.reasons)} guard rail(s); nothing was applied:"
        )
        super().__init__("\n".join([head, *(f"  - {r}" for r in self.reasons)]))


class _Change(Protocol):
    @property
    def entity(self) -> Entity: ...

    @property
    def before(self) -> Mapping[str, float]: ...

    @property
    def after(self) -> Mapping[str, float]: ...


def plan_exit_code(*, failed: bool, changes: bool, detailed: bool) -> int:
    """The exit code of ``plan`` (one cluster or ``--all-clusters``):
    :data:`EXIT_ERROR` if a cluster failed; else, when ``detailed``
    (``--detailed-exitcode``), :data:`EXIT_CHANGES` if there are changes;
    else :data:`EXIT_OK`."""
    if failed:
        return EXIT_ERROR
    if detailed and changes:
        return EXIT_CHANGES
    return EXIT_OK


def _quotas_text(quotas: Mapping[str, float]) -> str:
    if not quotas:
        return "(no quotas)"
    from quotaform.kafka.units import format_quota_value

    return ", ".join(f"{k}={format_quota_value(k, v)}" for k, v in sorted(quotas.items()))


class AnalyticsError(QuotaformError):
    """Bad input to the fleet analytics (a usage or configuration file, an
    option), or an engine that cannot run (no Java for Spark): the message
    names the file and the row or field."""


class MonitorError(QuotaformError):
    """``quotaform monitor``: an option or input the rules or the dashboard
    cannot be built from (a convention quotaform does not know, a Prometheus
    answer showing no readable quota series, a configuration naming several
    clusters without a cluster label)."""


class StorageError(QuotaformError):
    """Storage-aware quotas: a bad volume snapshot (file, line, field), a
    snapshot topic that is missing and may not be created, or volume usage
    that cannot be read."""


class ApplyCancelledError(QuotaformError):
    """apply was not approved (an answer other than ``yes``, or no input to
    read without ``--auto-approve``); nothing was sent."""


class StalePlanError(QuotaformError):
    """The cluster changed since the saved plan was made; nothing was applied.

    Args:
        moved: one change per entity that moved, ``before`` = what the plan
            saw, ``after`` = what the cluster holds now
            (:class:`~quotaform.plan.model.EntityChange`).
    """

    exit_code = EXIT_STALE_PLAN

    def __init__(self, moved: Sequence[_Change]) -> None:
        self.moved = tuple(moved)
        n = len(self.moved)
        lines = [
            f"the saved plan is stale: {n} entit{'y' if n == 1 else 'ies'} "
            "changed on the cluster since it was made; nothing was applied. "
            "Run plan again and review the new plan."
        ]
        for m in self.moved:
            lines.append(
                f"  {m.entity.label()}: planned from {_quotas_text(m.before)}, "
                f"now {_quotas_text(m.after)}"
            )
        super().__init__("\n".join(lines))


class StaleStorageError(StalePlanError):
    """A saved plan scaled by a storage policy whose state or factor no
    longer holds (volume usage moved since it was made); nothing was applied."""

    def __init__(self, message: str) -> None:
        self.moved = ()
        QuotaformError.__init__(self, message)


# ----------------------------------------------------------------- the broker


class BrokerError(QuotaformError):
    """A Kafka error code returned by the broker (or raised by the client for a
    whole request).

    Attributes:
        code: Kafka error code (``kafka.errors`` numbering: 7 REQUEST_TIMED_OUT,
            31 CLUSTER_AUTHORIZATION_FAILED, 41 NOT_CONTROLLER,
            42 INVALID_REQUEST, 44 POLICY_VIOLATION, -1 UNKNOWN_SERVER_ERROR,
            ...), or ``None`` for client-side failures without a code.
        name: the error's Kafka name, e.g. ``INVALID_REQUEST``.
        broker_message: the broker's own message, verbatim (may be ``None``).
        api: the RPC that failed, e.g. ``DescribeClientQuotas``.
    """

    def __init__(
        self,
        code: int | None,
        name: str,
        broker_message: str | None,
        *,
        api: str,
    ) -> None:
        self.code = code
        self.name = name
        self.broker_message = broker_message
        self.api = api
        code_txt = f" ({code})" if code is not None else ""
        detail = f": {broker_message}" if broker_message else ""
        super().__init__(f"{api} failed with {name}{code_txt}{detail}")


class AuthorizationError(BrokerError):
    """CLUSTER_AUTHORIZATION_FAILED (31): the principal lacks the ACL.

    DescribeClientQuotas needs DESCRIBE_CONFIGS on CLUSTER, AlterClientQuotas
    needs ALTER_CONFIGS on CLUSTER (KIP-546), DescribeUserScramCredentials
    needs DESCRIBE on CLUSTER (KIP-554, ``KafkaApis``).
    """

    def __init__(self, broker_message: str | None, *, api: str) -> None:
        super().__init__(31, "CLUSTER_AUTHORIZATION_FAILED", broker_message, api=api)
        if api == "DescribeUserScramCredentials":
            self.operation = "DESCRIBE"
        else:
            self.operation = "ALTER_CONFIGS" if api.startswith("Alter") else "DESCRIBE_CONFIGS"
        self.args = (
            f"{api} was refused: not authorized (CLUSTER_AUTHORIZATION_FAILED, 31). "
            f"The principal needs the {self.operation} operation on the CLUSTER resource.",
        )
