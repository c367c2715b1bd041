"""What a usage source is: the one shape every plug-in of
:mod:`quotaform.analytics.sources.registry` has.

A source turns one kind of input into usage rows of one schema
(:mod:`quotaform.analytics.sources.schema`); nothing downstream asks which
source a row came from. It offers, from the least to the most work:

* ``records``: ``(file:row, record or why the row is unreadable)`` row by
  row, the record's values as the input holds them (the checks of
  :func:`quotaform.analytics.usage.check_row` judge them). Every source has
  it: small parsed inputs (Prometheus answers, JmxTool CSV) are read only
  this way, on the driver, by both engines;
* ``arrow``: record batches of the usage columns, normalised
  (:func:`~quotaform.analytics.sources.schema.normalise_batch`), for the
  local engine's vectorised checks (generic files);
* ``spark``: the name of a function of :mod:`quotaform.analytics.spark`
  that reads such files where they are, in parallel, as a DataFrame of the
  same columns, normalised by the same rules (generic files at a Hadoop
  URI, a 100M-row Parquet on a cluster). Named, not imported: pyspark
  stays inside the Spark engine.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from quotaform.analytics.usage import LabelMap, Rejections
from quotaform.inputs.limits import LIMITS, Limits

__all__ = ["ReadOptions", "Records", "Source"]

#: ``(file:row, record or why it cannot be read)``, row by row.
Records = Iterator[tuple[str, Mapping[str, Any] | str]]


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """How a run reads its usage, whatever the source.

    Attributes:
        labels: how Prometheus series map to clusters and brokers.
        cluster, broker: the cluster and broker of inputs that name neither
            (JmxTool CSV: ``--default-cluster``, ``--broker``).
        limits: the bounds of one usage file (``--max-usage-size``).
    """

    labels: LabelMap = field(default_factory=LabelMap)
    cluster: str | None = None
    broker: str | None = None
    limits: Limits = LIMITS["usage"]


@dataclass(frozen=True, slots=True)
class Source:
    """One kind of usage input (the module docstring).

    Attributes:
        name: its ``--usage-format`` name, and how ``summary.json`` counts
            its files (``generic``, ``prometheus``, ``jmxtool``).
        suffixes: file name endings of its files (a directory's members are
            chosen by them).
        sniff: ``(file name, head) -> True`` when the file is this
            source's (``head()``: its first bytes, read only when called);
            sources are asked in registry order.
        records: the rows of a local file (the module docstring); what is
            skipped or assumed is counted in the :class:`Rejections` given.
        arrow: normalised usage record batches of a local file, or ``None``
            (only ``records``). May raise ``pyarrow.ArrowInvalid`` for a
            file the caller must read with ``records`` instead.
        spark: ``quotaform.analytics.spark`` function reading such files in
            place (``"module:function"``), or ``None``: parsed on the driver.
        describe: what the files are, for messages.
    """

    name: str
    suffixes: tuple[str, ...]
    sniff: Callable[[str, Callable[[], bytes]], bool]
    records: Callable[[Path, ReadOptions, Rejections], Records]
    describe: str
    arrow: Callable[[Path, Rejections], Iterator[pa.RecordBatch]] | None = None
    spark: str | None = None
