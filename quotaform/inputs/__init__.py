"""Every byte quotaform reads comes in here, within bounds.

Manifests, saved plans, the cluster profiles file, ``--command-config`` and
``--prometheus-config`` files, secret files, quota and volume snapshots,
usage in every layout, Prometheus answers (files and live), exporter answers
and the records quotaform keeps in Kafka topics are all read through this
layer, which owns:

* a size bound per kind of input (:data:`~quotaform.inputs.limits.LIMITS`;
  usage inputs raised with ``--max-usage-size``), checked before reading and
  again while reading;
* a nesting bound checked before or while parsing, never by catching
  ``RecursionError`` or ``MemoryError``: :mod:`~quotaform.inputs.depth` for
  JSON (the bytes scanned before a parser sees them),
  :mod:`~quotaform.inputs.yamlsource` for YAML (the parser's events counted);
* number and line length (:mod:`~quotaform.inputs.jsondoc`);
* FIFOs, devices, sockets and directories refused without blocking, symbolic
  link loops named (:mod:`~quotaform.inputs.files`);
* text as UTF-8 with the line and byte offset of a bad byte named, a
  byte-order mark dropped, a NUL refused;
* HTTP answers within a total deadline and a size cap, of the media type
  asked for (:mod:`~quotaform.inputs.http`).

Every refusal is one :class:`~quotaform.errors.InputError` line naming the
input (unprintable characters escaped), the line or byte offset and the
limit. Parsers are well-kept libraries (libyaml and ruamel.yaml, ``json``,
ijson, Arrow): this layer bounds what they are given, it does not replace
them.
"""
