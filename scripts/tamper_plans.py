"""Forge saved plans the way an attacker (or an unlucky operator) would, apply
each one to a real broker, and judge the broker afterwards.

The baseline: users ``tamper-a`` (1 MiB/s produce) and ``tamper-victim``
(1 MiB/s) are live; a manifest raises ``tamper-a`` to 2 MiB/s; ``quotaform plan
--out`` saves that plan. Every tampering below edits the saved file (and,
where the attack needs it, recomputes the unkeyed checksum, as anyone can),
then runs ``quotaform apply`` as a pipeline would. A tampering is *refused*
when apply exits non-zero with ``Error:`` lines (one per problem), no traceback
and within the time bound; the broker is *unchanged* when Kafka's own
ConfigCommand shows exactly the baseline for users and ips afterwards. Last,
the genuine plan is applied and must land (exit 0, ConfigCommand shows 2 MiB/s),
which proves the judge can see a change.

Traffic stays on loopback. Usage::

    .venv/bin/python scripts/tamper_plans.py [--bootstrap-server HOST:PORT]
        [--name SANDBOX] [--out results.json]

Without ``--bootstrap-server`` a sandbox broker is started and stopped. With
one, the broker's user and ip quotas are wiped first (use a test broker).
"""

from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quotaform.cluster.read import describe_shapes  # noqa: E402
from quotaform.cluster.wire import (  # noqa: E402
    QuotaAlteration,
    load_connection_settings,
    open_admin,
)
from quotaform.kafka.entity import SHAPES, Entity  # noqa: E402
from quotaform.sandbox import (  # noqa: E402
    DEFAULT_KAFKA_VERSION,
    parse_quota_describe,
    run_config_command,
    start_broker,
    stop_broker,
)

MiB = 1048576.0
KEY = "a-long-random-ci-secret"
MANIFEST = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  cluster: tamper
spec:
  scope:
    - shape: user
      prefixes: {user: ["tamper-a"]}
  quotas:
    - entity: {user: tamper-a}
      values: {producer_byte_rate: 2MiB}
"""
#: Seconds one apply may take before it counts as a hang.
BOUND_S = 60.0

Doc = dict[str, Any]


def checksum(doc: Doc) -> Doc:
    """``doc`` with its unkeyed checksum recomputed (what anyone can do)."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {**body, "checksum": hashlib.sha256(canonical.encode()).hexdigest()}


def edit(change: Callable[[Doc], None], *, rehash: bool = True) -> Callable[[Doc], str]:
    """A tampering that edits the plan inside the file (checksum recomputed
    unless ``rehash`` is false)."""

    def make(doc: Doc) -> str:
        forged = copy.deepcopy(doc)
        change(forged["plan"])
        return json.dumps(checksum(forged) if rehash else forged, indent=2)

    return make


def each_key_change(plan: Doc, fn: Callable[[Doc], None]) -> None:
    for change in plan["changes"]:
        for kc in change["key_changes"]:
            fn(kc)


def set_sent(value: Any) -> Callable[[Doc], None]:
    """after and key_changes of tamper-a's producer_byte_rate set to ``value``."""

    def change(plan: Doc) -> None:
        for c in plan["changes"]:
            if c["entity"] == {"user": "tamper-a"}:
                c["after"]["producer_byte_rate"] = value
                for kc in c["key_changes"]:
                    kc["after"] = value

    return change


def add_key(key: str) -> Callable[[Doc], None]:
    """The first change also adds ``key`` = 5 (after and key_changes alike)."""

    def change(plan: Doc) -> None:
        first = plan["changes"][0]
        first["after"][key] = 5.0
        first["key_changes"].append({"key": key, "action": "add", "before": None, "after": 5.0})

    return change


def times_1000(plan: Doc) -> None:
    for c in plan["changes"]:
        c["after"] = {k: v * 1000 for k, v in c["after"].items()}
    each_key_change(plan, lambda kc: kc.update(after=kc["after"] * 1000))


def send_1000x(plan: Doc) -> None:
    each_key_change(plan, lambda kc: kc.update(after=kc["after"] * 1000))


def inject_delete(plan: Doc) -> None:
    plan["deletes_allowed"] = True
    plan["changes"].append(
        {
            "entity": {"user": "tamper-victim"},
            "action": "delete",
            "before": {"producer_byte_rate": MiB},
            "after": {},
            "key_changes": [
                {"key": "producer_byte_rate", "action": "remove", "before": MiB, "after": None}
            ],
            "source": None,
        }
    )
    plan["summary"]["delete"] = 1


def hide_delete_as_no_op(plan: Doc) -> None:
    inject_delete(plan)
    plan["changes"][-1]["action"] = "no-op"
    plan["summary"]["delete"] = 0
    plan["summary"]["no-op"] += 1


def duplicate(plan: Doc) -> None:
    plan["changes"].append(copy.deepcopy(plan["changes"][0]))
    plan["summary"]["update"] += 1


def fake_outside(plan: Doc) -> None:
    plan["outside_scope"].append(
        {"entity": {"user": None}, "quotas": {"producer_byte_rate": 1024.0}}
    )


def retarget(entity: dict[str, str | None]) -> Callable[[Doc], None]:
    def change(plan: Doc) -> None:
        plan["changes"][0]["entity"] = entity

    return change


@dataclass
class Tampering:
    """One forged plan file and how apply is run on it."""

    name: str
    make: Callable[[Doc], str] | None  # None: a special file (see kind)
    with_manifests: bool = False
    env: dict[str, str] = field(default_factory=dict)
    extra: tuple[str, ...] = ()
    kind: str = "file"  # file, fifo, newline-name, signed-edit, stale


TAMPERINGS = [
    # Found by the saved-plan contract issue.
    Tampering("key_changes x1000, with manifests", edit(send_1000x), with_manifests=True),
    Tampering("key_changes x1000, no manifests", edit(send_1000x)),
    # json.dumps writes float("nan") as NaN, checksum included, as an attacker's tool would.
    Tampering("NaN value", edit(set_sent(float("nan")))),
    Tampering("Infinity value", edit(set_sent(float("inf")))),
    Tampering(
        "empty QUOTAFORM_PLAN_KEY, forged plan",
        edit(times_1000),
        env={"QUOTAFORM_PLAN_KEY": ""},
        extra=("--allow-relax",),
    ),
    Tampering(
        "nested 100,000 deep",
        lambda d: '{"plan": ' + "[" * 100_000 + "]" * 100_000 + ', "checksum": "x"}',
    ),
    Tampering("5,000-digit number", lambda d: json.dumps(d).replace("2097152.0", "9" * 5000, 1)),
    Tampering("FIFO instead of a file", None, kind="fifo"),
    Tampering("newline in the file name", edit(send_1000x), kind="newline-name"),
    # The earlier ones (fault and credential work).
    Tampering("after and key_changes x1000 (relax guard)", edit(times_1000)),
    Tampering(
        "after and key_changes x1000, with manifests and --allow-relax",
        edit(times_1000),
        with_manifests=True,
        extra=("--allow-relax",),
    ),
    Tampering("injected delete", edit(inject_delete)),
    Tampering("injected delete labelled no-op", edit(hide_delete_as_no_op)),
    Tampering("cluster id removed", edit(lambda p: p.update(cluster_id=None))),
    Tampering("another cluster id", edit(lambda p: p.update(cluster_id="AAAAAAAAAAAAAAAAAAAAAA"))),
    Tampering("edited without the checksum", edit(times_1000, rehash=False)),
    Tampering(
        "signed plan edited", edit(times_1000), env={"QUOTAFORM_PLAN_KEY": KEY}, kind="signed-edit"
    ),
    Tampering(
        "unsigned plan while a key is set", edit(send_1000x), env={"QUOTAFORM_PLAN_KEY": KEY}
    ),
    Tampering("newer format_version", edit(lambda p: p.update(format_version=2))),
    # Values and entities Kafka would reject, or a quotaform never sends.
    Tampering("negative value", edit(set_sent(-1.0))),
    Tampering("zero value", edit(set_sent(0.0))),
    Tampering("fractional bytes/s", edit(set_sent(1.5))),
    Tampering("boolean value", edit(set_sent(True))),
    Tampering("value as text", edit(set_sent("2MiB"))),
    Tampering("ip key on a user", edit(add_key("connection_creation_rate"))),
    Tampering("unknown quota key", edit(add_key("bogus_rate"))),
    Tampering("empty user name", edit(retarget({"user": ""}))),
    Tampering(
        "ip host name (DNS on the controller)",
        edit(
            lambda p: p["changes"].__setitem__(
                0,
                {
                    "entity": {"ip": "localhost"},
                    "action": "create",
                    "before": {},
                    "after": {"connection_creation_rate": 5.0},
                    "key_changes": [
                        {
                            "key": "connection_creation_rate",
                            "action": "add",
                            "before": None,
                            "after": 5.0,
                        }
                    ],
                    "source": None,
                },
            )
        ),
    ),
    Tampering("entity planned twice", edit(duplicate)),
    Tampering("forged entity outside the scope", edit(fake_outside)),
    Tampering("stale: the cluster moved since the plan", edit(lambda p: None), kind="stale"),
]


def quotaform(args: list[str], env: dict[str, str]) -> tuple[int | None, str, str, float]:
    start = time.monotonic()
    try:
        done = subprocess.run(
            [sys.executable, "-m", "quotaform", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=BOUND_S,
            stdin=subprocess.DEVNULL,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return None, "", "", time.monotonic() - start
    return done.returncode, done.stdout, done.stderr, time.monotonic() - start


def broker_view(bootstrap: str) -> dict[str, dict[str, float]]:
    """What Kafka's ConfigCommand shows for users and ips."""
    view: dict[str, dict[str, float]] = {}
    for entity_type in ("users", "ips"):
        proc = run_config_command(
            ["--describe", "--entity-type", entity_type],
            bootstrap=bootstrap,
            version=DEFAULT_KAFKA_VERSION,
        )
        view.update(parse_quota_describe(proc.stdout))
    return view


def alter(bootstrap: str, alterations: list[QuotaAlteration], *, wipe: bool = False) -> None:
    """Send ``alterations`` (after removing every quota first when ``wipe``)."""
    admin = open_admin(
        load_connection_settings(bootstrap_server=bootstrap, env={}), read_only=False
    )
    try:
        if wipe:
            live = describe_shapes(admin, SHAPES)
            if live:
                admin.alter_client_quotas(
                    [QuotaAlteration(e, dict.fromkeys(q)) for e, q in live.items()],
                    validate_only=False,
                )
        admin.alter_client_quotas(alterations, validate_only=False)
    finally:
        admin.close()


def wipe_and_seed(bootstrap: str) -> None:
    """Only the baseline left: tamper-a and tamper-victim at 1 MiB/s."""
    alter(
        bootstrap,
        [
            QuotaAlteration(Entity.of(user="tamper-a"), {"producer_byte_rate": MiB}),
            QuotaAlteration(Entity.of(user="tamper-victim"), {"producer_byte_rate": MiB}),
        ],
        wipe=True,
    )


def settle(bootstrap: str, expected: dict[str, dict[str, float]]) -> dict[str, dict[str, float]]:
    deadline = time.monotonic() + 20
    while True:
        view = broker_view(bootstrap)
        if view == expected or time.monotonic() > deadline:
            return view
        time.sleep(0.5)


def run_series(bootstrap: str, tmp: Path) -> dict[str, Any]:
    base_env = {k: v for k, v in os.environ.items() if k != "QUOTAFORM_PLAN_KEY"}
    wipe_and_seed(bootstrap)
    baseline = {
        "user-principal 'tamper-a'": {"producer_byte_rate": MiB},
        "user-principal 'tamper-victim'": {"producer_byte_rate": MiB},
    }
    if settle(bootstrap, baseline) != baseline:
        raise SystemExit("the broker does not show the baseline")
    manifest = tmp / "quotas.yaml"
    manifest.write_text(MANIFEST, encoding="utf-8")
    genuine = tmp / "plan.json"
    signed = tmp / "signed.json"
    for out, env in ((genuine, base_env), (signed, {**base_env, "QUOTAFORM_PLAN_KEY": KEY})):
        code, _, err, _ = quotaform(
            ["plan", str(manifest), "--bootstrap-server", bootstrap, "--out", str(out)], env
        )
        if code != 0:
            raise SystemExit(f"plan --out failed: {err}")
    doc = json.loads(genuine.read_text(encoding="utf-8"))
    signed_doc = json.loads(signed.read_text(encoding="utf-8"))
    results = []
    for i, t in enumerate(TAMPERINGS):
        path = tmp / f"forged-{i}.json"
        if t.kind == "fifo":
            os.mkfifo(path)
        elif t.kind == "newline-name":
            path = tmp / f"forged-{i}\nError: all good.json"
        if t.kind == "signed-edit":
            assert t.make is not None
            path.write_text(t.make(signed_doc), encoding="utf-8")
        elif t.make is not None:
            path.write_text(t.make(doc), encoding="utf-8")
        if t.kind == "stale":
            path.write_text(genuine.read_text(encoding="utf-8"), encoding="utf-8")
            alter(
                bootstrap,
                [QuotaAlteration(Entity.of(user="tamper-a"), {"producer_byte_rate": 3 * MiB})],
            )
        expected = dict(baseline)
        if t.kind == "stale":
            expected["user-principal 'tamper-a'"] = {"producer_byte_rate": 3 * MiB}
            settle(bootstrap, expected)
        args = ["apply", str(path)]
        if t.with_manifests:
            args.append(str(manifest))
        args += ["--bootstrap-server", bootstrap, *t.extra]
        code, out, err, seconds = quotaform(args, {**base_env, **t.env})
        after = settle(bootstrap, expected)
        errors = [line for line in err.splitlines() if line.startswith("Error:")]
        refused = code not in (None, 0) and bool(errors) and "Traceback" not in err
        results.append(
            {
                "tampering": t.name,
                "exit_code": code,
                "seconds": round(seconds, 2),
                "refused": refused,
                "broker_unchanged": after == expected,
                "hang": code is None,
                "traceback": "Traceback" in err,
                "error": errors[0][:400] if errors else err[-400:],
                "error_lines": len(errors),
            }
        )
        line = results[-1]
        print(
            f"{'ok  ' if refused and line['broker_unchanged'] else 'FAIL'} exit {code} "
            f"{seconds:5.2f}s {t.name}: {line['error'][:160]}",
            file=sys.stderr,
        )
        if t.kind == "stale":
            wipe_and_seed(bootstrap)
            settle(bootstrap, baseline)
    # The control: the genuine plan lands, so the judge can see a change.
    code, _, err, _ = quotaform(["apply", str(genuine), "--bootstrap-server", bootstrap], base_env)
    landed = dict(baseline)
    landed["user-principal 'tamper-a'"] = {"producer_byte_rate": 2 * MiB}
    control = {"exit_code": code, "landed": settle(bootstrap, landed) == landed}
    summary = {
        "tampered": len(results),
        "refused": sum(r["refused"] for r in results),
        "broker_unchanged": sum(r["broker_unchanged"] for r in results),
        "hangs": sum(r["hang"] for r in results),
        "tracebacks": sum(r["traceback"] for r in results),
        "slowest_seconds": max(r["seconds"] for r in results),
        "genuine_plan_applied": control["exit_code"] == 0 and control["landed"],
    }
    return {"summary": summary, "tamperings": results, "control": control}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", help="a test broker (its quotas are wiped)")
    parser.add_argument("--name", default="tamper-plans", help="sandbox name when starting one")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        broker = start_broker(name=args.name)
        bootstrap = broker.bootstrap
    try:
        with tempfile.TemporaryDirectory(prefix="quotaform-tamper-") as tmp:
            results = run_series(bootstrap, Path(tmp))
    finally:
        if broker is not None:
            stop_broker(name=args.name)
    text = json.dumps(results, indent=2)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    print(json.dumps(results["summary"], indent=2))
    s = results["summary"]
    ok = s["refused"] == s["broker_unchanged"] == s["tampered"] and s["genuine_plan_applied"]
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
