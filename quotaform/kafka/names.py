"""Entity names and quota values as Kafka's controller judges them, for data
that did not come from a manifest (a saved plan file).

Sources: ``ClientQuotaControlManager.validateEntity`` (empty names rejected,
``InetAddress.getByName`` for ip names: a host name is resolved by DNS on the
controller, a CIDR range is rejected) and ``validateQuotaKeyValue`` (through
:func:`quotaform.kafka.units.parse_quota_value`); KIP-546 and KIP-612 for the
entity shapes.
"""

from __future__ import annotations

import ipaddress

from quotaform.kafka.entity import IP, Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.units import QuotaValueError, parse_quota_value, render_raw

__all__ = ["entity_problem", "normalise_ip", "quota_problem"]


def normalise_ip(text: str) -> str:
    """The canonical text of an IP entity name.

    IPv6 is compressed and lower-cased (``0:0:0:0:0:0:0:1`` -> ``::1``) and an
    IPv4-mapped IPv6 address becomes IPv4 (``::ffff:192.0.2.1`` ->
    ``192.0.2.1``): Kafka's controller parses names with ``InetAddress`` and
    enforces such spellings as one address while storing them as separate
    entities, so quotaform keeps one spelling.

    Raises:
        ValueError: CIDR ranges (Kafka has no range quotas), host names (the
            controller would resolve them by DNS) and anything else that is not an
            IPv4 / IPv6 address.
    """
    if "/" in text:
        raise ValueError(
            f"{render_raw(text)} is a CIDR range: Kafka IP quotas apply to single "
            "addresses only (CIDR is not supported by Kafka); use {default: true} "
            "for every other address"
        )
    try:
        address = ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(
            f"{render_raw(text)} is not an IPv4 or IPv6 address (host names are not "
            "supported: the controller would resolve them by DNS)"
        ) from None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return str(address.ipv4_mapped)
    return address.compressed


def entity_problem(entity: Entity, *, written: bool) -> str | None:
    """Why the controller would reject ``entity`` (or quotaform refuses to
    send it), or ``None``.

    Args:
        entity: any entity, as decoded from outside data.
        written: whether quota values are to be set on it. An ip name that is
            set must be an IP address (a host name would be resolved by DNS
            on the controller); one only read or removed may be whatever the
            cluster holds.

    Checks: the shape (known entity types, ip alone; KIP-546, KIP-612), every
    name ``None`` (the default entity) or a non-empty string ("Empty user not
    supported").
    """
    problem = entity.shape_problem()
    if problem is not None:
        return problem
    for etype, name in entity.parts:
        if name is None:
            continue
        if not isinstance(name, str):
            return f"the {etype} name must be a string or null, not {render_raw(name)}"
        if name == "":
            return f'an empty {etype} name is rejected by Kafka ("Empty {etype} not supported")'
        if etype == IP and written:
            try:
                normalise_ip(name)
            except ValueError as exc:
                return str(exc)
    return None


def quota_problem(entity: Entity, key: str, value: object) -> str | None:
    """Why quota ``key`` = ``value`` on ``entity`` is not a value Kafka
    accepts (or quotaform sends), or ``None``: the key must be known and
    valid for the entity's types (``QuotaConfig``), the value a finite
    number greater than 0, whole for LONG / INT keys, within
    Long.MAX_VALUE / Integer.MAX_VALUE (``validateQuotaKeyValue``; NaN and
    infinities refused, which the controller does not reliably do)."""
    spec = QUOTA_KEYS.get(key)
    if spec is not None and not spec.applies_to(entity.types):
        return (
            f"quota key {key} is not valid for a {'+'.join(entity.types)} entity "
            f'(Kafka: "Invalid configuration key {key}")'
        )
    if isinstance(value, str):
        return f"{render_raw(value)} is text, not a number"
    try:
        parse_quota_value(key, value)
    except QuotaValueError as exc:
        return str(exc)
    return None
