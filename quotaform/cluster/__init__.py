"""Cluster I/O, the only place quotaform talks to Kafka.

``wire`` (DescribeClientQuotas / AlterClientQuotas over kafka-python),
``connect`` (open a client, check the cluster id), ``read`` (the live state in
a scope), ``apply`` (execute a plan: validate_only, alter, read-back; the
stale check of saved plans), ``profiles`` (cluster connection profiles).

Import the submodules directly: this package imports nothing, so commands
that never connect do not pay for kafka-python.
"""
