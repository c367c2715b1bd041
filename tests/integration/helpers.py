"""Helpers for broker tests: describe lags the controller, so poll; and the
one way integration tests write manifests (:func:`write_manifest`)."""

from __future__ import annotations

import functools
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

#: A default entity part: ``{"user": DEFAULT}`` is the default user.
DEFAULT = {"default": True}

#: ``QUOTAFORM_TEST_LONG_WINDOWS=1``: the JMX broker keeps Kafka's default metric
#: samples and the load tests their long durations (``scripts/impact_scenarios.py --long``).
LONG_WINDOWS = os.environ.get("QUOTAFORM_TEST_LONG_WINDOWS") == "1"
#: Seconds of each of the JMX broker's 2 metric samples (``metrics.sample.window.ms``),
#: which a ``throttle-time`` Avg spans: 10, not Kafka's 30, so the Avg has dropped a
#: load's first seconds after about 20 s instead of 60 s. The quota windows (the
#: rates, ``quota.window.*``) keep Kafka's defaults.
METRICS_SAMPLE_S = 30 if LONG_WINDOWS else 10

#: The SCRAM users of the session's SCRAM broker (``scram_broker``): ``admin``
#: is its super user, ``alice`` gets ACLs in a test, ``bob`` never has any.
SCRAM_USERS = {"admin": "admin-secret-7f3a", "alice": "alice-secret-9c1d", "bob": "bob-secret-2e8b"}


def quota(entity: Mapping[str, Any], **values: Any) -> dict[str, Any]:
    """One ``spec.quotas`` entry: ``quota({"user": "a"}, producer_byte_rate="1MiB")``."""
    return {"entity": dict(entity), "values": values}


def manifest_text(
    cluster: str,
    quotas: Iterable[Mapping[str, Any]] = (),
    *,
    scope: Iterable[Mapping[str, Any]],
    cluster_id: str | None = None,
    allow_deletes: bool | None = None,
    storage_policy: Mapping[str, Any] | None = None,
    probes: Iterable[Mapping[str, Any]] = (),
) -> str:
    """A ClientQuotas manifest for ``cluster``, laid out as people write
    them: one line per key down to a scope rule's keys and a quota entry's
    ``entity`` and ``values`` (so a field's line is predictable), values in
    flow style."""
    lines = ["apiVersion: quotaform.io/v1", "kind: ClientQuotas", "metadata:"]
    lines.append(f"  cluster: {_flow(cluster)}")
    if cluster_id is not None:
        lines.append(f"  clusterId: {_flow(cluster_id)}")
    lines += ["spec:", "  scope:", *_items(scope)]
    if allow_deletes is not None:
        lines.append(f"  allowDeletes: {_flow(allow_deletes)}")
    if storage_policy is not None:
        lines.append("  storagePolicy:")
        lines += [f"    {key}: {_flow(value)}" for key, value in storage_policy.items()]
    entries = _items(quotas)
    lines += ["  quotas:", *entries] if entries else ["  quotas: []"]
    written = [f"    - {_flow(probe)}" for probe in probes]
    if written:
        lines += ["  probes:", *written]
    return "\n".join(lines) + "\n"


def write_manifest(
    path: Path, cluster: str, quotas: Iterable[Mapping[str, Any]] = (), **fields: Any
) -> Path:
    """Write :func:`manifest_text` to ``path`` (its folder made as needed)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(manifest_text(cluster, quotas, **fields), encoding="utf-8")
    return path


def _items(entries: Iterable[Mapping[str, Any]]) -> list[str]:
    """Block sequence items of mappings, one key per line."""
    lines = []
    for entry in entries:
        for n, (key, value) in enumerate(entry.items()):
            lines.append(f"    {'- ' if n == 0 else '  '}{key}: {_flow(value)}")
    return lines


def _flow(value: Any) -> str:
    """``value`` as flow YAML: strings plain where YAML reads them back as
    the same string, else double-quoted."""
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{_flow(k)}: {_flow(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_flow(v) for v in value) + "]"
    if isinstance(value, str):
        return value if _plain(value) else json.dumps(value, ensure_ascii=False)
    return json.dumps(value)  # numbers, true, false, null


@functools.cache
def _plain(text: str) -> bool:
    from ruamel.yaml import YAML

    if not re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_.+%/-]*", text):
        return False
    return YAML(typ="safe", pure=True).load(f"k: {text}\n") == {"k": text}


def eventually(read: Callable[[], T], check: Callable[[T], bool], *, timeout_s: float = 15.0) -> T:
    """Call ``read`` until ``check(value)`` holds; return that value.

    Raises AssertionError with the last value when ``timeout_s`` passes: the
    broker's metadata image normally catches up within milliseconds.
    """
    deadline = time.monotonic() + timeout_s
    while True:
        value = read()
        if check(value):
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s; last value: {value!r}")
        time.sleep(0.05)


def barrier(admin) -> None:  # type: ignore[no-untyped-def]
    """Wait until the broker's metadata image has caught up with every alter
    committed so far: commit a marker entity and wait until describe shows it.

    Records are applied to the image in log order, so once the marker is
    visible, so is (or isn't) everything before it: that makes an absence
    assertion meaningful.
    """
    import uuid

    from quotaform.cluster.wire import FilterComponent, QuotaAlteration
    from quotaform.kafka.entity import Entity

    marker = Entity.of(user=f"barrier-{uuid.uuid4().hex}")
    name = marker.name("user")
    assert name is not None
    admin.alter_client_quotas(
        [QuotaAlteration(marker, {"producer_byte_rate": 1.0})], validate_only=False
    )
    eventually(
        lambda: admin.describe_client_quotas([FilterComponent.exact("user", name)], strict=True),
        lambda d: marker in d,
    )
    admin.alter_client_quotas(
        [QuotaAlteration(marker, {"producer_byte_rate": None})], validate_only=False
    )
    # The marker's removal lags the same way: wait until it is gone too, so
    # an "the broker holds nothing" check never sees the marker itself.
    eventually(
        lambda: admin.describe_client_quotas([FilterComponent.exact("user", name)], strict=True),
        lambda d: marker not in d,
    )


_DESCRIPTIONS = {"user-principal": "user", "client-id": "client-id", "ip": "ip"}


def entity_from_config_command(description: str):  # type: ignore[no-untyped-def]
    """``"user-principal 'a', the default client-id"`` -> ``Entity.of(user="a", client_id=None)``.

    The wording is ConfigCommand's (Kafka 4.x) ``--describe`` output.
    """
    from quotaform.kafka.entity import Entity

    pairs: list[tuple[str, str | None]] = []
    for part in description.split(", "):
        if part.startswith("the default "):
            pairs.append((_DESCRIPTIONS[part.removeprefix("the default ")], None))
        else:
            kind, _, quoted = part.partition(" ")
            assert quoted.startswith("'") and quoted.endswith("'"), description
            pairs.append((_DESCRIPTIONS[kind], quoted[1:-1]))
    return Entity.from_pairs(pairs)


#: ConfigCommand's ``--entity-type`` arguments of each entity shape.
CONFIG_COMMAND_SHAPES = (["users"], ["clients"], ["users", "clients"], ["ips"])


def config_command_view(config_command, shapes=CONFIG_COMMAND_SHAPES) -> dict:  # type: ignore[no-untyped-def]
    """Every quota on the broker (of ``shapes``) as Kafka's own kafka-configs
    sees it: ``{Entity: {quota key: value}}`` (one run per entity shape)."""
    from quotaform.sandbox import parse_quota_describe

    view = {}
    for types in shapes:
        args = ["--describe"]
        for t in types:
            args += ["--entity-type", t]
        out = config_command(args).stdout
        for description, quotas in parse_quota_describe(out).items():
            view[entity_from_config_command(description)] = quotas
    return view


def wipe(admin) -> None:  # type: ignore[no-untyped-def]
    """Remove every client quota on the broker and wait until describe shows none."""
    from quotaform.cluster.wire import QuotaAlteration

    everything = admin.describe_client_quotas([], strict=False)
    if everything:
        admin.alter_client_quotas(
            [QuotaAlteration(e, dict.fromkeys(q)) for e, q in everything.items()],
            validate_only=False,
        )
    eventually(lambda: admin.describe_client_quotas([], strict=False), lambda d: d == {})
