"""The local engine (Arrow, no JVM): ``analyze --engine python``.

Usage is read as Arrow record batches (:mod:`.reader`), checked with the
rules of :func:`quotaform.analytics.usage.check_row` as column expressions
(:mod:`.checks`), and kept as integer-coded groups with a value and a time
per sample (:class:`.reader.CodedUsage`): no Python object per usage row.
The per-group statistics are numpy over those codes (:mod:`.aggregate`);
Kafka's rules are applied once per group by :mod:`quotaform.analytics.engine`
and :mod:`quotaform.kafka.resolution`, never written again.
"""
