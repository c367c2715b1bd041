"""Fleet analytics: quota configurations joined with observed usage.

``quotaform analyze utilisation | impact | recommend``: which quota governs
each observed quota group, how close it runs, who is throttled, what a plan
will do, what the limits should be. Two engines answer from the same rules
(:mod:`quotaform.kafka.resolution`): :mod:`quotaform.analytics.engine` (pure
Python, for small inputs) and :mod:`quotaform.analytics.spark` (PySpark).
"""
