"""Usage sources as plug-ins of one pipeline (fsspec's and Spark's data
source registries are the model): one module per source turning its input
into rows of one usage schema (:mod:`~quotaform.analytics.sources.schema`),
one line per source in :mod:`~quotaform.analytics.sources.registry`.

File sources: :mod:`~quotaform.analytics.sources.generic` (Parquet, CSV,
JSON Lines), :mod:`~quotaform.analytics.sources.prometheus` (``query_range``
answers), :mod:`~quotaform.analytics.sources.jmxtool` (JmxTool CSV). Sources
that fetch: :mod:`~quotaform.analytics.sources.live` (a Prometheus server,
into answer files) and :mod:`~quotaform.analytics.sources.collector` (a
broker's quota MBeans, into generic JSON Lines).
"""
