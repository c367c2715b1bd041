"""Entity names and quota values as Kafka's controller judges them, for data
that did not come from a manifest (a saved plan file); user names that are
valid but probably not the principal meant; principals as Kafka writes them.

Sources: ``ClientQuotaControlManager.validateEntity`` (empty names rejected,
``InetAddress.getByName`` for ip names: a host name is resolved by DNS on the
controller, a CIDR range is rejected) and ``validateQuotaKeyValue`` (through
:func:`quotaform.kafka.units.parse_quota_value`); KIP-546 and KIP-612 for the
entity shapes. User names: a quota's user name is the session principal's
``KafkaPrincipal.getName()``, without its type (the broker's quota managers
key on it); ``DefaultKafkaPrincipalBuilder`` names a TLS client
``X500Principal.getName()`` (the RFC 2253 form) passed through
``SslPrincipalMapper`` (``ssl.principal.mapping.rules``, ``DEFAULT`` leaves it
unchanged); ZooKeeper-era tools stored names URL-encoded (``Sanitizer``).
Principals: ``SecurityUtils.parseKafkaPrincipal`` (``Type:name``) and
``StandardAuthorizer``'s ``super.users`` (principals separated by ``;``).
"""

from __future__ import annotations

import ipaddress
import re
import urllib.parse

from quotaform.kafka.entity import IP, Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.units import QuotaValueError, parse_quota_value, render_raw

__all__ = [
    "USER_TYPE",
    "entity_problem",
    "normalise_ip",
    "parse_principal",
    "parse_super_users",
    "quota_problem",
    "user_name_problems",
]

#: ``KafkaPrincipal.USER_TYPE``: the type of every principal the default
#: principal builder makes (SASL, TLS, and ``User:ANONYMOUS``).
USER_TYPE = "User"


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


# ------------------------------------------------------------------ user names

_PERCENT_ESCAPE = re.compile(r"%[0-9A-Fa-f]{2}")
# A DN component starts with an attribute type: a keyword (CN, OU, ...) or an
# OID (2.5.4.3), then "=". Commas and "=" escaped with a backslash are data.
_DN_COMPONENT = re.compile(r"^\s*(?:[A-Za-z][A-Za-z0-9-]*|\d+(?:\.\d+)+)\s*=")
_UNESCAPED_COMMA = re.compile(r"(?<!\\),")
_SPACED_COMMA = re.compile(r"(?<!\\)\s*,\s*")
_SPACED_EQUALS = re.compile(r"^(\s*[^=\s]+)\s*=\s*")


def _rfc2253_spacing(name: str) -> str | None:
    """``name`` as RFC 2253 spaces a distinguished name (no spaces around the
    commas between components or around a component's first ``=``), when
    ``name`` is a DN of two or more components spaced otherwise; else ``None``."""
    parts = _UNESCAPED_COMMA.split(name)
    if len(parts) < 2 or not all(_DN_COMPONENT.match(p) for p in parts):
        return None
    joined = _SPACED_COMMA.sub(",", name)
    tight = ",".join(_SPACED_EQUALS.sub(r"\1=", p, count=1) for p in _UNESCAPED_COMMA.split(joined))
    return tight if tight != name else None


def user_name_problems(name: str) -> tuple[str, ...]:
    """Why the user name ``name`` is probably not the principal meant: each
    sentence says what Kafka compares and suggests the likely name. Empty
    when nothing looks wrong. Valid names all: Kafka accepts any non-empty
    name and the broker compares it exactly with the session principal's
    name (``KafkaPrincipal.getName()``), so a mistake throttles nobody.

    Checks, in order:

    * a ``User:`` prefix (any case): the principal's type, which quota user
      names do not carry (``User:alice`` -> ``alice``);
    * leading or trailing whitespace, kept by Kafka as part of the name;
    * URL-encoding (``%3D``, ``%2C``, ``%20`` ...): ZooKeeper-era tools stored
      quota names sanitized (``Sanitizer``, ``CN%3Dalice``); the API takes
      names raw, so the decoded form is suggested;
    * a distinguished name spaced otherwise than RFC 2253
      (``CN=alice, OU=eng``): ``DefaultKafkaPrincipalBuilder`` names a TLS
      client ``X500Principal.getName()``, which has no spaces around the
      separators (``CN=alice,OU=eng``), then applies
      ``ssl.principal.mapping.rules`` (``DEFAULT``: unchanged).

    Args:
        name: a user entity name or a probe's user, as written.

    Returns:
        One message per problem found, e.g. ``('"User:alice" starts with the
        principal type (User:): ...',)``.
    """
    if not (
        ":" in name
        or "%" in name
        or "," in name
        or "=" in name
        or name[:1].isspace()
        or name[-1:].isspace()
    ):
        return ()  # the common case, cheaply: manifests hold 100,000s of names
    problems: list[str] = []
    core = name.strip()
    if core[:5].lower() == "user:" and len(core) > 5:
        prefix, core = core[:5], core[5:].strip()
        problems.append(
            f"{render_raw(name)} starts with the principal type ({prefix}): quota user "
            "names are principal names without their type (KafkaPrincipal.getName()), "
            f"so write {render_raw(core)}"
        )
    if name != name.strip():
        problems.append(
            f"{render_raw(name)} has leading or trailing whitespace, which Kafka keeps as "
            f"part of the name: it would not match a principal named {render_raw(name.strip())}"
        )
    if _PERCENT_ESCAPE.search(core):
        try:
            decoded = urllib.parse.unquote(core, errors="strict")
        except UnicodeDecodeError:
            decoded = core
        if decoded != core:
            problems.append(
                f"{render_raw(name)} looks URL-encoded, as ZooKeeper-era tools stored quota "
                "user names: Kafka's API takes names as they are, so it would match only a "
                f"principal literally named so; the principal is probably {render_raw(decoded)}"
            )
    spaced = _rfc2253_spacing(core)
    if spaced is not None:
        problems.append(
            f"{render_raw(name)} is a distinguished name with spaces around its separators: "
            "Kafka's default principal builder names a TLS client X500Principal.getName(), "
            f"the RFC 2253 form without them ({render_raw(spaced)}), then applies "
            "ssl.principal.mapping.rules (DEFAULT leaves it unchanged): write the name "
            "those rules give"
        )
    return tuple(problems)


# ------------------------------------------------------------------ principals


def parse_principal(text: str) -> tuple[str, str]:
    """``(type, name)`` of a principal written ``Type:name`` (``User:admin``),
    split at the first ``:`` as ``SecurityUtils.parseKafkaPrincipal`` does;
    surrounding whitespace is ignored.

    Raises:
        ValueError: no ``:`` (Kafka: "expected a string in format
            principalType:principalName"), or an empty type or name (which
            Kafka parses, but no principal has).
    """
    stripped = text.strip()
    kind, colon, name = stripped.partition(":")
    if not colon or not kind or not name:
        raise ValueError(
            f"{render_raw(text)} is not a principal: write Type:name, e.g. User:admin "
            "(as in the brokers' super.users)"
        )
    return kind, name


def parse_super_users(value: str) -> tuple[str, ...]:
    """The principals of a ``super.users`` value (``User:admin;User:ops``), as
    ``StandardAuthorizer`` reads it: split at ``;``, each trimmed, empty ones
    skipped, in the order written.

    Raises:
        ValueError: an entry that is not ``Type:name`` (:func:`parse_principal`;
            the broker refuses such a configuration at start-up).
    """
    found = []
    for part in value.split(";"):
        if part.strip():
            kind, name = parse_principal(part)
            found.append(f"{kind}:{name}")
    return tuple(found)
