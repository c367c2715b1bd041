"""The plan as plain data, and the pure functions over it.

``state`` (the inputs: desired state, live state, scope, change budget),
``model`` (``Plan``, ``EntityChange``: the one change type), ``diff``
(desired vs live -> plan, no policy), ``guards`` (protection and budget
verdicts as data), ``review`` (fallbacks and verdicts computed beside a plan),
``drift`` (a view over plan changes), ``multicluster`` (aggregation only).
Nothing here talks to Kafka, reads files or prints.
"""
