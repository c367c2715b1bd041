"""Forge saved plans the way an attacker (or an unlucky operator) would, apply
each one to a real broker, and judge the broker afterwards.

Each tampering owns two users (``tamper-NN-a`` and ``tamper-NN-victim``, NN its
number), both live at 1 MiB/s produce; its manifest raises ``tamper-NN-a`` to
2 MiB/s (scope: that one user) and ``quotaform plan --out`` saves that plan.
The tampering edits its saved file (and, where the attack needs it,
recomputes the unkeyed checksum, as anyone can), then runs ``quotaform
apply`` as a pipeline would. A tampering is *refused* when apply exits
non-zero with ``Error:`` lines (one per problem), no traceback, within the
time bound, and not for want of the apply lock; the broker is *unchanged*
when Kafka's own ConfigCommand shows exactly the baseline for users and ips
afterwards. Last, the genuine plan of one more pair of users is applied and
must land (exit 0, ConfigCommand shows 2 MiB/s), which proves the judge can
see a change.

The tamperings own disjoint users, so their applies run ``--jobs`` at a time
(each with ``--lock-timeout``: they share the cluster's apply lock) and one
ConfigCommand read after them all judges each one by its own users; a change
to any user or ip no tampering owns counts against every tampering.

Traffic stays on loopback. Usage::

    .venv/bin/python scripts/tamper_plans.py [--bootstrap-server HOST:PORT]
        [--name SANDBOX] [--jobs 4] [--out results.json]

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
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from quotaform.app.common import ConnectionOptions  # noqa: E402
from quotaform.app.plan import PlanRequest, run_plan  # noqa: E402
from quotaform.cluster.read import describe_shapes  # noqa: E402
from quotaform.cluster.wire import (  # noqa: E402
    FilterComponent,
    QuotaAdminClient,
    QuotaAlteration,
    load_connection_settings,
    open_admin,
)
from quotaform.formats.planfile import ENV_PLAN_KEY  # noqa: E402
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
      prefixes: {{user: ["{a}"]}}
  quotas:
    - entity: {{user: {a}}}
      values: {{producer_byte_rate: 2MiB}}
"""
#: Seconds one apply may take before it counts as a hang.
BOUND_S = 60.0
#: Applies run at once (on disjoint users).
JOBS = 4

Doc = dict[str, Any]
View = dict[str, dict[str, float]]


@dataclass(frozen=True)
class Users:
    """The two users one tampering owns: ``a`` (its manifest's only entity)
    and ``victim`` (outside that manifest's scope)."""

    a: str
    victim: str

    @classmethod
    def number(cls, n: int) -> Users:
        return cls(f"tamper-{n:02d}-a", f"tamper-{n:02d}-victim")

    def labels(self) -> tuple[str, str]:
        """As ConfigCommand names them."""
        return label(self.a), label(self.victim)

    def baseline(self) -> View:
        """Both users at 1 MiB/s."""
        return {name: {"producer_byte_rate": MiB} for name in self.labels()}


def label(user: str) -> str:
    return f"user-principal '{user}'"


Change = Callable[[Doc, Users], None]


def checksum(doc: Doc) -> Doc:
    """``doc`` with its unkeyed checksum recomputed (what anyone can do)."""
    body = {k: v for k, v in doc.items() if k != "checksum"}
    canonical = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return {**body, "checksum": hashlib.sha256(canonical.encode()).hexdigest()}


def edit(change: Change, *, rehash: bool = True) -> Callable[[Doc, Users], str]:
    """A tampering that edits the plan inside the file (checksum recomputed
    unless ``rehash`` is false)."""

    def make(doc: Doc, users: Users) -> str:
        forged = copy.deepcopy(doc)
        change(forged["plan"], users)
        return json.dumps(checksum(forged) if rehash else forged, indent=2)

    return make


def each_key_change(plan: Doc, fn: Callable[[Doc], None]) -> None:
    for change in plan["changes"]:
        for kc in change["key_changes"]:
            fn(kc)


def set_sent(value: Any) -> Change:
    """after and key_changes of the user ``a``'s producer_byte_rate set to ``value``."""

    def change(plan: Doc, users: Users) -> None:
        for c in plan["changes"]:
            if c["entity"] == {"user": users.a}:
                c["after"]["producer_byte_rate"] = value
                for kc in c["key_changes"]:
                    kc["after"] = value

    return change


def add_key(key: str) -> Change:
    """The first change also adds ``key`` = 5 (after and key_changes alike)."""

    def change(plan: Doc, users: Users) -> None:
        first = plan["changes"][0]
        first["after"][key] = 5.0
        first["key_changes"].append({"key": key, "action": "add", "before": None, "after": 5.0})

    return change


def times_1000(plan: Doc, users: Users) -> None:
    for c in plan["changes"]:
        c["after"] = {k: v * 1000 for k, v in c["after"].items()}
    each_key_change(plan, lambda kc: kc.update(after=kc["after"] * 1000))


def send_1000x(plan: Doc, users: Users) -> None:
    each_key_change(plan, lambda kc: kc.update(after=kc["after"] * 1000))


def inject_delete(plan: Doc, users: Users) -> None:
    plan["deletes_allowed"] = True
    plan["changes"].append(
        {
            "entity": {"user": users.victim},
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


def hide_delete_as_no_op(plan: Doc, users: Users) -> None:
    inject_delete(plan, users)
    plan["changes"][-1]["action"] = "no-op"
    plan["summary"]["delete"] = 0
    plan["summary"]["no-op"] += 1


def duplicate(plan: Doc, users: Users) -> None:
    plan["changes"].append(copy.deepcopy(plan["changes"][0]))
    plan["summary"]["update"] += 1


def fake_outside(plan: Doc, users: Users) -> None:
    plan["outside_scope"].append(
        {"entity": {"user": None}, "quotas": {"producer_byte_rate": 1024.0}}
    )


def retarget(entity: dict[str, str | None]) -> Change:
    def change(plan: Doc, users: Users) -> None:
        plan["changes"][0]["entity"] = entity

    return change


def updated(**fields: Any) -> Change:
    """The plan's top-level ``fields`` replaced."""

    def change(plan: Doc, users: Users) -> None:
        plan.update(fields)

    return change


def as_localhost(plan: Doc, users: Users) -> None:
    plan["changes"][0] = {
        "entity": {"ip": "localhost"},
        "action": "create",
        "before": {},
        "after": {"connection_creation_rate": 5.0},
        "key_changes": [
            {"key": "connection_creation_rate", "action": "add", "before": None, "after": 5.0}
        ],
        "source": None,
    }


@dataclass
class Tampering:
    """One forged plan file and how apply is run on it."""

    name: str
    make: Callable[[Doc, Users], str] | None  # None: a special file (see kind)
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
        lambda d, u: '{"plan": ' + "[" * 100_000 + "]" * 100_000 + ', "checksum": "x"}',
    ),
    Tampering("5,000-digit number", lambda d, u: json.dumps(d).replace("2097152.0", "9" * 5000, 1)),
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
    Tampering("cluster id removed", edit(updated(cluster_id=None))),
    Tampering("another cluster id", edit(updated(cluster_id="AAAAAAAAAAAAAAAAAAAAAA"))),
    Tampering("edited without the checksum", edit(times_1000, rehash=False)),
    Tampering(
        "signed plan edited", edit(times_1000), env={"QUOTAFORM_PLAN_KEY": KEY}, kind="signed-edit"
    ),
    Tampering(
        "unsigned plan while a key is set", edit(send_1000x), env={"QUOTAFORM_PLAN_KEY": KEY}
    ),
    Tampering("newer format_version", edit(updated(format_version=2))),
    # Values and entities Kafka would reject, or a quotaform never sends.
    Tampering("negative value", edit(set_sent(-1.0))),
    Tampering("zero value", edit(set_sent(0.0))),
    Tampering("fractional bytes/s", edit(set_sent(1.5))),
    Tampering("boolean value", edit(set_sent(True))),
    Tampering("value as text", edit(set_sent("2MiB"))),
    Tampering("ip key on a user", edit(add_key("connection_creation_rate"))),
    Tampering("unknown quota key", edit(add_key("bogus_rate"))),
    Tampering("empty user name", edit(retarget({"user": ""}))),
    Tampering("ip host name (DNS on the controller)", edit(as_localhost)),
    Tampering("entity planned twice", edit(duplicate)),
    Tampering("forged entity outside the scope", edit(fake_outside)),
    Tampering("stale: the cluster moved since the plan", None, kind="stale"),
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


def broker_view(bootstrap: str) -> View:
    """What Kafka's ConfigCommand shows for users and ips (the two runs side by side)."""
    outputs: dict[str, str] = {}

    def describe(entity_type: str) -> None:
        outputs[entity_type] = run_config_command(
            ["--describe", "--entity-type", entity_type],
            bootstrap=bootstrap,
            version=DEFAULT_KAFKA_VERSION,
        ).stdout

    threads = [threading.Thread(target=describe, args=(t,)) for t in ("users", "ips")]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if len(outputs) != len(threads):
        raise SystemExit("ConfigCommand failed (its error is above)")
    view: View = {}
    for text in outputs.values():
        view.update(parse_quota_describe(text))
    return view


@contextmanager
def admin_client(bootstrap: str) -> Iterator[QuotaAdminClient]:
    admin = open_admin(
        load_connection_settings(bootstrap_server=bootstrap, env={}), read_only=False
    )
    try:
        yield admin
    finally:
        admin.close()


def visible(admin: QuotaAdminClient, user: str, quotas: dict[str, float] | None) -> None:
    """Wait (20 s at most) until describe shows ``user`` with ``quotas`` (``None``: absent)."""
    entity = Entity.of(user=user)
    deadline = time.monotonic() + 20
    while True:
        live = admin.describe_client_quotas([FilterComponent.exact("user", user)], strict=True)
        if live.get(entity) == quotas or time.monotonic() > deadline:
            return
        time.sleep(0.05)


def barrier(admin: QuotaAdminClient) -> None:
    """Wait until the broker's metadata image holds every alter committed so
    far (a marker written and seen, then removed and seen gone: records are
    applied in log order), so a read after it shows what every apply did."""
    marker = f"tamper-barrier-{uuid.uuid4().hex}"
    entity = Entity.of(user=marker)
    for quotas in ({"producer_byte_rate": 1.0}, None):
        change = quotas or {"producer_byte_rate": None}
        admin.alter_client_quotas([QuotaAlteration(entity, change)], validate_only=False)
        visible(admin, marker, quotas)


def alter(bootstrap: str, alterations: list[QuotaAlteration], *, wipe: bool = False) -> None:
    """Send ``alterations`` (after removing every quota first when ``wipe``)."""
    with admin_client(bootstrap) as admin:
        if wipe:
            live = describe_shapes(admin, SHAPES)
            if live:
                admin.alter_client_quotas(
                    [QuotaAlteration(e, dict.fromkeys(q)) for e, q in live.items()],
                    validate_only=False,
                )
        admin.alter_client_quotas(alterations, validate_only=False)
        barrier(admin)


def settle(bootstrap: str, expected: View) -> View:
    deadline = time.monotonic() + 20
    while True:
        view = broker_view(bootstrap)
        if view == expected or time.monotonic() > deadline:
            return view
        time.sleep(0.5)


def save_plan(manifest: Path, out: Path, bootstrap: str, key: str | None = None) -> None:
    """``quotaform plan MANIFEST --out OUT`` (in this process: the same
    run_plan the command calls), signed when ``key`` is given."""
    before = os.environ.pop(ENV_PLAN_KEY, None)
    if key is not None:
        os.environ[ENV_PLAN_KEY] = key
    try:
        run_plan(
            PlanRequest(
                (manifest,), connection=ConnectionOptions(bootstrap_server=bootstrap), out=out
            )
        )
    finally:
        os.environ.pop(ENV_PLAN_KEY, None)
        if before is not None:
            os.environ[ENV_PLAN_KEY] = before


@dataclass
class Case:
    """One tampering, its users, and what its users must show afterwards."""

    number: int
    tampering: Tampering
    users: Users
    path: Path
    args: list[str]
    expected: View


def prepare(number: int, t: Tampering, tmp: Path, bootstrap: str) -> Case:
    """Write the tampering's manifest, save its genuine plan and forge its file."""
    users = Users.number(number)
    manifest = tmp / f"quotas-{number:02d}.yaml"
    manifest.write_text(MANIFEST.format(a=users.a), encoding="utf-8")
    genuine = tmp / f"plan-{number:02d}.json"
    key = KEY if t.kind == "signed-edit" else None
    save_plan(manifest, genuine, bootstrap, key)
    doc = json.loads(genuine.read_text(encoding="utf-8"))
    path = tmp / f"forged-{number:02d}.json"
    if t.kind == "fifo":
        os.mkfifo(path)
    elif t.kind == "newline-name":
        path = tmp / f"forged-{number:02d}\nError: all good.json"
    if t.kind == "stale":  # the genuine file as saved: the cluster moves instead
        path.write_text(genuine.read_text(encoding="utf-8"), encoding="utf-8")
    elif t.make is not None:
        path.write_text(t.make(doc, users), encoding="utf-8")
    args = ["apply", str(path)]
    if t.with_manifests:
        args.append(str(manifest))
    # Applies run side by side and share the apply lock: each waits its turn.
    args += ["--bootstrap-server", bootstrap, "--lock-timeout", str(int(BOUND_S)), *t.extra]
    return Case(number, t, users, path, args, users.baseline())


def judge(case: Case, run: tuple[int | None, str, str, float], view: View, foreign: bool) -> Doc:
    code, _, err, seconds = run
    errors = [line for line in err.splitlines() if line.startswith("Error:")]
    locked = "holds this cluster's apply lock" in err  # refused for the wrong reason
    refused = code not in (None, 0) and bool(errors) and "Traceback" not in err and not locked
    own = {name: view.get(name) for name in case.users.labels()}
    return {
        "tampering": case.tampering.name,
        "users": [case.users.a, case.users.victim],
        "exit_code": code,
        "seconds": round(seconds, 2),
        "refused": refused,
        "broker_unchanged": own == case.expected and not foreign,
        "hang": code is None,
        "traceback": "Traceback" in err,
        "error": errors[0][:400] if errors else err[-400:],
        "error_lines": len(errors),
    }


def run_series(bootstrap: str, tmp: Path, jobs: int = JOBS) -> dict[str, Any]:
    base_env = {k: v for k, v in os.environ.items() if k != ENV_PLAN_KEY}
    control_users = Users.number(len(TAMPERINGS))
    owners = [Users.number(n) for n in range(len(TAMPERINGS) + 1)]
    baseline: View = {}
    seed = []
    for users in owners:
        baseline.update(users.baseline())
        seed += [
            QuotaAlteration(Entity.of(user=name), {"producer_byte_rate": MiB})
            for name in (users.a, users.victim)
        ]
    began = time.monotonic()
    alter(bootstrap, seed, wipe=True)
    if settle(bootstrap, baseline) != baseline:
        raise SystemExit("the broker does not show the baseline")
    # Every plan sees the whole cluster (a saved plan is stale once any quota
    # moved): all are saved before any apply, and the applies that may change
    # something (the stale one's move, the control) come after the others.
    cases = [prepare(n, t, tmp, bootstrap) for n, t in enumerate(TAMPERINGS)]
    planned = time.monotonic()
    moved = [c for c in cases if c.tampering.kind == "stale"]
    at_once = [c for c in cases if c not in moved]

    def apply(case: Case) -> tuple[int | None, str, str, float]:
        return quotaform(case.args, {**base_env, **case.tampering.env})

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        ran = dict(zip((c.number for c in at_once), pool.map(apply, at_once), strict=True))
    # The stale ones: the cluster moves after their plan was saved.
    for case in moved:
        alter(
            bootstrap,
            [QuotaAlteration(Entity.of(user=case.users.a), {"producer_byte_rate": 3 * MiB})],
        )
        case.expected = {**case.expected, label(case.users.a): {"producer_byte_rate": 3 * MiB}}
        ran[case.number] = apply(case)
    runs = [ran[c.number] for c in cases]
    # The control: a genuine plan of the cluster as it now is lands.
    control_manifest = tmp / "quotas-control.yaml"
    control_manifest.write_text(MANIFEST.format(a=control_users.a), encoding="utf-8")
    genuine = tmp / "plan-control.json"
    save_plan(control_manifest, genuine, bootstrap)
    control_run = quotaform(["apply", str(genuine), "--bootstrap-server", bootstrap], base_env)
    applied = time.monotonic()

    # The judge: one ConfigCommand read once every apply has ended.
    expected: View = {}
    for case in cases:
        expected.update(case.expected)
    landed = {**control_users.baseline(), label(control_users.a): {"producer_byte_rate": 2 * MiB}}
    expected.update(landed)
    with admin_client(bootstrap) as admin:
        barrier(admin)
    view = settle(bootstrap, expected)
    owned = set(expected)
    foreign = set(view) - owned
    results = []
    for case, run in zip(cases, runs, strict=True):
        results.append(judge(case, run, view, bool(foreign)))
        line = results[-1]
        print(
            f"{'ok  ' if line['refused'] and line['broker_unchanged'] else 'FAIL'} "
            f"exit {line['exit_code']} {line['seconds']:5.2f}s {line['tampering']}: "
            f"{line['error'][:160]}",
            file=sys.stderr,
        )
    if foreign:
        print(f"FAIL changed outside every tampering's users: {sorted(foreign)}", file=sys.stderr)
    control_landed = {name: view.get(name) for name in control_users.labels()} == landed
    control_doc = {"exit_code": control_run[0], "landed": control_landed}
    summary = {
        "tampered": len(results),
        "refused": sum(r["refused"] for r in results),
        "broker_unchanged": sum(r["broker_unchanged"] for r in results),
        "hangs": sum(r["hang"] for r in results),
        "tracebacks": sum(r["traceback"] for r in results),
        "slowest_seconds": max(r["seconds"] for r in results),
        "genuine_plan_applied": control_doc["exit_code"] == 0 and control_doc["landed"],
    }
    return {
        "summary": summary,
        "tamperings": results,
        "control": control_doc,
        "changed_elsewhere": sorted(foreign),
        "durations_s": {
            "seed_and_plans": round(planned - began, 2),
            "applies": round(applied - planned, 2),
            "judge": round(time.monotonic() - applied, 2),
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-server", help="a test broker (its quotas are wiped)")
    parser.add_argument("--name", default="tamper-plans", help="sandbox name when starting one")
    parser.add_argument("--jobs", type=int, default=JOBS, help=f"applies at once (default {JOBS})")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    args = parser.parse_args()
    broker = None
    bootstrap = args.bootstrap_server
    if bootstrap is None:
        broker = start_broker(name=args.name)
        bootstrap = broker.bootstrap
    try:
        with tempfile.TemporaryDirectory(prefix="quotaform-tamper-") as tmp:
            results = run_series(bootstrap, Path(tmp), args.jobs)
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
