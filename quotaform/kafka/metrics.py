"""How the broker names a quota group in its metrics.

A quota group (:class:`~quotaform.kafka.resolution.MetricTags`) becomes one
sensor per broker, exposed over JMX as an MBean in ``kafka.server``::

    kafka.server:type=Produce,user=alice,client-id=app     byte-rate, throttle-time
    kafka.server:type=Fetch,user=alice                     (level 3 or 6: no client-id tag)
    kafka.server:type=socket-server-metrics,ip=192.0.2.10  connection-accept-rate

Rules (see ``../shared/notes/kafka-quota-metrics.md`` section 1.6 and 3):

* the ``user`` tag is ``Sanitizer.sanitize(name)``: UTF-8 URL-encoding, with
  ``*`` as ``%2A``, space as ``%20`` and ``~`` as ``%7E``;
* the ``client-id`` tag is the raw client id;
* in JMX only, ``JmxReporter.getMBeanName`` passes every tag value through
  ``Sanitizer.jmxSanitize``: a value with a character outside
  ``[A-Za-z0-9_-%. \\t]`` is ``ObjectName.quote``-d;
* empty tags are left out of the name; tag order is user, client-id.

:func:`parse_object_name` reads such a name back (JmxTool output, the
collector). Standard library only.
"""

from __future__ import annotations

import contextlib
import ipaddress
import re
from urllib.parse import quote, unquote

from quotaform.kafka.entity import CLIENT_ID, IP, USER
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import MetricTags

__all__ = [
    "ISO_TIMESTAMP",
    "METRICS_DOMAIN",
    "UTILIZATION_ATTRIBUTE",
    "UTILIZATION_KEYS",
    "ip_tag",
    "jmx_quote",
    "jmx_sanitize",
    "jmx_unquote",
    "mbean_name",
    "metric_tag",
    "parse_object_name",
    "sanitize_user",
    "unsanitize_user",
]

#: The JMX domain of the broker's quota sensors.
METRICS_DOMAIN = "kafka.server"
#: What the time of a metric sample written as text must look like in
#: quotaform's usage table (ISO-8601, seconds required; UTC unless an offset is
#: given; ``schemas/usage.schema.json``). Both analytics engines check it.
ISO_TIMESTAMP = r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?$"

#: KIP-1373 ("Client Quota Utilization Metrics", a draft: apache/kafka PR
#: #23331, KAFKA-21016, not voted): the attribute it adds to the existing quota
#: MBeans, ``measured rate / effective quota x 100`` (a percentage, not capped
#: at 100; ``NaN`` without a quota).
UTILIZATION_ATTRIBUTE = "quota-utilization"
#: The quota keys whose MBeans (``Produce``, ``Fetch``, ``Request``) KIP-1373
#: gives :data:`UTILIZATION_ATTRIBUTE`; controller-mutation quotas are excluded
#: by the KIP, ip quotas have no such MBean.
UTILIZATION_KEYS = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")

_JMX_SAFE = re.compile(r"[\w\-%. \t]*", re.ASCII)


def sanitize_user(name: str) -> str:
    """The ``user`` metric tag of a user principal name (``Sanitizer.sanitize``):
    ``"CN=alice,O=x"`` -> ``"CN%3Dalice%2CO%3Dx"``, ``"a b*"`` -> ``"a%20b%2A"``."""
    return quote(name, safe="").replace("~", "%7E")


def unsanitize_user(tag: str) -> str:
    """The user principal name of a ``user`` metric tag: :func:`sanitize_user`
    undone (``"CN%3Dalice%2CO%3Dx"`` -> ``"CN=alice,O=x"``, ``""`` -> ``""``).

    Percent escapes are decoded as UTF-8 (bytes that are not UTF-8 become
    U+FFFD); everything else is kept as written, ``+`` and a ``%`` not followed
    by two hex digits included. Kafka's ``Sanitizer.desanitize``
    (``URLDecoder``) agrees on every tag ``Sanitizer.sanitize`` writes, which
    never holds ``+`` or a lone ``%``; on other text it would read ``+`` as a
    space or fail. Both analytics engines decode this way (the Spark one with
    ``url_decode`` after escaping those two).
    """
    return unquote(tag)


def ip_tag(address: str) -> str:
    """The ``ip`` metric tag of an address, as ``InetAddress.getHostAddress``
    writes it: IPv4 as is, IPv6 in full without leading zeros
    (``2001:db8::10`` -> ``2001:db8:0:0:0:0:0:10``).

    Raises:
        ValueError: not an IP address.
    """
    parsed = ipaddress.ip_address(address)
    if isinstance(parsed, ipaddress.IPv4Address):
        return str(parsed)
    return ":".join(f"{int(group, 16):x}" for group in parsed.exploded.split(":"))


def jmx_quote(value: str) -> str:
    """``javax.management.ObjectName.quote``: ``app:1,x*y`` -> ``"app:1,x\\*y"``."""
    escaped = (
        value.replace("\\", "\\\\")
        .replace('"', '\\"')
        .replace("*", "\\*")
        .replace("?", "\\?")
        .replace("\n", "\\n")
    )
    return f'"{escaped}"'


def jmx_unquote(value: str) -> str:
    """The inverse of :func:`jmx_quote` for a quoted value; others unchanged
    (``ObjectName.unquote``)."""
    if len(value) < 2 or not (value.startswith('"') and value.endswith('"')):
        return value
    out, body, i = [], value[1:-1], 0
    while i < len(body):
        char = body[i]
        if char == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            out.append("\n" if nxt == "n" else nxt)
            i += 2
            continue
        out.append(char)
        i += 1
    return "".join(out)


def jmx_sanitize(value: str) -> str:
    """``Sanitizer.jmxSanitize``: ``value`` as is when every character is in
    ``[A-Za-z0-9_-%. \\t]``, else :func:`jmx_quote`-d."""
    return value if _JMX_SAFE.fullmatch(value) else jmx_quote(value)


def metric_tag(entity_type: str, name: str) -> str:
    """The value of the ``entity_type`` tag (``user``, ``client-id``, ``ip``)
    of the quota groups an entity naming ``name`` governs, as the broker
    writes it in the MBean name and jmx_exporter copies it into a label: the
    user URL-encoded (:func:`sanitize_user`), an ip as
    ``InetAddress.getHostAddress`` writes it (:func:`ip_tag`; text that is
    not an address kept as given), each then :func:`jmx_sanitize`-d
    (``JmxReporter.getMBeanName``): ``("client-id", "app:1")`` ->
    ``'"app:1"'``."""
    if entity_type == USER:
        name = sanitize_user(name)
    elif entity_type == IP:
        with contextlib.suppress(ValueError):  # not an address: as given
            name = ip_tag(name)
    return jmx_sanitize(name)


def mbean_name(key: str, tags: MetricTags) -> str | None:
    """The JMX ObjectName of the quota group ``tags`` for ``key`` on a broker,
    e.g. ``kafka.server:type=Produce,user=alice,client-id=app``; ``None`` when
    a tag is unknown (``None``).

    Raises:
        KeyError: ``key`` is not a quota key.
    """
    spec = QUOTA_KEYS[key]
    parts = [f"type={spec.sensor}"]
    if IP in spec.entity_types:
        if tags.ip is None:
            return None
        parts.append(f"ip={jmx_sanitize(ip_tag(tags.ip))}")
    else:
        if tags.user is None or tags.client_id is None:
            return None
        if tags.user:
            parts.append(f"{USER}={jmx_sanitize(sanitize_user(tags.user))}")
        if tags.client_id:
            parts.append(f"{CLIENT_ID}={jmx_sanitize(tags.client_id)}")
    return f"{METRICS_DOMAIN}:{','.join(parts)}"


def parse_object_name(name: str) -> tuple[str, dict[str, str]]:
    """The inverse of :func:`mbean_name`: the domain and the key properties of
    a JMX ObjectName, quoted values unquoted (:func:`jmx_unquote`,
    ``ObjectName.unquote``).

    ``kafka.server:type=Produce,client-id="a,b"`` -> ``("kafka.server",
    {"type": "Produce", "client-id": "a,b"})``. The ``user`` property stays as
    the tag is (URL-encoded: :func:`unsanitize_user` decodes it).

    Raises:
        ValueError: no ``domain:`` part, a property without ``=``, or a quoted
            value without its closing quote.
    """
    domain, sep, rest = name.partition(":")
    if not sep:
        raise ValueError(f"not an ObjectName: {name!r}")
    props: dict[str, str] = {}
    i = 0
    while i < len(rest):
        eq = rest.find("=", i)
        if eq < 0:
            raise ValueError(f"not an ObjectName: {name!r} (a property without '=')")
        key = rest[i:eq]
        j = eq + 1
        if j < len(rest) and rest[j] == '"':
            j += 1
            while j < len(rest) and rest[j] != '"':
                j += 2 if rest[j] == "\\" else 1
            if j >= len(rest):
                raise ValueError(f"not an ObjectName: {name!r} (an unterminated quoted value)")
            j += 1
            value = jmx_unquote(rest[eq + 1 : j])
        else:
            end = rest.find(",", j)
            j = len(rest) if end < 0 else end
            value = rest[eq + 1 : j]
        props[key] = value
        i = j + 1
    return domain, props
