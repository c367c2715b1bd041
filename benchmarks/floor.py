"""The floor of a quotaform command: a bare process doing only the unavoidable
work, measured beside quotaform by ``benchmarks/performance.py``.

Start Python, import kafka-python, parse the same manifest files with libyaml's
``CSafeLoader`` (PyYAML), connect, and send the same RPCs quotaform sends,
built directly from kafka-python's protocol classes: no models, no planning,
no rendering, no lock, no read-back polling.

* ``plan FILE...``: one strict DescribeClientQuotas per entity shape (user,
  client-id, user+client-id, ip: the four reads of ``quotaform plan``).
* ``apply FILE...``: one validate_only AlterClientQuotas of every entry, the
  real AlterClientQuotas, then one strict DescribeClientQuotas of the user
  shape (batched at 10,000 ops per request, as quotaform does).

Usage::

    python benchmarks/floor.py plan|apply --bootstrap-server HOST:PORT FILE...

Manifests: the benchmark's own (``quotas`` entries with ``entity`` and
``values``; values in bytes/s or with the suffixes the benchmark writes).
"""

from __future__ import annotations

import sys

import yaml
from kafka import KafkaAdminClient
from kafka.protocol.admin import AlterClientQuotasRequest, DescribeClientQuotasRequest

_SUFFIX = {"KiB": 1024, "MiB": 1024**2, "GiB": 1024**3}
_SHAPES = (("user",), ("client-id",), ("user", "client-id"), ("ip",))
_MAX_OPS = 10_000


def _number(value: object) -> float:
    if isinstance(value, str) and value[-3:] in _SUFFIX:
        return float(value[:-3]) * _SUFFIX[value[-3:]]
    return float(value)  # type: ignore[arg-type]


def _entries(paths: list[str]) -> list[tuple[dict[str, str], dict[str, float]]]:
    out = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            for doc in yaml.load_all(f, Loader=yaml.CSafeLoader):
                for q in doc["spec"]["quotas"]:
                    out.append((q["entity"], {k: _number(v) for k, v in q["values"].items()}))
    return out


def _run(admin: KafkaAdminClient, request: object) -> object:
    manager = admin._manager

    async def send() -> object:
        conn = manager.get_connection(manager.least_loaded_node())
        await conn
        return await conn.send_request(request)

    return manager.run(send)


def _describe(admin: KafkaAdminClient, shape: tuple[str, ...]) -> int:
    comp = DescribeClientQuotasRequest.ComponentData
    response = _run(
        admin,
        DescribeClientQuotasRequest(
            components=[comp(entity_type=t, match_type=2, match=None) for t in shape],
            strict=True,
        ),
    )
    assert not response.error_code, response  # type: ignore[attr-defined]
    return len(response.entries or ())  # type: ignore[attr-defined]


def _alter(admin: KafkaAdminClient, entries: list, validate_only: bool) -> None:
    e = AlterClientQuotasRequest.EntryData
    batch: list = []
    ops = 0

    def flush() -> None:
        if batch:
            response = _run(
                admin, AlterClientQuotasRequest(entries=batch, validate_only=validate_only)
            )
            bad = [x for x in response.entries if x.error_code]  # type: ignore[attr-defined]
            assert not bad, bad[:3]

    for entity, values in entries:
        if ops + len(values) > _MAX_OPS:
            flush()
            batch, ops = [], 0
        batch.append(
            e(
                entity=[e.EntityData(entity_type=t, entity_name=n) for t, n in entity.items()],
                ops=[e.OpData(key=k, value=v, remove=False) for k, v in sorted(values.items())],
            )
        )
        ops += len(values)
    flush()


def main(argv: list[str]) -> int:
    command, _, bootstrap, *paths = argv
    entries = _entries(paths)
    admin = KafkaAdminClient(bootstrap_servers=bootstrap, client_id="quotaform-floor")
    try:
        if command == "plan":
            for shape in _SHAPES:
                _describe(admin, shape)
        elif command == "apply":
            _alter(admin, entries, validate_only=True)
            _alter(admin, entries, validate_only=False)
            _describe(admin, ("user",))
        else:
            raise SystemExit(f"unknown command {command}")
    finally:
        admin.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
