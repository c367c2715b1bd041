"""The Spark schemas of the analytics' tables: the column contracts of
:mod:`quotaform.analytics.model` (names, order and types) as Spark types."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql.types import (
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from quotaform.analytics.model import (
    COLUMN_TYPES,
    IMPACT_COLUMNS,
    RECOMMEND_COLUMNS,
    USAGE_COLUMNS,
    UTILISATION_COLUMNS,
)

__all__ = [
    "CONFIG_SCHEMA",
    "IMPACT_SCHEMA",
    "RECOMMEND_SCHEMA",
    "USAGE_SCHEMA",
    "UTILISATION_SCHEMA",
    "schema_of",
]

_TYPES: dict[str, DataType] = {
    "string": StringType(),
    "double": DoubleType(),
    "int": IntegerType(),
    "long": LongType(),
    "boolean": BooleanType(),
    "timestamp": TimestampType(),
}


def schema_of(columns: Sequence[str]) -> StructType:
    """The Spark schema of a table with these columns (:data:`COLUMN_TYPES`)."""
    return StructType([StructField(c, _TYPES[COLUMN_TYPES[c]], True) for c in columns])


USAGE_SCHEMA = schema_of(USAGE_COLUMNS)
UTILISATION_SCHEMA = schema_of(UTILISATION_COLUMNS)
IMPACT_SCHEMA = schema_of(IMPACT_COLUMNS)
RECOMMEND_SCHEMA = schema_of(RECOMMEND_COLUMNS)
#: One row per (cluster, entity, quota key) of a quota configuration
#: (:func:`quotaform.analytics.configs.config_rows`).
CONFIG_SCHEMA = StructType(
    [
        StructField("cluster", StringType(), True),
        StructField("quota_key", StringType(), True),
        StructField("ladder", StringType(), True),
        StructField("level", IntegerType(), True),
        StructField("shape", StringType(), True),
        StructField("n_user", StringType(), True),
        StructField("n_client", StringType(), True),
        StructField("n_ip", StringType(), True),
        StructField("value", DoubleType(), True),
        StructField("entity", StringType(), True),
    ]
)
