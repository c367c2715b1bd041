"""The client-quota wire layer: DescribeClientQuotas / AlterClientQuotas over kafka-python.

``types`` (filters, alterations, results: plain values), ``codes`` (Kafka
error codes to :class:`~quotaform.errors.BrokerError`), ``connection``
(settings as Kafka's tools take them), ``client`` (the kafka-python mixin),
``open`` (connect). Names are re-exported lazily, so importing ``types``
does not import kafka-python.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "MAX_RECORDS_PER_REQUEST",
    "AlterOutcome",
    "AlterResult",
    "ClientQuotaAdminMixin",
    "ConnectionSettings",
    "FilterComponent",
    "MatchType",
    "QuotaAdminClient",
    "QuotaAlteration",
    "RetryPolicy",
    "batches",
    "load_connection_settings",
    "open_admin",
    "redact_secrets_in_logs",
]

_HOME = {
    "MAX_RECORDS_PER_REQUEST": "client",
    "ClientQuotaAdminMixin": "client",
    "QuotaAdminClient": "client",
    "RetryPolicy": "client",
    "batches": "client",
    "ConnectionSettings": "connection",
    "load_connection_settings": "connection",
    "redact_secrets_in_logs": "connection",
    "open_admin": "open",
    "AlterOutcome": "types",
    "AlterResult": "types",
    "FilterComponent": "types",
    "MatchType": "types",
    "QuotaAlteration": "types",
}


def __getattr__(name: str) -> Any:
    module = _HOME.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
