"""Principals: user names that are probably mistakes (warnings with
file:line and field, from validate and the loader), principals as Kafka
writes them (super.users, the profile's superUsers, --super-user), and the
pure judgements plan makes once connected: user quotas naming no SCRAM
user, default user quotas that would throttle a super user. The broker's
side is proven in tests/integration/test_sasl_e2e.py."""

from __future__ import annotations

import shlex
import textwrap
from pathlib import Path
from typing import Any, cast

import pytest
from typer.testing import CliRunner

import quotaform.app.principals as app_principals
from quotaform.app.common import View
from quotaform.cli.app import app
from quotaform.cluster.principals import BrokerSuperUsers, ScramUsers
from quotaform.cluster.profiles import load_cluster_profiles
from quotaform.errors import BrokerError, ClusterConfigError
from quotaform.kafka.entity import Entity
from quotaform.kafka.keys import LONG_MAX
from quotaform.kafka.names import parse_principal, parse_super_users, user_name_problems
from quotaform.kafka.resolution import Principal, QuotaIndex, resolve
from quotaform.kafka.units import parse_quota_value
from quotaform.manifest import load_manifests
from quotaform.plan.principals import (
    HINT_BUDGET,
    SuperUser,
    super_user_warnings,
    unknown_scram_users,
)
from quotaform.plan.state import DesiredEntity, SourceLocation
from tests.docblocks import fenced_blocks, file_block, section
from tests.unit.builders import desired_state, plan_of

runner = CliRunner()
PAGE = section("docs/manifests.md", "## Principals: user names, SCRAM users and super users")

NAMES = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  cluster: c
spec:
  scope: [{shape: user}, {shape: user+client-id}]
  protect:
    - entity: {user: " svc-protected"}
  quotas:
    - entity: {user: "User:alice"}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: "bob "}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: "CN%3Dcarol%2COU%3Deng"}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: "CN=dave, OU=eng,O=Example", client-id: app}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: "CN=erin,OU=eng"}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: {default: true}}
      values: {producer_byte_rate: 1MiB}
  probes:
    - {user: "user:frank", client-id: app}
"""


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def test_user_names_that_are_probably_mistakes_are_warned_with_file_line_and_field(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "m.yaml", NAMES)
    state = load_manifests([path])
    assert state.warnings == (
        f'{path}:8: spec.protect[0].entity.user: " svc-protected" has leading or trailing '
        "whitespace, which Kafka keeps as part of the name: it would not match a principal "
        'named "svc-protected"',
        f'{path}:10: spec.quotas[0].entity.user: "User:alice" starts with the principal type '
        "(User:): quota user names are principal names without their type "
        '(KafkaPrincipal.getName()), so write "alice"',
        f'{path}:12: spec.quotas[1].entity.user: "bob " has leading or trailing whitespace, '
        "which Kafka keeps as part of the name: it would not match a principal named "
        '"bob"',
        f'{path}:14: spec.quotas[2].entity.user: "CN%3Dcarol%2COU%3Deng" looks URL-encoded, '
        "as ZooKeeper-era tools stored quota user names: Kafka's API takes names as they "
        "are, so it would match only a principal literally named so; the principal is "
        'probably "CN=carol,OU=eng"',
        f'{path}:16: spec.quotas[3].entity.user: "CN=dave, OU=eng,O=Example" is a '
        "distinguished name with spaces around its separators: Kafka's default principal "
        "builder names a TLS client X500Principal.getName(), the RFC 2253 form without "
        'them ("CN=dave,OU=eng,O=Example"), then applies ssl.principal.mapping.rules '
        "(DEFAULT leaves it unchanged): write the name those rules give",
        f'{path}:23: spec.probes[0].user: "user:frank" starts with the principal type '
        "(user:): quota user names are principal names without their type "
        '(KafkaPrincipal.getName()), so write "frank"',
    )


def test_validate_prints_the_name_warnings_on_stderr_and_still_exits_0(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", NAMES)
    result = runner.invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output
    warnings = [line for line in result.stderr.splitlines() if line.startswith("Warning: ")]
    assert [w.split(": ", 3)[1:3] for w in warnings] == [
        [f"{path}:8", "spec.protect[0].entity.user"],
        [f"{path}:10", "spec.quotas[0].entity.user"],
        [f"{path}:12", "spec.quotas[1].entity.user"],
        [f"{path}:14", "spec.quotas[2].entity.user"],
        [f"{path}:16", "spec.quotas[3].entity.user"],
        [f"{path}:23", "spec.probes[0].user"],
    ]
    assert result.stdout == "Valid: 6 entities for cluster 'c' in 2 scope rule(s).\n"


@pytest.mark.parametrize(
    "name",
    [
        "alice",
        "svc-orders",
        "CN=alice,OU=eng,O=Example\\, Inc.",  # an escaped comma is data
        "CN=alice,OU=eng",
        "CN=a b c",  # spaces inside a value
        "100%",
        "50%off",  # not a %XX escape
        "a%zz",
        "%C3",  # decodes to no UTF-8 text
        "ANONYMOUS",
        "User:",  # no name after the type: left alone
        "alice@EXAMPLE.COM",
    ],
)
def test_names_that_look_right_are_left_alone(name: str) -> None:
    assert user_name_problems(name) == ()


@pytest.mark.parametrize(
    ("name", "suggested"),
    [
        ("CN=alice, OU=eng", '"CN=alice,OU=eng"'),
        ("CN=alice ,OU=eng", '"CN=alice,OU=eng"'),
        ("CN = alice,OU=eng", '"CN=alice,OU=eng"'),
        ("2.5.4.3=alice, OU=eng", '"2.5.4.3=alice,OU=eng"'),
        ("alice%20smith", '"alice smith"'),
        ("User:bob", '"bob"'),
    ],
)
def test_each_rule_suggests_the_likely_name(name: str, suggested: str) -> None:
    (problem,) = user_name_problems(name)
    assert suggested in problem


def test_several_rules_apply_to_one_name() -> None:
    problems = user_name_problems(" User:CN=alice, OU=eng")
    assert len(problems) == 3
    assert "starts with the principal type (User:)" in problems[0]
    assert "has leading or trailing whitespace" in problems[1]
    assert 'the RFC 2253 form without them ("CN=alice,OU=eng")' in problems[2]


def test_principals_are_read_as_kafka_reads_them() -> None:
    assert parse_principal("User:admin") == ("User", "admin")
    assert parse_principal(" User:CN=a,OU=b:c ") == ("User", "CN=a,OU=b:c")  # first ':' splits
    assert parse_super_users("User:admin; User:ANONYMOUS;;") == ("User:admin", "User:ANONYMOUS")
    assert parse_super_users("") == ()
    for bad in ("admin", ":admin", "User:"):
        with pytest.raises(ValueError, match="is not a principal: write Type:name"):
            parse_principal(bad)


# ------------------------------------------------------------------ super users given


def test_the_profile_takes_super_users_and_refuses_a_bad_one_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "quotaform.clusters.yaml",
        """\
        clusters:
          prod:
            bootstrapServers: b:9092
            superUsers:
              - User:admin
              - ' User:ops '
        """,
    )
    profile = load_cluster_profiles(path).get("prod")
    assert profile.super_users == ("User:admin", "User:ops")
    assert profile.super_users_source == f"{path}:4"
    write(path, "clusters:\n  prod:\n    bootstrapServers: b:9092\n    superUsers: [User:a, ops]\n")
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_profiles(path)
    assert str(info.value) == (
        f'{path}:4: clusters.prod.superUsers[1]: "ops" is not a principal: write Type:name, '
        "e.g. User:admin (as in the brokers' super.users)"
    )


def test_a_bad_super_user_option_is_a_usage_error(tmp_path: Path) -> None:
    path = write(tmp_path / "m.yaml", NAMES)
    result = runner.invoke(
        app, ["plan", str(path), "--bootstrap-server", "127.0.0.1:1", "--super-user", "admin"]
    )
    assert result.exit_code == 1, result.output  # usage errors exit 1 (errors.py)
    assert "Error: Invalid value for '--super-user'" in result.output
    assert '"admin" is not a principal: write Type:name' in result.output


# ------------------------------------------------------------------ SCRAM users


def declared(path: Path) -> list[DesiredEntity]:
    return list(load_manifests([path]).entities.values())


SCRAM = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata: {cluster: c}
spec:
  scope: [{shape: user}, {shape: user+client-id}]
  quotas:
    - entity: {user: {default: true}}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: alice}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: alcie, client-id: app}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: ANONYMOUS}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: "CN=svc,OU=eng"}
      values: {producer_byte_rate: 1MiB}
"""


def test_user_quotas_naming_no_scram_user_are_warned_at_their_declaration(
    tmp_path: Path,
) -> None:
    path = write(tmp_path / "m.yaml", SCRAM)
    assert unknown_scram_users(declared(path), ["admin", "alice"]) == (
        f'{path}:11: entity.user: no SCRAM user named "alcie" among the cluster\'s 2 (did you '
        'mean "alice"?); if "alcie" authenticates by TLS or OAuth, ignore this',
        f'{path}:15: entity.user: no SCRAM user named "CN=svc,OU=eng" among the cluster\'s 2; '
        'if "CN=svc,OU=eng" authenticates by TLS or OAuth, ignore this',
    )
    everyone = ["admin", "alice", "alcie", "CN=svc,OU=eng"]
    assert unknown_scram_users(declared(path), everyone) == ()


# ------------------------------------------------------------------ super users judged

SOURCE = SourceLocation("m.yaml", 7)
USER_DEFAULT = Entity.of(user=None)


def exempt(user: str, *keys: str) -> str:
    values = ", ".join(f"{k}: {LONG_MAX}" for k in keys)
    return f'- {{entity: {{user: "{user}"}}, values: {{{values}}}}}'


def warning_for(entity: str, principal: str, keys: str, entry: str, at: str = "m.yaml:7") -> str:
    return (
        f"{at}: entity: {entity} would throttle super user {principal} (--super-user) for "
        f"{keys}: a default applies to every principal without a more specific entry, the "
        "operators' own included; exempt it with an entry of its own in spec.quotas: "
        f"{entry} (Long.MAX_VALUE, what a client without any quota gets)"
    )


ADMIN = SuperUser("User:admin", "--super-user")


def test_a_default_user_quota_throttling_a_super_user_is_warned_with_the_exempt_entry() -> None:
    entries = {USER_DEFAULT: {"producer_byte_rate": 1048576.0, "request_percentage": 50.0}}
    found = super_user_warnings(entries, {USER_DEFAULT: SOURCE}, [ADMIN])
    keys = ("producer_byte_rate", "request_percentage")
    assert found == (
        warning_for("user=<default>", "User:admin", ", ".join(keys), exempt("admin", *keys)),
    )
    # The suggested entry is a valid manifest value and exempts the super user.
    for key in keys:
        assert parse_quota_value(key, LONG_MAX) == float(LONG_MAX)
    exempted = {**entries, Entity.of(user="admin"): dict.fromkeys(keys, float(LONG_MAX))}
    assert super_user_warnings(exempted, {USER_DEFAULT: SOURCE}, [ADMIN]) == ()
    index = QuotaIndex(exempted)
    assert resolve(index, Principal("admin", "any"), "producer_byte_rate").entity == (
        Entity.of(user="admin")
    )


def test_an_entry_of_its_own_exempts_a_super_user_key_by_key() -> None:
    entries = {
        USER_DEFAULT: {"producer_byte_rate": 1048576.0, "consumer_byte_rate": 2097152.0},
        Entity.of(user="admin"): {"producer_byte_rate": 10485760.0},
    }
    found = super_user_warnings(entries, {USER_DEFAULT: SOURCE}, [ADMIN])
    assert found == (
        warning_for(
            "user=<default>",
            "User:admin",
            "consumer_byte_rate",
            exempt("admin", "consumer_byte_rate"),
        ),
    )


def test_defaults_with_a_client_id_are_judged_for_that_client_id() -> None:
    both = Entity.of(user=None, client_id=None)
    for_app = Entity.of(user=None, client_id="app")
    entries = {
        for_app: {"consumer_byte_rate": 1.0e6},
        both: {"request_percentage": 25.0},
        # A client-id default is not a default *user* quota: not judged here.
        Entity.of(client_id=None): {"controller_mutation_rate": 5.0},
    }
    sources = {for_app: SourceLocation("m.yaml", 9), both: SourceLocation("m.yaml", 11)}
    found = super_user_warnings(entries, sources, [ADMIN])
    entry = exempt("admin", "consumer_byte_rate", "request_percentage")
    assert found == (  # by entity: the default client id first
        warning_for(
            "user=<default>, client-id=<default>",
            "User:admin",
            "request_percentage",
            entry,
            "m.yaml:11",
        ),
        warning_for(
            'user=<default>, client-id="app"',
            "User:admin",
            "consumer_byte_rate",
            entry,
            "m.yaml:9",
        ),
    )


def test_a_live_default_no_manifest_declares_is_named_as_such() -> None:
    entries = {USER_DEFAULT: {"producer_byte_rate": 1048576.0}}
    (found,) = super_user_warnings(entries, {}, [ADMIN])
    assert found.startswith(
        "the live user=<default> (no manifest declares it) would throttle super user "
        "User:admin (--super-user) for producer_byte_rate:"
    )


def test_other_principal_types_and_configurations_without_defaults_give_nothing() -> None:
    entries = {USER_DEFAULT: {"producer_byte_rate": 1048576.0}}
    group = SuperUser("Group:ops", "--super-user")
    assert super_user_warnings(entries, {USER_DEFAULT: SOURCE}, [group]) == ()
    named = {Entity.of(user="alice"): {"producer_byte_rate": 1048576.0}}
    assert super_user_warnings(named, {}, [ADMIN]) == ()


def test_an_exempt_entry_outside_the_scope_says_it_needs_a_scope_rule() -> None:
    entries = {USER_DEFAULT: {"producer_byte_rate": 1048576.0}}
    (found,) = super_user_warnings(
        entries, {USER_DEFAULT: SOURCE}, [ADMIN], in_scope=lambda e: e == USER_DEFAULT
    )
    assert (
        f'{exempt("admin", "producer_byte_rate")} and a spec.scope rule that owns user "admin" '
        "(Long.MAX_VALUE" in found
    )


# ------------------------------------------------------------------ the docs


def test_the_docs_validate_example_runs_as_shown(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "team.yaml").write_text(file_block(PAGE, "team.yaml"), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    command = fenced_blocks(PAGE, "bash")[0]
    assert command == "quotaform validate team.yaml\n"
    result = runner.invoke(app, shlex.split(command)[1:])
    assert result.exit_code == 0, result.output
    assert result.stderr + result.stdout == fenced_blocks(PAGE, "text")[0]


def test_the_docs_profile_is_a_valid_profile(tmp_path: Path) -> None:
    path = tmp_path / "quotaform.clusters.yaml"
    path.write_text(file_block(PAGE, "prod/quotaform.clusters.yaml"), encoding="utf-8")
    profile = load_cluster_profiles(path).get("prod")
    assert profile.super_users == ("User:admin",)
    assert profile.super_users_source == f"{path}:6"


def test_closest_name_hints_stop_at_the_comparison_budget(tmp_path: Path) -> None:
    lines = [SCRAM.split("  quotas:\n")[0] + "  quotas:"]
    for n in range(3):
        lines += [f"    - entity: {{user: alcie{n}}}", "      values: {producer_byte_rate: 1MiB}"]
    path = write(tmp_path / "m.yaml", "\n".join(lines) + "\n")
    scram = [f"alice{n}" for n in range(HINT_BUDGET // 2)]
    found = unknown_scram_users(declared(path), scram)
    assert ["did you mean" in w for w in found] == [True, True, False]


# ------------------------------------------------------------------ what plan says, stubbed


def run_checks(
    monkeypatch: pytest.MonkeyPatch,
    brokers: BrokerSuperUsers | BrokerError,
    given: list[SuperUser],
) -> tuple[tuple[str, ...], list[str]]:
    """:func:`principal_warnings` for a default user quota, with the cluster
    reads stubbed (the broker's side: tests/integration/test_sasl_e2e.py)."""

    def read(client: object, configs: object = None) -> BrokerSuperUsers:
        if isinstance(brokers, BrokerError):
            raise brokers
        return brokers

    monkeypatch.setattr(app_principals, "read_super_users", read)
    monkeypatch.setattr(app_principals, "read_scram_users", lambda c: ScramUsers(("admin",)))
    desired = desired_state({USER_DEFAULT: {"producer_byte_rate": 1048576.0}})
    plan = plan_of(desired, {})
    notes: list[str] = []
    found = app_principals.principal_warnings(
        desired, plan, cast(Any, None), super_users=given, view=View(note=notes.append)
    )
    return found, notes


def test_super_users_a_broker_reveals_are_judged_too(monkeypatch: pytest.MonkeyPatch) -> None:
    revealed = BrokerSuperUsers(principals={"User:admin": ("1", "2"), "User:ops": ("2",)})
    found, notes = run_checks(monkeypatch, revealed, [ADMIN])
    assert notes == []
    assert [w.split(" (", 1)[1].split(")")[0] for w in found] == [
        "--super-user",  # given first: it keeps its origin
        "super.users of broker 2",
    ]


def test_what_cannot_be_checked_is_noted(monkeypatch: pytest.MonkeyPatch) -> None:
    refused = BrokerSuperUsers(errors={"1": "ClusterAuthorizationFailedError: no"})
    found, notes = run_checks(monkeypatch, refused, [])
    assert (found, notes) == (
        (),
        [
            "default user quotas not checked against super users: super.users could not be "
            "read (broker 1: ClusterAuthorizationFailedError: no); name them with superUsers "
            "in the cluster profile (quotaform.clusters.yaml) or --super-user User:NAME"
        ],
    )
    failed = BrokerError(None, "KafkaConnectionError", "gone", api="DescribeCluster")
    found, notes = run_checks(monkeypatch, failed, [])
    assert found == () and notes == [
        "default user quotas not checked against super users: DescribeCluster failed with "
        "KafkaConnectionError: gone; name them with superUsers in the cluster profile "
        "(quotaform.clusters.yaml) or --super-user User:NAME"
    ]
    group = SuperUser("Group:ops", "--super-user")
    found, notes = run_checks(monkeypatch, BrokerSuperUsers(hidden=("1",)), [group])
    assert found == () and notes == [
        "super user Group:ops (--super-user) is not a User principal, the only type Kafka's "
        "default principal builder makes: not checked"
    ]
