"""Generated configurations and usage for the engine comparisons: a
configuration over every level, a changed one, and usage of groups of every
tag shape (shared by the Spark and local-engine tests)."""

from __future__ import annotations

import math
import random
from datetime import UTC, datetime, timedelta

from quotaform.analytics.model import UsageRow
from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.metrics import sanitize_user

__all__ = ["CLIENT_KEYS", "T0", "generated"]

T0 = datetime(2026, 11, 23, 10, tzinfo=UTC)

USERS = ["alice", "bob", "CN=carol,O=x", "d ave*"]  # names the sanitizer encodes too
CLIENTS = ["app", "batch", "web"]
IPS = ["192.0.2.10", "192.0.2.11", "2001:db8::10"]
CLIENT_KEYS = [k for k, s in QUOTA_KEYS.items() if "user" in s.entity_types]


def _entities() -> list[Entity]:
    found = []
    for user in [*USERS, None]:
        found.append(Entity.of(user=user))
        for client in [*CLIENTS, None]:
            found.append(Entity.of(user=user, client_id=client))
    found += [Entity.of(client_id=c) for c in [*CLIENTS, None]]
    found += [Entity.of(ip=ip) for ip in [*IPS[:2], None]]
    return found


def generated(
    seed: int,
) -> tuple[dict[Entity, dict[str, float]], dict[Entity, dict[str, float]], list[UsageRow]]:
    """A configuration over every level, a changed one (new shapes: splits,
    merges, moves), and usage of groups of every tag shape, unlimited ones
    included, with throttle samples (NaN, 0, > 0)."""
    rng = random.Random(seed)
    before: dict[Entity, dict[str, float]] = {}
    for entity in rng.sample(_entities(), 18):
        if "ip" in entity.types:
            before[entity] = {"connection_creation_rate": float(rng.randint(5, 50))}
        else:
            keys = rng.sample(CLIENT_KEYS, rng.randint(1, 3))
            before[entity] = {
                k: float(rng.randint(1, 40) * 64 * 1024)
                if "byte" in k
                else float(rng.randint(1, 100))
                for k in keys
            }
    # controller_mutation_rate only at client-id levels: levels 7 and 8 get used.
    for entity in list(before):
        before[entity].pop("controller_mutation_rate", None)
        if not before[entity]:
            del before[entity]
    before[Entity.of(client_id=None)] = {"controller_mutation_rate": 2.0}
    before[Entity.of(client_id="app")] = {"controller_mutation_rate": 1.0}
    after = {e: dict(q) for e, q in before.items()}
    for entity in rng.sample(_entities(), 6):
        if "ip" in entity.types:
            after[entity] = {"connection_creation_rate": float(rng.randint(5, 50))}
        else:
            after.setdefault(entity, {})[rng.choice(CLIENT_KEYS)] = float(
                rng.randint(1, 40) * 32 * 1024
            )
    for entity in rng.sample(sorted(after, key=Entity.sort_key), 3):
        after.pop(entity)
    rows: list[UsageRow] = []
    groups = [
        (sanitize_user(u) if u else "", c)
        for u in ["", *USERS, "zed"]
        for c in ["", *CLIENTS, "other"]
    ]
    for broker in ("1", "2"):
        for user, client in rng.sample(groups, 14):
            for key in rng.sample(CLIENT_KEYS, 2):
                spec = QUOTA_KEYS[key]
                for i in range(rng.randint(1, 12)):
                    value = rng.random() * (3 * 1024 * 1024 if "byte" in key else 120.0)
                    if rng.random() < 0.05:
                        value = math.nan
                    when = T0 + timedelta(seconds=15 * i)
                    rows.append(
                        UsageRow("c", broker, when, spec.usage_metric, user, client, None, value)
                    )
                    if spec.throttle_metric is not None:
                        throttle = rng.choice([math.nan, 0.0, rng.random() * 300])
                        rows.append(
                            UsageRow(
                                "c",
                                broker,
                                when,
                                spec.throttle_metric,
                                user,
                                client,
                                None,
                                throttle,
                            )
                        )
        for ip in rng.sample(IPS, 2):
            for i in range(5):
                rows.append(
                    UsageRow(
                        "c",
                        broker,
                        T0 + timedelta(seconds=15 * i),
                        "connection-accept-rate",
                        "",
                        "",
                        ip,
                        rng.random() * 60,
                    )
                )
    return before, after, rows
