"""Where the Spark engine runs: a master (``local[*]``, ``spark://HOST:PORT``)
or a Spark Connect server (``sc://HOST:PORT``), and how either is named in
messages. Pure: no pyspark, no I/O; the caller hands the environment in.

A Connect URL may carry parameters (``sc://host:15002/;token=...;user_id=...``)
and user information; :func:`redact_remote` is what every message shows of it.
The token is best given in PySpark's own ``SPARK_CONNECT_AUTHENTICATE_TOKEN``
environment variable, which the client reads itself.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from urllib.parse import urlsplit

from quotaform.errors import AnalyticsError

__all__ = [
    "MASTER_ENV",
    "REMOTE_ENV",
    "TOKEN_ENV",
    "SparkTarget",
    "redact_remote",
    "remote_endpoint",
    "scrub",
    "spark_target",
]

log = logging.getLogger(__name__)

#: PySpark's variable naming a Spark Connect server (as ``--remote``).
REMOTE_ENV = "SPARK_REMOTE"
#: spark-submit's variable naming a master; quotaform ignores it (``--master``
#: or spark-submit's own ``--master`` decide).
MASTER_ENV = "MASTER"
#: PySpark's Connect client's bearer token.
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"

_SCHEME = "sc://"


@dataclass(frozen=True, slots=True)
class SparkTarget:
    """Where Spark runs: at most one of the two is set (neither: ``local[*]``,
    or what spark-submit set).

    Attributes:
        master: a Spark master URL (``local[2]``, ``spark://host:7077``).
        remote: a Spark Connect URL (``sc://host:15002``, parameters kept).
        remote_source: how the remote was given (``--remote`` or
            ``SPARK_REMOTE``), for messages.
    """

    master: str | None = None
    remote: str | None = None
    remote_source: str = "--remote"


def spark_target(
    *, master: str | None, remote: str | None, environ: Mapping[str, str]
) -> SparkTarget:
    """The master or remote a Spark run uses: ``--remote`` or else
    ``SPARK_REMOTE`` from ``environ``; ``--master``. The ``MASTER`` variable
    is ignored (logged).

    Raises:
        AnalyticsError: a remote together with a master (either from the
            environment), or a remote that is not an ``sc://HOST[:PORT]`` URL.
            The message shows the remote redacted.
    """
    if environ.get(MASTER_ENV):
        log.info(
            "ignoring %s=%s from the environment: quotaform's master is --master (default "
            "local[*])",
            MASTER_ENV,
            environ[MASTER_ENV],
        )
    source = "--remote"
    if remote is None and environ.get(REMOTE_ENV):
        remote, source = environ[REMOTE_ENV], REMOTE_ENV
    if remote is None:
        return SparkTarget(master=master)
    if master is not None:
        if source == "--remote":
            given = f"--remote {redact_remote(remote)} and --master {master} given"
            fix = "give one of them"
        else:
            given = f"{REMOTE_ENV}={redact_remote(remote)} is set and --master {master} given"
            fix = f"unset {REMOTE_ENV} to use --master"
        raise AnalyticsError(
            f"{given}: a Spark Connect client has no master of its own (its server has); {fix}"
        )
    remote_endpoint(remote, source=source)  # checks the form
    return SparkTarget(remote=remote, remote_source=source)


def remote_endpoint(remote: str, *, source: str = "--remote") -> tuple[str, int]:
    """The ``(host, port)`` of a Connect URL (port 15002 when not given).

    Raises:
        AnalyticsError: not ``sc://HOST[:PORT][/;key=value...]``.
    """
    if not remote.startswith(_SCHEME):
        raise AnalyticsError(
            f"{source} {redact_remote(remote)}: a Spark Connect URL is sc://HOST:PORT "
            "(a master URL goes in --master)"
        )
    netloc = remote[len(_SCHEME) :].split("/", 1)[0].split(";", 1)[0]
    try:
        parts = urlsplit(f"//{netloc}")
        host, port = parts.hostname, parts.port
    except ValueError:
        host, port = None, None
    if not host:
        raise AnalyticsError(f"{source} {redact_remote(remote)}: no host (sc://HOST:PORT)")
    return host, port or 15002


def redact_remote(remote: str) -> str:
    """``remote`` as messages show it: user information and every
    parameter's value replaced by ``***`` (``sc://host:15002/;token=***``).
    Anything that is not a Connect URL is shown as ``***`` past its scheme."""
    if not remote.startswith(_SCHEME):
        scheme, sep, _ = remote.partition("://")
        return f"{scheme}{sep}***" if sep else "***"
    rest = remote[len(_SCHEME) :]
    netloc, _, params = rest.partition("/")
    if "@" in netloc:
        netloc = "***@" + netloc.rpartition("@")[2]
    if ";" in netloc:  # parameters without the slash
        netloc, _, more = netloc.partition(";")
        params = ";" + more + params
    shown = _SCHEME + netloc
    keys = [p.split("=", 1)[0] for p in params.split(";") if p.strip()]
    if keys:
        shown += "/;" + ";".join(f"{k}=***" for k in keys)
    return shown


def scrub(text: str, remote: str | None, token: str | None = None) -> str:
    """``text`` with ``remote`` (redacted) and every secret it carries
    (parameter values, user information, ``token``) replaced, for an error
    message built from a library's exception."""
    if remote:
        text = text.replace(remote, redact_remote(remote))
        secrets = re.findall(r";[^;=/]+=([^;/]+)", remote)
        netloc = remote[len(_SCHEME) :].split("/", 1)[0]
        if "@" in netloc:
            secrets.append(netloc.rpartition("@")[0])
        for secret in secrets:
            if len(secret) >= 3:
                text = text.replace(secret, "***")
    if token and len(token) >= 3:
        text = text.replace(token, "***")
    return text
