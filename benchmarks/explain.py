"""Explain throughput: principals resolved per second over a large configuration.

    .venv/bin/python benchmarks/explain.py --entities 10000 --principals 100000 \
        --out benchmarks/results/explain.json

Builds a synthetic configuration of ``--entities`` entities over every level
(user, user+client-id, user+<default>, <default>+client-id, client-id, ip and
the defaults), then explains ``--principals`` principals drawn from the names
it uses plus names it does not (every key, as ``quotaform explain`` does):

* **index**: :class:`quotaform.kafka.resolution.QuotaIndex` (a few dictionary
  look-ups per key, whatever the number of entries) through
  :func:`quotaform.plan.explain.explain`, with and without ``variants`` work
  (all names known, so none);
* **scan**: the naive engine that scans every entry per principal and key
  (the "before"), on a sample of ``--scan-sample`` principals, extrapolated.

The two engines' answers are compared on the sample (value, level, entity,
tags per key); the script fails if they ever differ.
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import sys
import time
from pathlib import Path

from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import QUOTA_KEYS
from quotaform.kafka.resolution import (
    CLIENT_LEVELS,
    IP_LEVELS,
    Principal,
    QuotaIndex,
    resolve,
)
from quotaform.plan.explain import explain

CLIENT_KEYS = [k for k, s in QUOTA_KEYS.items() if "user" in s.entity_types]


def configuration(n: int, rng: random.Random) -> dict[Entity, dict[str, float]]:
    """``n`` entities spread over every level, 1-3 keys each."""
    shares = [("u", 0.3), ("uc", 0.25), ("ud", 0.1), ("dc", 0.1), ("c", 0.15), ("ip", 0.1)]
    entries: dict[Entity, dict[str, float]] = {
        Entity.of(user=None): {"consumer_byte_rate": 2.0 * 2**20},
        Entity.of(user=None, client_id=None): {"request_percentage": 25.0},
        Entity.of(client_id=None): {"controller_mutation_rate": 5.0},
        Entity.of(ip=None): {"connection_creation_rate": 50.0},
    }
    for kind, share in shares:
        for i in range(int(n * share)):
            user, client = f"user-{i % 4000}", f"client-{i}"
            entity = {
                "u": lambda u=user: Entity.of(user=u),
                "uc": lambda u=user, c=client: Entity.of(user=u, client_id=c),
                "ud": lambda u=user: Entity.of(user=u, client_id=None),
                "dc": lambda c=client: Entity.of(user=None, client_id=c),
                "c": lambda c=client: Entity.of(client_id=c),
                "ip": lambda i=i: Entity.of(ip=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"),
            }[kind]()
            keys = (
                ["connection_creation_rate"]
                if kind == "ip"
                else rng.sample(CLIENT_KEYS, rng.randint(1, 3))
            )
            entries[entity] = {k: float(rng.randint(1, 100) * 1024) for k in keys}
    return entries


def principals(n: int, rng: random.Random) -> list[Principal]:
    """Mostly named principals (matching and not), a few ips."""
    found = []
    for _ in range(n):
        if rng.random() < 0.05:
            i = rng.randint(0, 20000)
            found.append(Principal(ip=f"10.{i // 65536}.{i // 256 % 256}.{i % 256}"))
        else:
            found.append(
                Principal(
                    user=f"user-{rng.randint(0, 6000)}", client_id=f"client-{rng.randint(0, 6000)}"
                )
            )
    return found


def scan_resolve(entries: dict[Entity, dict[str, float]], principal: Principal, key: str) -> object:
    """The naive engine: the broker's two steps, each by scanning every entry."""

    def find(levels, names):  # type: ignore[no-untyped-def]
        for level in levels:
            wanted = level.entity_for(names)
            if wanted is None:
                continue
            for entity, quotas in entries.items():  # the scan
                if entity == wanted and key in quotas:
                    return level, entity, quotas[key]
        return None

    names = principal.names()
    if principal.is_ip:
        return find(IP_LEVELS, names)
    shapes = {e.types for e, q in entries.items() if key in q}
    user, client = principal.user, principal.client_id
    if not shapes or shapes == {("client-id",)}:
        tags = ("", client)
    elif shapes == {("user",)}:
        tags = (user, "")
    elif shapes == {("user", "client-id")}:
        tags = (user, client)
    else:
        first = find(CLIENT_LEVELS[:6], names)
        tags = (
            ("", client)
            if first is None
            else (user, client)
            if "client-id" in first[0].tag_types
            else (user, "")
        )
    order = {
        (True, True): [CLIENT_LEVELS[i - 1] for i in (1, 2, 4, 5)],
        (True, False): [CLIENT_LEVELS[i - 1] for i in (3, 6)],
        (False, True): [CLIENT_LEVELS[i - 1] for i in (7, 8)],
        (False, False): [],
    }[(tags[0] != "", tags[1] != "")]
    return find(order, names)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--entities", type=int, default=10000)
    parser.add_argument("--principals", type=int, default=100000)
    parser.add_argument("--scan-sample", type=int, default=200)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)
    rng = random.Random(args.seed)
    entries = configuration(args.entities, rng)
    who = principals(args.principals, rng)

    start = time.perf_counter()
    index = QuotaIndex(entries)
    index_s = time.perf_counter() - start

    start = time.perf_counter()
    for principal in who:
        explain(index, principal)
    explain_s = time.perf_counter() - start

    sample = who[: args.scan_sample]
    start = time.perf_counter()
    scanned = [
        {
            k: scan_resolve(entries, p, k)
            for k in QUOTA_KEYS
            if (("ip" in QUOTA_KEYS[k].entity_types) == p.is_ip)
        }
        for p in sample
    ]
    scan_s = time.perf_counter() - start
    for principal, expected in zip(sample, scanned, strict=True):
        for key, found in expected.items():
            got = resolve(index, principal, key)
            mine = None if got.level is None else (got.level, got.entity, got.value)
            if mine != found:
                print(f"MISMATCH {principal} {key}: index {mine} scan {found}", file=sys.stderr)
                return 1

    result = {
        "machine": (
            f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}"
        ),
        "entities": len(entries),
        "principals": len(who),
        "index_build_s": round(index_s, 3),
        "explain_s": round(explain_s, 3),
        "principals_per_s": round(len(who) / explain_s),
        "scan_sample": len(sample),
        "scan_s": round(scan_s, 3),
        "scan_principals_per_s": round(len(sample) / scan_s, 1),
        "speedup": round((len(who) / explain_s) / (len(sample) / scan_s), 1),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        args.out.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
