"""Kafka's own client-quota rules, as data and pure functions (standard library only).

* :mod:`~quotaform.kafka.entity`: entity types, the valid shapes, :class:`Entity`
  and its one label.
* :mod:`~quotaform.kafka.keys`: the one quota-key table (value type, unit, entity
  types, maximum, description).
* :mod:`~quotaform.kafka.units`: parsing and formatting quota values, readable
  rounding, the JSON Schema patterns of the manifest's value strings, and the one
  value-equality function.
* :mod:`~quotaform.kafka.resolution`: which entity's quota a client really gets
  (the 8 user/client-id levels and the 2 ip levels as data), its quota group and
  metric tags (the broker's two steps as tables), how a change moves groups.
* :mod:`~quotaform.kafka.throttle`: the quota window and the throttle time the
  broker gives a group over its quota, per key (caps included).
* :mod:`~quotaform.kafka.metrics`: the metric tags and MBean names of quota
  groups, both ways (user-tag encoding, JMX quoting, ObjectName parsing).
* :mod:`~quotaform.kafka.names`: entity names and values as the controller judges
  them (ip normalisation).

Nothing here imports pydantic, rich, ruamel.yaml, kafka-python or pyspark, nor
any other part of quotaform (checked by the import contract in pyproject.toml),
so every engine (the Python one, the Spark transforms, the guard rails) reads
the same rules.
"""
