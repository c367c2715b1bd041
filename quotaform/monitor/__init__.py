"""Monitoring as code: Prometheus rules and a Grafana dashboard built from a
quota configuration (``quotaform monitor rules`` / ``monitor dashboard``).

Pure builders, no I/O: :mod:`~quotaform.monitor.conventions` (how each
exporter naming convention's usage series are selected and normalised, and
which conventions a Prometheus answer shows), :mod:`~quotaform.monitor.promql`
(PromQL text), :mod:`~quotaform.monitor.rules` (the rule file: Kafka's
resolution of every quota group done in PromQL from its metric labels, the
utilisation ratio, the alerts) and :mod:`~quotaform.monitor.dashboard` (the
Grafana dashboard over those series). ``quotaform.app.monitor`` reads the
quotas and writes the files.
"""
