"""Usage straight from a Prometheus-compatible server (``analyze --prometheus URL``).

quotaform sends the ``/api/v1/query_range`` requests itself (Prometheus,
Thanos, Mimir and VictoriaMetrics serve the same HTTP API) for the quota
metrics of every naming convention it knows
(:data:`~quotaform.analytics.exporters.LIVE_SELECTOR`), and saves each
answer, streamed to disk as it arrives, as a ``query_range`` file that the
usage readers then read series by series like an export
(:func:`quotaform.analytics.usage.prometheus_rows`). Nothing holds a whole
answer in memory.

* **Ranges**: Prometheus refuses a query of more than 11,000 points per series
  (``exceeded maximum resolution of 11,000 points per timeseries``, its
  ``api/v1`` handler): a longer range is split into consecutive requests of
  at most :data:`MAX_POINTS` steps that neither overlap nor leave gaps.
* **Retries**: connection failures, timeouts and answers 429, 502, 503, 504
  are retried up to :data:`ATTEMPTS` times in all, with exponential backoff
  (tenacity); other errors are reported at once with Prometheus' own
  ``errorType`` and ``error``.
* **Authentication**, as Prometheus' own clients take it, never on the
  command line and never printed: a bearer token or basic auth from
  environment variables (:data:`ENVIRONMENT`) or from a Prometheus HTTP
  client configuration file (``authorization``, ``basic_auth``,
  ``tls_config``: the file ``promtool --http.config.file`` reads), and a
  CA file for TLS.
"""

from __future__ import annotations

import base64
import contextlib
import http.client
import io
import math
import re
import ssl
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
)

from quotaform.analytics.exporters import LIVE_SELECTOR
from quotaform.errors import AnalyticsError, InputError
from quotaform.inputs.depth import DepthScanner
from quotaform.inputs.files import read_text, shown
from quotaform.inputs.http import check_media_type, receive_body
from quotaform.inputs.jsondoc import load_json
from quotaform.inputs.limits import LIMITS
from quotaform.kafka.entity import escape_unprintable

__all__ = [
    "ATTEMPTS",
    "DEFAULT_RANGE",
    "ENVIRONMENT",
    "FILE_PREFIX",
    "MAX_POINTS",
    "MIN_STEP_S",
    "FetchResult",
    "PrometheusAuth",
    "PrometheusQuery",
    "default_step",
    "fetch_usage",
    "load_auth",
    "redact_url",
    "selector",
    "split_range",
]

#: Prometheus' limit of points per series in one ``query_range`` answer.
MAX_POINTS = 11_000
#: The smallest default step, seconds: scrape intervals are 15-60 s and the
#: quota gauges are already 10-12 s averages (notes 2.1).
MIN_STEP_S = 15.0
#: ``--since``'s default with ``--prometheus``: the last hour.
DEFAULT_RANGE = timedelta(hours=1)
#: Requests per range, the first included, before a transient failure is an error.
ATTEMPTS = 4
#: The saved answers' file names: ``query-0001.json``, ...
FILE_PREFIX = "query-"
#: Environment variables read for authentication (values never printed).
ENVIRONMENT = {
    "token": "QUOTAFORM_PROMETHEUS_TOKEN",
    "token_file": "QUOTAFORM_PROMETHEUS_TOKEN_FILE",
    "username": "QUOTAFORM_PROMETHEUS_USERNAME",
    "password": "QUOTAFORM_PROMETHEUS_PASSWORD",
    "password_file": "QUOTAFORM_PROMETHEUS_PASSWORD_FILE",
    "ca_file": "QUOTAFORM_PROMETHEUS_CA_FILE",
}
_RETRIED_STATUS = frozenset({429, 502, 503, 504})


@dataclass(frozen=True, slots=True)
class PrometheusAuth:
    """How to authenticate to the server. ``repr`` shows no secret.

    Attributes:
        token: a bearer token (``Authorization: Bearer``).
        username, password: basic auth.
        ca_file: PEM CA certificates to verify the server's TLS certificate
            (default: the system's).
        cert_file, key_file: a client certificate for mutual TLS.
        server_name: the name to verify the certificate against.
        insecure_skip_verify: do not verify the certificate.
    """

    token: str | None = field(default=None, repr=False)
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    ca_file: Path | None = None
    cert_file: Path | None = None
    key_file: Path | None = None
    server_name: str | None = None
    insecure_skip_verify: bool = False

    def header(self) -> str | None:
        """The ``Authorization`` header's value, ``None`` without credentials."""
        if self.token:
            return f"Bearer {self.token}"
        if self.username is not None:
            pair = f"{self.username}:{self.password or ''}".encode()
            return f"Basic {base64.b64encode(pair).decode('ascii')}"
        return None


def _read_secret(path: Path, what: str) -> str:
    try:
        return read_text(path, LIMITS["secret"]).strip()
    except InputError as exc:
        raise AnalyticsError(f"{what} {exc}") from None


#: The keys of Prometheus' HTTP client configuration quotaform reads.
_CONFIG_KEYS = {
    "": {"authorization", "basic_auth", "bearer_token", "bearer_token_file", "tls_config"},
    "authorization": {"type", "credentials", "credentials_file"},
    "basic_auth": {"username", "username_file", "password", "password_file"},
    "tls_config": {"ca_file", "cert_file", "key_file", "server_name", "insecure_skip_verify"},
}


def _config_auth(path: Path) -> PrometheusAuth:
    """A Prometheus HTTP client configuration file (strict: unknown keys are errors)."""
    from ruamel.yaml import YAMLError

    from quotaform.inputs.yamlsource import compose_documents, describe_yaml_error

    try:
        # A NUL is refused by the YAML reader itself, with its line.
        text = read_text(path, LIMITS["prometheus-config"], nul=True)
        documents = [data for data, _ in compose_documents(text)]
    except InputError as exc:
        raise AnalyticsError(f"--prometheus-config {exc}") from None
    except YAMLError as exc:
        line, message = describe_yaml_error(exc, text)
        where = f"{shown(path)}:{line}" if line is not None else shown(path)
        raise AnalyticsError(f"{where}: {message}") from None
    if len(documents) > 1:
        raise AnalyticsError(f"{shown(path)}: one YAML document expected, found {len(documents)}")
    document = documents[0] if documents else {}
    if not isinstance(document, dict):
        raise AnalyticsError(f"{path}: expected a mapping (authorization, basic_auth, tls_config)")
    for section, allowed in _CONFIG_KEYS.items():
        part = document if not section else document.get(section) or {}
        if not isinstance(part, dict):
            raise AnalyticsError(f"{path}: {section}: expected a mapping")
        unknown = sorted(set(part) - allowed - (set(_CONFIG_KEYS) if not section else set()))
        if unknown:
            where = f"{section}." if section else ""
            raise AnalyticsError(
                f"{path}: {where}{unknown[0]}: not a key quotaform reads (known: "
                f"{', '.join(sorted(allowed))})"
            )
    base = path.parent

    def file_of(value: Any) -> Path:
        given = Path(str(value))
        return given if given.is_absolute() else base / given

    token = None
    auth = document.get("authorization") or {}
    if auth:
        kind = str(auth.get("type", "Bearer"))
        if kind.lower() != "bearer":
            raise AnalyticsError(f"{path}: authorization.type: {kind!r}: only Bearer is supported")
        if "credentials_file" in auth:
            token = _read_secret(file_of(auth["credentials_file"]), "credentials_file")
        elif "credentials" in auth:
            token = str(auth["credentials"])
    if "bearer_token_file" in document:
        token = _read_secret(file_of(document["bearer_token_file"]), "bearer_token_file")
    elif "bearer_token" in document:
        token = str(document["bearer_token"])
    basic = document.get("basic_auth") or {}
    username = password = None
    if basic:
        username = (
            _read_secret(file_of(basic["username_file"]), "username_file")
            if "username_file" in basic
            else str(basic.get("username", ""))
        )
        if "password_file" in basic:
            password = _read_secret(file_of(basic["password_file"]), "password_file")
        elif "password" in basic:
            password = str(basic["password"])
    tls = document.get("tls_config") or {}
    return PrometheusAuth(
        token=token,
        username=username,
        password=password,
        ca_file=file_of(tls["ca_file"]) if "ca_file" in tls else None,
        cert_file=file_of(tls["cert_file"]) if "cert_file" in tls else None,
        key_file=file_of(tls["key_file"]) if "key_file" in tls else None,
        server_name=str(tls["server_name"]) if "server_name" in tls else None,
        insecure_skip_verify=bool(tls.get("insecure_skip_verify", False)),
    )


def load_auth(
    environ: Mapping[str, str], *, config: Path | None = None, ca_file: Path | None = None
) -> PrometheusAuth:
    """The authentication to use: ``config`` (a Prometheus HTTP client
    configuration file) when given, else the :data:`ENVIRONMENT` variables;
    ``ca_file`` (``--prometheus-ca-file``) over either's CA file.

    Raises:
        AnalyticsError: a file that cannot be read, an unknown key, both a
            token and basic auth.
    """
    if config is not None:
        auth = _config_auth(config)
    else:
        token = environ.get(ENVIRONMENT["token"]) or None
        if environ.get(ENVIRONMENT["token_file"]):
            token = _read_secret(
                Path(environ[ENVIRONMENT["token_file"]]), ENVIRONMENT["token_file"]
            )
        password = environ.get(ENVIRONMENT["password"])
        if environ.get(ENVIRONMENT["password_file"]):
            password = _read_secret(
                Path(environ[ENVIRONMENT["password_file"]]), ENVIRONMENT["password_file"]
            )
        env_ca = environ.get(ENVIRONMENT["ca_file"])
        auth = PrometheusAuth(
            token=token,
            username=environ.get(ENVIRONMENT["username"]) or None,
            password=password,
            ca_file=Path(env_ca) if env_ca else None,
        )
    if auth.token and auth.username is not None:
        raise AnalyticsError("Prometheus: give a bearer token or basic auth, not both")
    if ca_file is not None:
        auth = replace(auth, ca_file=ca_file)
    return auth


def redact_url(url: str) -> str:
    """``url`` without user information or query (what messages show)."""
    parts = urllib.parse.urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host + (f":{parts.port}" if parts.port else "")
    return urllib.parse.urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _checked_url(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise AnalyticsError(
            f"--prometheus {redact_url(url)!r}: expected http://HOST:PORT or https://HOST[/PATH]"
        )
    if parts.username is not None or parts.password is not None:
        raise AnalyticsError(
            f"--prometheus {redact_url(url)}: credentials do not go in the URL: set "
            f"{ENVIRONMENT['username']} / {ENVIRONMENT['password_file']} or "
            f"{ENVIRONMENT['token_file']}, or give --prometheus-config FILE"
        )
    return url.rstrip("/")


_MATCHER = re.compile(r'^\s*[A-Za-z_][A-Za-z0-9_]*\s*(=~|!~|!=|=)\s*"(?:[^"\\]|\\.)*"\s*$')


def selector(matchers: Sequence[str] = ()) -> str:
    """:data:`~quotaform.analytics.exporters.LIVE_SELECTOR` narrowed by
    PromQL label matchers (``job="kafka"``, ``env=~"prod.*"``), e.g. to one
    estate's brokers.

    Raises:
        AnalyticsError: a matcher that is not ``LABEL OP "VALUE"``.
    """
    for matcher in matchers:
        if not _MATCHER.match(matcher):
            raise AnalyticsError(
                f'--prometheus-match {matcher!r}: expected LABEL="VALUE" (or !=, =~, !~)'
            )
    return LIVE_SELECTOR[:-1] + "".join(f", {m.strip()}" for m in matchers) + "}"


@dataclass(frozen=True, slots=True)
class PrometheusQuery:
    """One ``--prometheus`` read.

    Attributes:
        url: the server's base URL (``http://prometheus:9090``, or with a
            path prefix: ``https://thanos.example/query``).
        start, end: the range (UTC), both included.
        step_s: seconds between points (``--step``).
        selector: the PromQL series selector queried.
        auth: credentials and TLS.
        timeout_s: each request's deadline, seconds: the whole answer must
            have arrived by then (also sent as the query timeout).
        max_bytes: the largest answer read, bytes (``--max-usage-size``;
            ``None``: :data:`~quotaform.inputs.limits.LIMITS`
            ``["prometheus-answer"]``).
    """

    url: str
    start: datetime
    end: datetime
    step_s: float
    selector: str = LIVE_SELECTOR
    auth: PrometheusAuth = field(default_factory=PrometheusAuth)
    timeout_s: float = 120.0
    max_bytes: int | None = None


def default_step(start: datetime, end: datetime) -> float:
    """``--step``'s default for a range, seconds: :data:`MIN_STEP_S`, or
    longer so that the range fits in one request of :data:`MAX_POINTS`
    points (whole seconds)."""
    span = (end - start).total_seconds()
    return max(MIN_STEP_S, float(math.ceil(span / (MAX_POINTS - 1))))


def split_range(start: datetime, end: datetime, step_s: float) -> list[tuple[datetime, datetime]]:
    """``[start, end]`` as consecutive request ranges of at most
    :data:`MAX_POINTS` points each at ``step_s``: each range's points are
    ``start + k x step``, the next range starts one step after the last one
    ends, so no point is asked twice or skipped.

    Raises:
        AnalyticsError: ``end`` before ``start``, or ``step_s`` <= 0.
    """
    if step_s <= 0:
        raise AnalyticsError(f"--step {step_s:g}s: must be more than 0")
    if end < start:
        raise AnalyticsError(f"--until {end.isoformat()} is before --since {start.isoformat()}")
    step = timedelta(seconds=step_s)
    ranges = []
    chunk = step * (MAX_POINTS - 1)
    at = start
    while at <= end:
        last = min(end, at + chunk)
        # the last point of this range: a whole number of steps from start
        steps = math.floor((last - at) / step)
        last = at + step * steps
        ranges.append((at, last))
        at = last + step
    return ranges


@dataclass
class FetchResult:
    """What :func:`fetch_usage` did.

    Attributes:
        files: the saved answers, in range order.
        requests: HTTP requests sent (retries included).
        retried: requests that failed transiently and were sent again.
        bytes: bytes of the answers.
    """

    files: list[Path] = field(default_factory=list)
    requests: int = 0
    retried: int = 0
    bytes: int = 0


class _Transient(Exception):
    """A failure worth another request (connection, timeout, 429/502/503/504)."""


def _context(auth: PrometheusAuth) -> ssl.SSLContext:
    try:
        context = ssl.create_default_context(cafile=str(auth.ca_file) if auth.ca_file else None)
        if auth.cert_file is not None:
            context.load_cert_chain(
                str(auth.cert_file), str(auth.key_file) if auth.key_file else None
            )
    except (OSError, ssl.SSLError) as exc:
        raise AnalyticsError(f"Prometheus TLS files: {exc}") from None
    if auth.insecure_skip_verify:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


def _error_text(body: bytes, where: str) -> str:
    """What an error answer says: Prometheus' ``errorType: error`` when it
    is one of its JSON error answers, else the start of the body."""
    try:
        answer, _ = load_json(body, LIMITS["prometheus-error"], name=where)
    except InputError:
        answer = None
    if isinstance(answer, dict) and "error" in answer:
        return escape_unprintable(f"{answer.get('errorType', 'error')}: {answer['error']}")[:300]
    return escape_unprintable(body[:200].decode("utf-8", errors="replace").strip()) or "no body"


def _error_body(exc: urllib.error.HTTPError, where: str, deadline: float) -> bytes:
    """The start of an error answer's body, read within its own bounds."""
    buffer = io.BytesIO()
    limits = LIMITS["prometheus-error"]
    with contextlib.suppress(InputError, OSError, http.client.HTTPException):
        receive_body(exc, buffer, source=where, limits=limits, deadline=deadline)
    return buffer.getvalue()[: limits.max_bytes]


def _request_once(
    query: PrometheusQuery, start: datetime, end: datetime, out: Path, context: ssl.SSLContext
) -> int:
    form = urllib.parse.urlencode(
        {
            "query": query.selector,
            "start": f"{start.timestamp():.3f}",
            "end": f"{end.timestamp():.3f}",
            "step": f"{query.step_s:g}",
            "timeout": f"{query.timeout_s:g}s",
        }
    ).encode()
    request = urllib.request.Request(
        f"{query.url}/api/v1/query_range",
        data=form,
        method="POST",
        headers={"Content-Type": "application/x-www-form-urlencoded", "Accept": "application/json"},
    )
    header = query.auth.header()
    if header:
        request.add_unredirected_header("Authorization", header)
    where = redact_url(query.url)
    deadline = time.monotonic() + query.timeout_s
    limits = LIMITS["prometheus-answer"].with_max_bytes(query.max_bytes)
    try:
        with (
            urllib.request.urlopen(request, timeout=query.timeout_s, context=context) as response,
            out.open("wb") as fh,
        ):
            check_media_type(
                response,
                source=f"Prometheus at {where}",
                expected="application/json",
                what="not the Prometheus HTTP API (is the URL a Prometheus-compatible server, "
                "not an exporter's /metrics or a web page?)",
            )
            source = f"Prometheus at {where}"
            receive_body(
                response,
                fh,
                source=source,
                limits=limits,
                deadline=deadline,
                scanner=DepthScanner(source, limits),
            )
    except urllib.error.HTTPError as exc:
        body = _error_body(exc, where, min(deadline, time.monotonic() + 5))
        if exc.code in _RETRIED_STATUS:
            raise _Transient(f"{exc.code} {_error_text(body, where)}") from None
        if exc.code in (401, 403):
            raise AnalyticsError(
                f"Prometheus at {where} refused the request ({exc.code}): set "
                f"{ENVIRONMENT['token_file']} or {ENVIRONMENT['username']} / "
                f"{ENVIRONMENT['password_file']}, or give --prometheus-config FILE"
            ) from None
        raise AnalyticsError(
            f"Prometheus at {where} answered {exc.code}: {_error_text(body, where)}"
        ) from None
    except urllib.error.URLError as exc:
        if isinstance(exc.reason, ssl.SSLError):
            raise AnalyticsError(
                f"Prometheus at {where}: TLS failed ({exc.reason}): give the server's CA with "
                "--prometheus-ca-file FILE"
            ) from None
        raise _Transient(str(exc.reason)) from None
    except (TimeoutError, ConnectionError, http.client.HTTPException) as exc:
        # a connection closed or cut mid-answer (RemoteDisconnected, IncompleteRead)
        raise _Transient(f"{type(exc).__name__}: {exc}") from None
    return out.stat().st_size


def fetch_usage(
    query: PrometheusQuery,
    into: Path,
    *,
    progress: Callable[[str], None] | None = None,
    attempts: int = ATTEMPTS,
    backoff_s: float = 0.5,
) -> FetchResult:
    """Send ``query``'s ``query_range`` requests (:func:`split_range`) and
    save each answer in ``into`` as ``query-NNNN.json`` (files of an
    earlier fetch there are removed first).

    Raises:
        AnalyticsError: a request still failing after ``attempts`` (naming
            the last failure), an answer Prometheus marks as an error, an
            authentication or TLS failure; the URL is shown without
            credentials.
    """
    say = progress or (lambda _m: None)
    url = _checked_url(query.url)
    query = replace(query, url=url)
    context = _context(query.auth)
    into.mkdir(parents=True, exist_ok=True)
    for old in into.glob(f"{FILE_PREFIX}*.json"):
        old.unlink()
    ranges = split_range(query.start, query.end, query.step_s)
    where = redact_url(url)
    say(
        f"prometheus: {where}: {len(ranges)} query_range request(s) from "
        f"{query.start:%Y-%m-%dT%H:%M:%SZ} to {query.end:%Y-%m-%dT%H:%M:%SZ}, "
        f"step {query.step_s:g}s"
    )
    result = FetchResult()

    def count_retry(state: RetryCallState) -> None:
        result.retried += 1
        failure = state.outcome.exception() if state.outcome else None
        say(f"prometheus: {where}: {failure}; retrying ({state.attempt_number}/{attempts - 1})")

    for number, (start, end) in enumerate(ranges, 1):
        out = into / f"{FILE_PREFIX}{number:04d}.json"
        retrying = Retrying(
            retry=retry_if_exception(lambda exc: isinstance(exc, _Transient)),
            stop=stop_after_attempt(attempts),
            wait=wait_exponential(multiplier=backoff_s, max=8.0),
            before_sleep=count_retry,
            reraise=True,
        )
        try:
            for attempt in retrying:
                with attempt:
                    result.requests += 1
                    result.bytes += _request_once(query, start, end, out, context)
        except _Transient as exc:
            raise AnalyticsError(
                f"Prometheus at {where} did not answer after {attempts} attempts: {exc}"
            ) from None
        result.files.append(out)
    say(
        f"prometheus: {result.requests} request(s), {result.retried} retried, "
        f"{result.bytes / 1e6:.1f} MB"
    )
    return result
