"""The client-quota wire layer: DescribeClientQuotas / AlterClientQuotas over kafka-python."""

from quotaform.wire.client import (
    MAX_RECORDS_PER_REQUEST,
    ClientQuotaAdminMixin,
    QuotaAdminClient,
    RetryPolicy,
    batches,
)
from quotaform.wire.connection import (
    ConnectionSettings,
    load_connection_settings,
    redact_secrets_in_logs,
)
from quotaform.wire.open import open_admin
from quotaform.wire.types import (
    AlterOutcome,
    AlterResult,
    FilterComponent,
    MatchType,
    QuotaAlteration,
)

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
