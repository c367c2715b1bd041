"""DescribeClientQuotas / AlterClientQuotas for kafka-python 3.x.

kafka-python ships the protocol messages (API keys 48 and 49) but no admin
methods for them. :class:`ClientQuotaAdminMixin` adds them in the library's own
mixin style (compare ``kafka/admin/_users.py``): an ``async`` method builds the
request and awaits ``self._manager.send``; a sync wrapper runs it through
``self._manager.run``. On top of that sync call sit the things the library
leaves to callers: batching under the controller's 10,000-record limit, a
per-request timeout, bounded retries with backoff (tenacity), typed errors, and
a read-only switch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import kafka.errors as kerrors
from kafka import KafkaAdminClient
from kafka.net.compat import KafkaNetClient
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    DescribeUserScramCredentialsRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest
from tenacity import (
    RetryCallState,
    Retrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential_jitter,
)

from quotaform.cluster.wire.codes import (
    RETRIABLE_CODES,
    broker_error,
    from_exception,
    is_retriable,
    is_transport_failure,
)
from quotaform.cluster.wire.types import (
    AlterOutcome,
    AlterResult,
    FilterComponent,
    QuotaAlteration,
    record_count,
)
from quotaform.errors import BrokerError, ReadOnlyError
from quotaform.kafka.brokers import BrokerNode
from quotaform.kafka.entity import Entity

if TYPE_CHECKING:
    from kafka.net.manager import KafkaConnectionManager

__all__ = [
    "MAX_RECORDS_PER_REQUEST",
    "ClientQuotaAdminMixin",
    "QuotaAdminClient",
    "RetryPolicy",
    "batches",
    "metadata_honouring_client",
]

log = logging.getLogger(__name__)

#: ``ClientQuotaControlManager`` fails a whole AlterClientQuotas request above
#: this many records with POLICY_VIOLATION (44).
MAX_RECORDS_PER_REQUEST = 10_000

T = TypeVar("T")

_Quotas = dict[Entity, dict[str, float]]

#: ``rpc_counts`` is updated from several threads while each broker is read back.
_COUNT_LOCK = threading.Lock()


class RetryPolicy:
    """Bounded retries with exponential backoff and jitter.

    Args:
        attempts: total tries per request (>= 1).
        initial_backoff_s: first wait in seconds; doubles per try.
        max_backoff_s: cap of one wait in seconds.
    """

    def __init__(
        self, attempts: int = 5, initial_backoff_s: float = 0.1, max_backoff_s: float = 2.0
    ) -> None:
        if attempts < 1:
            raise ValueError("attempts must be >= 1")
        self.attempts = attempts
        self.initial_backoff_s = initial_backoff_s
        self.max_backoff_s = max_backoff_s

    def retrying(self, on_retry: Callable[[RetryCallState], None] | None = None) -> Retrying:
        """A tenacity ``Retrying`` that retries only :func:`is_retriable` errors and
        re-raises the last one when the tries run out."""
        return Retrying(
            stop=stop_after_attempt(self.attempts),
            wait=wait_exponential_jitter(multiplier=self.initial_backoff_s, max=self.max_backoff_s),
            retry=retry_if_exception(is_retriable),
            before_sleep=on_retry,
            reraise=True,
        )


def batches(
    alterations: Sequence[QuotaAlteration], max_records: int = MAX_RECORDS_PER_REQUEST
) -> Iterator[list[QuotaAlteration]]:
    """Split ``alterations`` in order into lists of at most ``max_records`` ops each.

    An entity's ops are never split across requests (per-entity all-or-nothing
    holds only within one request).
    """
    batch: list[QuotaAlteration] = []
    size = 0
    for alteration in alterations:
        n = record_count(alteration)
        if batch and size + n > max_records:
            yield batch
            batch, size = [], 0
        batch.append(alteration)
        size += n
    if batch:
        yield batch


def _entity_from_wire(parts: Iterable[Any]) -> Entity:
    return Entity.from_pairs((p.entity_type, p.entity_name) for p in parts)


class ClientQuotaAdminMixin:
    """Client-quota admin methods for :class:`kafka.KafkaAdminClient`.

    Expects ``self._manager`` (kafka-python's connection manager), and
    ``self._quota_request_timeout_ms``, ``self._quota_retry`` and
    ``self._quota_read_only`` set by the concrete client.
    """

    _manager: KafkaConnectionManager
    _quota_request_timeout_ms: int
    _quota_retry: RetryPolicy
    _quota_read_only: bool
    _quota_max_records: int
    rpc_counts: dict[str, int]

    # -- sending -------------------------------------------------------------

    async def _send(
        self,
        request: Any,
        *,
        preflight: bool = False,
        node_id: int | None = None,
        timeout_ms: int | None = None,
    ) -> Any:
        """Send ``request`` to one broker and return its response.

        Args:
            node_id: the broker to send to; ``None``: the least loaded one.
            timeout_ms: bounds connecting to ``node_id`` and its answer;
                ``None``: the client's request timeout (connecting as
                kafka-python bounds it).

        Raises:
            _NotSent: the request never left this process (no connection could
                be made, the connection failed the ``preflight`` ping, or the
                send failed before writing).
            Exception: kafka-python's error once the request was written and no
                answer came (timeout, lost connection): its outcome is unknown.
        """
        if timeout_ms is None:
            timeout_ms = self._quota_request_timeout_ms
        start = time.monotonic()
        try:
            if node_id is None:
                conn = self._manager.get_connection(self._manager.least_loaded_node())
                await conn
            else:
                conn = self._node_connection(node_id)
                await self._manager.wait_for(conn.init_future, timeout_ms)
                timeout_ms = max(timeout_ms - int((time.monotonic() - start) * 1000), 1)
        except Exception as exc:
            raise _NotSent(exc) from exc
        if preflight:
            ping = conn.send_request(
                ApiVersionsRequest(client_software_name="quotaform", client_software_version="1"),
                request_timeout_ms=timeout_ms,
            )
            try:
                await ping
            except Exception as exc:
                raise _NotSent(exc) from exc
        future = conn.send_request(request, request_timeout_ms=timeout_ms)
        if future.failed():  # refused before a byte was written
            raise _NotSent(future.exception)
        return await future

    def _node_connection(self, node_id: int) -> Any:
        """kafka-python's connection to broker ``node_id``, with errors that say
        what they mean.

        Raises:
            kafka.errors.UnknownBrokerIdError: the cluster's Metadata does not
                list it (stopped, shutting down or fenced); a fresh Metadata
                is asked for, for the next try.
            kafka.errors.NodeNotReadyError: its last connection failed and the
                client waits before connecting again.
        """
        if self._manager.cluster.broker_metadata(node_id) is None:
            self._manager.cluster.request_update()
            raise kerrors.UnknownBrokerIdError(
                f"broker {node_id} is not in the cluster's metadata "
                "(stopped, shutting down or fenced)"
            )
        try:
            return self._manager.get_connection(node_id)
        except kerrors.NodeNotReadyError:
            raise kerrors.NodeNotReadyError(
                f"broker {node_id} refused or dropped the connection; waiting to reconnect"
            ) from None

    # -- DescribeClientQuotas (API key 48) ---------------------------------

    async def _async_describe_client_quotas(
        self,
        components: Sequence[FilterComponent],
        strict: bool,
        node_id: int | None = None,
        timeout_ms: int | None = None,
    ) -> _Quotas:
        request = DescribeClientQuotasRequest(
            components=[
                # match must be passed explicitly: an omitted nullable string is
                # encoded as '' (not null) and the broker rejects it with 42.
                DescribeClientQuotasRequest.ComponentData(
                    entity_type=c.entity_type, match_type=int(c.match_type), match=c.match
                )
                for c in components
            ],
            strict=strict,
        )
        response = await self._send(request, node_id=node_id, timeout_ms=timeout_ms)
        if response.error_code:
            raise broker_error(
                response.error_code, response.error_message, api="DescribeClientQuotas"
            )
        result: _Quotas = {}
        for entry in response.entries or ():
            entity = _entity_from_wire(entry.entity)
            result[entity] = {v.key: float(v.value) for v in entry.values}
        return result

    def describe_client_quotas(
        self, components: Sequence[FilterComponent], *, strict: bool
    ) -> _Quotas:
        """Describe the quotas of the entities matching a filter.

        Args:
            components: filter components; entity types must be distinct, and
                ``ip`` cannot be mixed with ``user``/``client-id`` (42).
            strict: keep only entities whose number of entity types equals the
                number of components (``ClientQuotaFilter.containsOnly``).
                An empty filter with ``strict=False`` matches everything.

        Returns:
            ``{entity: {quota key: quota value}}``, values as float
            (bytes/s, %, mutations/s, connections/s by key).

        Raises:
            AuthorizationError: 31, the principal lacks DESCRIBE_CONFIGS on CLUSTER.
            BrokerError: any other error code, after retries for retriable ones
                (REQUEST_TIMED_OUT, NOT_CONTROLLER, lost connection).
        """
        components = list(components)
        return self._with_retries(
            "DescribeClientQuotas",
            lambda: self._manager.run(self._async_describe_client_quotas, components, strict),
        )

    # -- DescribeUserScramCredentials (API key 50) ---------------------------

    async def _async_describe_scram_users(self, timeout_ms: int) -> tuple[str, ...]:
        # users=[], never null: both mean "every user" (ScramImage.describe),
        # but a broker refusing a null list fails to build its error answer
        # (DescribeUserScramCredentialsRequest.getErrorResponse throws a
        # NullPointerException) and never answers: kafka-python's
        # describe_user_scram_credentials() sends null and waits out the whole
        # request timeout. Proven on Kafka 4.3.1 (tests/integration/test_sasl_e2e.py).
        request = DescribeUserScramCredentialsRequest(users=[])
        response = await self._send(request, timeout_ms=timeout_ms)
        if response.error_code:
            raise broker_error(
                response.error_code, response.error_message, api="DescribeUserScramCredentials"
            )
        return tuple(sorted(r.user for r in response.results if not r.error_code))

    def describe_scram_users(self, *, timeout_ms: int) -> tuple[str, ...]:
        """The names of every user with SCRAM credentials (KIP-554), sorted:
        one request, no retries, waiting at most ``timeout_ms`` (or the
        client's request timeout when shorter).

        Raises:
            AuthorizationError: 31, the principal lacks DESCRIBE on CLUSTER.
            BrokerError: any other error (UNSUPPORTED_VERSION on brokers older
                than 2.7), or no answer within ``timeout_ms``.
        """
        return self._with_retries(
            "DescribeUserScramCredentials",
            lambda: self._manager.run(
                self._async_describe_scram_users,
                min(timeout_ms, self._quota_request_timeout_ms),
            ),
            retry=RetryPolicy(attempts=1),
        )

    def describe_client_quotas_on(
        self,
        node_id: int,
        components: Sequence[FilterComponent],
        *,
        strict: bool,
        timeout_ms: int,
    ) -> _Quotas:
        """Describe quotas as broker ``node_id`` holds them: the request goes to
        that broker (not to the least loaded one), once, and connecting plus
        its answer take at most ``timeout_ms``. Each broker answers from its
        own copy of the metadata log, so this is how to learn whether one
        broker lags.

        Args:
            node_id: a broker the cluster's Metadata lists (a fenced broker is
                not listed and cannot be reached).
            components, strict: as :meth:`describe_client_quotas`.
            timeout_ms: bound of this one try, milliseconds.

        Returns:
            ``{entity: {quota key: quota value}}`` as that broker holds them.

        Raises:
            AuthorizationError: 31, the principal lacks DESCRIBE_CONFIGS on CLUSTER.
            BrokerError: any other error code, or no answer within
                ``timeout_ms`` (the broker is down, hung or unknown): no retry.
        """
        api = "DescribeClientQuotas"
        with _COUNT_LOCK:
            self.rpc_counts[api] = self.rpc_counts.get(api, 0) + 1
        try:
            return self._manager.run(
                self._async_describe_client_quotas, list(components), strict, node_id, timeout_ms
            )
        except BrokerError:
            raise
        except _NotSent as exc:
            raise from_exception(exc.cause, api=api) from exc
        except Exception as exc:
            raise from_exception(exc, api=api) from exc

    # -- AlterClientQuotas (API key 49) ------------------------------------

    async def _async_alter_client_quotas(
        self, alterations: Sequence[QuotaAlteration], validate_only: bool
    ) -> dict[Entity, tuple[int, str | None]]:
        entry_cls = AlterClientQuotasRequest.EntryData
        request = AlterClientQuotasRequest(
            entries=[
                entry_cls(
                    entity=[
                        # entity_name=None must be explicit: see the describe note.
                        entry_cls.EntityData(entity_type=t, entity_name=n)
                        for t, n in a.entity.parts
                    ],
                    ops=[
                        entry_cls.OpData(
                            key=key,
                            value=0.0 if value is None else float(value),
                            remove=value is None,
                        )
                        for key, value in sorted(a.ops.items())
                    ],
                )
                for a in alterations
            ],
            validate_only=validate_only,
        )
        # A real alter is preceded by a ping on the same connection: if the
        # ping fails, the alter was provably never sent (nothing applied);
        # only a failure after the alter was written leaves the outcome unknown.
        response = await self._send(request, preflight=not validate_only)
        return {
            _entity_from_wire(entry.entity): (entry.error_code, entry.error_message)
            for entry in response.entries
        }

    def alter_client_quotas(
        self,
        alterations: Sequence[QuotaAlteration],
        *,
        validate_only: bool,
        on_batch: Callable[[int, int], None] | None = None,
    ) -> dict[Entity, AlterResult]:
        """Set and remove quotas, one result per entity.

        Alterations are sent in batches of at most ``max_records`` ops
        (10,000 by default, the controller's limit). Each entity is
        all-or-nothing; across entities nothing is atomic: valid entities commit
        even when others in the same request fail (KIP-546).

        Args:
            alterations: at most one per entity (the broker answers a duplicate
                with an error yet may apply the first; refused here).
            validate_only: run the controller's validation and write nothing.
            on_batch: progress callback ``(entities done, entities total)``.

        Returns:
            ``{entity: AlterResult}`` for every entity given, matched by entity.
            Retriable per-entity errors (7, 41) are retried for those entities
            only. An entity whose request got no answer after the retries
            (timeout, lost connection) is ``AlterOutcome.UNKNOWN``.

        Raises:
            ReadOnlyError: the client was opened read-only; nothing was sent.
            ValueError: the same entity appears twice.
        """
        if self._quota_read_only:
            raise ReadOnlyError(
                "this Kafka client was opened read-only (plan/drift): AlterClientQuotas refused"
            )
        seen: set[Entity] = set()
        for a in alterations:
            if a.entity in seen:
                raise ValueError(f"entity {a.entity} appears twice in one alter")
            seen.add(a.entity)

        results: dict[Entity, AlterResult] = {}
        total = len(alterations)
        lost: BrokerError | None = None
        for batch in batches(alterations, self._quota_max_records):
            if lost is not None:
                # The connection was lost: stop, rather than send more into it.
                for a in batch:
                    results[a.entity] = AlterResult(a.entity, AlterOutcome.NOT_SENT, lost)
                continue
            done = self._alter_batch(batch, validate_only)
            results.update(done)
            lost = next(
                (
                    r.error
                    for r in done.values()
                    if r.outcome in (AlterOutcome.UNKNOWN, AlterOutcome.NOT_SENT)
                ),
                None,
            )
            if on_batch is not None:
                on_batch(len(results), total)
        return results

    def _alter_batch(
        self, batch: Sequence[QuotaAlteration], validate_only: bool
    ) -> dict[Entity, AlterResult]:
        api = "AlterClientQuotas"
        pending = {a.entity: a for a in batch}
        results: dict[Entity, AlterResult] = {}
        # Set when a try was written and got no answer: from then on a failure
        # to learn the result means "unknown", because that try may have
        # committed. A try that was never sent (_NotSent) does not set it.
        unanswered = False

        def attempt() -> None:
            nonlocal unanswered
            try:
                answer = self._manager.run(
                    self._async_alter_client_quotas, list(pending.values()), validate_only
                )
            except _NotSent:
                raise
            except Exception as exc:
                unanswered = unanswered or is_transport_failure(exc)
                raise
            retry_codes: dict[Entity, BrokerError] = {}
            for entity in list(pending):
                code, message = answer.get(entity, (None, None))
                if code is None:
                    # The broker answered without this entity: treat it as
                    # unanswered rather than guess.
                    unanswered = True
                    retry_codes[entity] = BrokerError(
                        None, "MISSING_RESULT", "no result for this entity", api=api
                    )
                elif code == 0:
                    results[entity] = AlterResult(entity, AlterOutcome.APPLIED)
                    del pending[entity]
                elif code in RETRIABLE_CODES:
                    retry_codes[entity] = broker_error(code, message, api=api)
                else:
                    results[entity] = AlterResult(
                        entity, AlterOutcome.FAILED, broker_error(code, message, api=api)
                    )
                    del pending[entity]
            if retry_codes:
                first = next(iter(retry_codes.values()))
                raise _PendingEntities(retry_codes, first)

        try:
            self._with_retries(api, attempt)
        except _PendingEntities as exc:
            for entity, error in exc.errors.items():
                timed_out = error.code == 7 or error.name == "MISSING_RESULT"
                outcome = AlterOutcome.UNKNOWN if timed_out or unanswered else AlterOutcome.FAILED
                results[entity] = AlterResult(entity, outcome, error)
        except Exception as exc:  # transport failure after the last try
            error = from_exception(exc, api=api)
            if unanswered:
                outcome = AlterOutcome.UNKNOWN
            elif isinstance(exc, _NotSent) or isinstance(exc.__cause__, _NotSent):
                outcome = AlterOutcome.NOT_SENT
            else:
                outcome = AlterOutcome.FAILED
            for entity in pending:
                results[entity] = AlterResult(entity, outcome, error)
        return results

    # -- shared ------------------------------------------------------------

    def _with_retries(
        self, api: str, call: Callable[[], T], *, retry: RetryPolicy | None = None
    ) -> T:
        def on_retry(state: RetryCallState) -> None:
            exc = state.outcome.exception() if state.outcome else None
            log.warning("%s: retrying after %s (try %d)", api, exc, state.attempt_number)

        try:
            for attempt in (retry or self._quota_retry).retrying(on_retry):
                with attempt:
                    self.rpc_counts[api] = self.rpc_counts.get(api, 0) + 1
                    start = time.perf_counter()
                    result = call()
                    log.info("%s answered in %.3f s", api, time.perf_counter() - start)
                    return result
        except BrokerError:
            raise
        except _NotSent as exc:
            raise from_exception(exc.cause, api=api) from exc
        except kerrors.KafkaError as exc:
            raise from_exception(exc, api=api) from exc
        raise AssertionError("unreachable: tenacity re-raises the last error")


#: Failures that retrying cannot mend: wrong credentials or mechanism.
_AUTH_FAILURES = (
    kerrors.SaslAuthenticationFailedError,
    kerrors.UnsupportedSaslMechanismError,
    kerrors.IllegalSaslStateError,
)


class _NotSent(Exception):
    """The request never left this process; ``cause`` says why (retriable)."""

    def __init__(self, cause: BaseException | None) -> None:
        super().__init__(str(cause) if cause is not None else "not sent")
        self.cause = cause if cause is not None else kerrors.KafkaConnectionError("not sent")


class _PendingEntities(BrokerError):
    """Some entities came back with a retriable code; retry those only."""

    def __init__(self, errors: dict[Entity, BrokerError], first: BrokerError) -> None:
        super().__init__(first.code, first.name, first.broker_message, api=first.api)
        self.errors = errors


#: Client settings kafka-python 3.0 does not hand to a client's cluster
#: metadata (it builds ``ClusterMetadata`` with its defaults).
_METADATA_SETTINGS = ("allow_auto_create_topics", "retry_backoff_ms")


def metadata_honouring_client(**config: Any) -> Any:
    """kafka-python's network client for a ``KafkaProducer`` / ``KafkaConsumer``
    (their public ``kafka_client`` setting) whose metadata requests follow the
    client's own ``allow_auto_create_topics`` and ``retry_backoff_ms``.

    kafka-python 3.0.12 drops both on the way to the client's
    ``ClusterMetadata``: a consumer made with ``allow_auto_create_topics=False``
    still had its first metadata request re-create a just-deleted topic (the
    broker's ``auto.create.topics.enable``), and a producer waited the default
    100 ms between metadata attempts. Proven in
    ``tests/integration/test_apply_lock.py``."""
    client = KafkaNetClient(**config)
    cluster = client._manager.cluster
    for name in _METADATA_SETTINGS:
        if name in config:
            cluster.config[name] = config[name]
    return client


class QuotaAdminClient(ClientQuotaAdminMixin, KafkaAdminClient):
    """``KafkaAdminClient`` with the client-quota methods.

    Args:
        read_only: when True, :meth:`alter_client_quotas` raises
            :class:`ReadOnlyError` before building a request (plan, drift).
        request_timeout_ms: timeout of one quota RPC, in milliseconds.
        retry: retry policy for retriable errors.
        max_records: ops per AlterClientQuotas request (<= 10,000).
        **configs: kafka-python ``KafkaAdminClient`` settings
            (``bootstrap_servers``, ``security_protocol``, ...).

    Attributes:
        rpc_counts: RPCs sent so far by API name (tries included), e.g.
            ``{"DescribeClientQuotas": 4}``.
    """

    def __init__(
        self,
        *,
        read_only: bool,
        request_timeout_ms: int = 30_000,
        retry: RetryPolicy | None = None,
        max_records: int = MAX_RECORDS_PER_REQUEST,
        **configs: Any,
    ) -> None:
        if not 1 <= max_records <= MAX_RECORDS_PER_REQUEST:
            raise ValueError(f"max_records must be within 1..{MAX_RECORDS_PER_REQUEST}")
        self._quota_read_only = read_only
        self._quota_request_timeout_ms = request_timeout_ms
        self._quota_retry = retry or RetryPolicy()
        self._quota_max_records = max_records
        self.rpc_counts = {}
        self._cluster: dict[str, Any] | None = None
        self._bootstrap_errors: list[BaseException] = []
        configs.setdefault("request_timeout_ms", request_timeout_ms)
        configs.setdefault("kafka_client", self._watching_client)
        try:
            super().__init__(**configs)
        except kerrors.KafkaTimeoutError as exc:
            # KafkaAdminClient leaves its I/O thread running when bootstrap fails.
            if getattr(self, "_client", None) is not None:
                self._client.close()
                self._net.stop()
            fatal = next((e for e in self._bootstrap_errors if isinstance(e, _AUTH_FAILURES)), None)
            if fatal is not None:
                raise fatal from exc
            raise

    def _watching_client(self, **config: Any) -> Any:
        """kafka-python's network client (the public ``kafka_client`` hook),
        watching each bootstrap connection: an authentication failure stops
        the bootstrap at once instead of retrying for the whole timeout."""
        client = KafkaNetClient(**config)
        manager = client._manager
        errors = self._bootstrap_errors
        get_connection = manager.get_connection

        def watched(node_id: Any, *args: Any, **kwargs: Any) -> Any:
            conn = get_connection(node_id, *args, **kwargs)
            if not getattr(conn, "_quotaform_watched", False):
                conn._quotaform_watched = True

                def on_failure(exc: BaseException, conn: Any = conn) -> None:
                    if manager.bootstrapped:
                        return
                    # The broker closes the socket right after refusing SASL
                    # credentials and kafka-python may drop that answer: a
                    # disconnect after ApiVersions, during SASL, is that.
                    if (
                        conn.sasl_enabled
                        and conn.broker_version_data is not None
                        and type(exc) is kerrors.KafkaConnectionError
                    ):
                        exc = kerrors.SaslAuthenticationFailedError(
                            "the broker closed the connection during SASL authentication"
                        )
                    errors.append(exc)
                    if isinstance(exc, _AUTH_FAILURES):
                        manager.close()  # ends kafka-python's bootstrap loop

                conn.init_future.add_errback(on_failure)
            return conn

        manager.get_connection = watched
        return client

    @property
    def read_only(self) -> bool:
        """True when the alter path is disabled."""
        return self._quota_read_only

    def cluster_description(self) -> dict[str, Any]:
        """kafka-python's ``describe_cluster()`` (DescribeCluster, or Metadata
        on old brokers: ``cluster_id``, ``brokers`` with ``broker_id`` and
        ``is_fenced``), asked once per client, retried as the quota requests
        are (the least loaded broker may be one that hangs).

        Raises:
            BrokerError: no answer after the last try, or an error code.
        """
        if self._cluster is None:
            self._cluster = self._with_retries("DescribeCluster", self.describe_cluster)
        return self._cluster

    def cluster_id(self) -> str:
        """The cluster id (:meth:`cluster_description`): a connection's cluster
        does not change."""
        return str(self.cluster_description()["cluster_id"])

    def brokers(self, *, fresh: bool = False, timeout_ms: int | None = None) -> list[BrokerNode]:
        """The brokers DescribeCluster lists, fenced ones included, by node id.

        Args:
            fresh: ask the cluster again (a broker may have stopped since the
                client connected; counted in :attr:`rpc_counts` as
                ``DescribeCluster``); otherwise :meth:`cluster_description`.
            timeout_ms: bound of a fresh ask; ``None``: the request timeout.

        Raises:
            BrokerError: a fresh ask got no answer in time, or an error code.
        """
        if fresh or self._cluster is None:
            api = "DescribeCluster"
            with _COUNT_LOCK:
                self.rpc_counts[api] = self.rpc_counts.get(api, 0) + 1
            bound = timeout_ms or self._quota_request_timeout_ms
            try:
                self._cluster = self._manager.run(self._async_describe_cluster_within, bound)
            except Exception as exc:
                raise from_exception(exc, api=api) from exc
        assert self._cluster is not None
        return sorted(
            BrokerNode(
                node_id=int(b["broker_id"]),
                host=str(b["host"]),
                port=int(b["port"]),
                fenced=bool(b.get("is_fenced", False)),
            )
            for b in self._cluster.get("brokers") or ()
        )

    async def _async_describe_cluster_within(self, timeout_ms: int) -> dict[str, Any]:
        """kafka-python's DescribeCluster, bounded by ``timeout_ms``."""
        answer: dict[str, Any] = await self._manager.wait_for(
            self._manager.call_soon(self._describe_cluster), timeout_ms
        )
        return answer
