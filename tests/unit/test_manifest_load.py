"""quotaform.manifest.load_manifests: files -> DesiredState, or every problem at once."""

from __future__ import annotations

import dataclasses
import textwrap
from pathlib import Path

import pytest

from quotaform.errors import QuotaformError
from quotaform.kafka.entity import Entity
from quotaform.manifest import ManifestError, ManifestProblem, load_manifests, manifest_clusters
from quotaform.plan.state import ChangeBudget, DesiredState, Scope, ScopeRule, SourceLocation

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
FIXTURES = Path(__file__).parent / "fixtures" / "manifests"
GOOD = FIXTURES / "good" / "set"
BAD = FIXTURES / "bad"

HEADER = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  cluster: c
"""


def write(directory: Path, name: str, text: str) -> Path:
    path = directory / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def problems_of(*paths: Path | str) -> list[str]:
    with pytest.raises(ManifestError) as caught:
        load_manifests(list(paths))
    return [str(p) for p in caught.value.problems]


# ------------------------------------------------------------------ good input


def test_examples_load() -> None:
    state = load_manifests([EXAMPLES])
    assert state.cluster == "sandbox"
    assert state.cluster_id is None
    assert state.allow_deletes is False
    assert state.warnings == ()
    assert state.scope.shapes == (("user",), ("client-id",), ("user", "client-id"), ("ip",))
    assert list(state.entities) == sorted(state.entities, key=Entity.sort_key)

    api = state.entities[Entity.of(user="svc-payments-api", client_id="payments-api")]
    assert dict(api.quotas) == {"producer_byte_rate": 10 * 1024**2}
    assert api.prevent_destroy is True
    assert api.source == SourceLocation(str(EXAMPLES / "payments.yaml"), 18)

    assert dict(state.entities[Entity.of(user=None)].quotas) == {
        "consumer_byte_rate": 2 * 1024**2,
        "producer_byte_rate": 1024**2,
    }
    assert state.entities[Entity.of(ip="192.0.2.10")].quotas["connection_creation_rate"] == 100
    indexer = state.entities[Entity.of(user="svc-search-indexer")]
    assert indexer.quotas["consumer_byte_rate"] == 1_500_000
    shapes = {e.shape for e in state.entities}
    assert {
        (("user", True),),
        (("client-id", True),),
        (("user", True), ("client-id", True)),
        (("ip", True),),
        (("user", False), ("client-id", True)),
        (("user", True), ("client-id", False)),
    } <= shapes
    for entity in state.entities:
        assert state.scope.contains(entity)


def test_examples_load_file_by_file_in_any_order() -> None:
    files = sorted(EXAMPLES.glob("*.yaml"))
    assert len(files) >= 4
    forward = load_manifests(files)
    backward = load_manifests(list(reversed(files)))
    assert list(forward.entities) == list(backward.entities)
    assert forward.entities.keys() == load_manifests([str(EXAMPLES)]).entities.keys()


def test_good_fixture_directory() -> None:
    state = load_manifests([GOOD])
    base = str(GOOD / "00-base.yaml")
    assert state.cluster == "fixture"
    assert state.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
    assert state.allow_deletes is True  # set by one document, omitted by the others
    assert state.scope == Scope(
        (
            ScopeRule(("user",), (("user", ("<", "svc-")),), True),
            ScopeRule(("user", "client-id"), (("user", ("svc-",)),), False),
            ScopeRule(("ip",), (), True),
        )
    )
    # nested/more.yml is found, .hidden.yaml and notes.txt are not
    assert [str(e) for e in state.entities] == [
        "user=<default>",
        'user="<default>"',
        'user="svc-orders"',
        'user="svc-orders", client-id="orders api ü"',
        'ip="198.51.100.7"',
        'ip="2001:db8::1"',
    ]
    orders = state.entities[Entity.of(user="svc-orders")]
    assert dict(orders.quotas) == {
        "consumer_byte_rate": 1048576.0,
        "producer_byte_rate": 10485760.0,
    }
    assert orders.source == SourceLocation(str(GOOD / "nested" / "more.yml"), 9)
    client = state.entities[Entity.of(user="svc-orders", client_id="orders api ü")]
    assert client.prevent_destroy is True
    assert client.source == SourceLocation(base, 31)
    assert state.warnings == (
        f'{base}:18: spec.quotas[1].entity.user: "<default>" is an ordinary user name to '
        "Kafka, not the default user; write {default: true} for the default user",
        f'{base}:34: spec.quotas[1].entity.ip: ip "2001:DB8:0:0:0:0:0:1" is used as '
        '"2001:db8::1", its canonical spelling: Kafka stores two spellings of one address '
        "as separate entities that enforce as one",
    )


def test_state_is_immutable() -> None:
    state = load_manifests([GOOD])
    with pytest.raises(TypeError):
        state.entities[Entity.of(user="x")] = next(iter(state.entities.values()))  # type: ignore[index]
    desired = state.entities[Entity.of(user=None)]
    with pytest.raises(TypeError):
        desired.quotas["producer_byte_rate"] = 1.0  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        state.cluster = "other"  # type: ignore[misc]


def test_ipv4_mapped_ipv6_becomes_ipv4(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + """\
spec:
  scope: [{shape: ip}]
  quotas:
    - entity: {ip: "::ffff:192.0.2.1"}
      values: {connection_creation_rate: 5}
""",
    )
    state = load_manifests([path])
    assert list(state.entities) == [Entity.of(ip="192.0.2.1")]
    assert len(state.warnings) == 1
    assert 'ip "::ffff:192.0.2.1" is used as "192.0.2.1"' in state.warnings[0]


def test_names_are_verbatim(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + """\
spec:
  scope: [{shape: user}, {shape: client-id}]
  quotas:
    - entity: {user: " spaced user "}
      values: {producer_byte_rate: 1MiB}
    - entity: {client-id: "50% ünïcode"}
      values: {producer_byte_rate: 1MiB}
    - entity: {user: "123"}
      values: {producer_byte_rate: 1MiB}
""",
    )
    state = load_manifests([path])
    assert set(state.entities) == {
        Entity.of(user=" spaced user "),
        Entity.of(client_id="50% ünïcode"),
        Entity.of(user="123"),
    }


# ------------------------------------------------------------------ problems


def test_value_and_entity_problems_have_file_line_and_field() -> None:
    path = str(BAD / "values.yaml")
    assert problems_of(BAD / "values.yaml") == [
        f'{path}:12: spec.quotas[0].values.producer_byte_rate: "10MiBs" is not a byte rate '
        "(examples: 1048576, 512KiB, 10MiB, 1.5MB)",
        f'{path}:13: spec.quotas[0].values.consumer_byte_rate: "1.0001KB" is 1000.1 bytes/s: '
        "not a whole number of bytes/s",
        f"{path}:14: spec.quotas[0].values.request_percentage: true is a boolean, not a number",
        f"{path}:16: spec.quotas[1].values.controller_mutation_rate: 0 must be greater than 0",
        f"{path}:16: spec.quotas[1].values.producer_rate: unknown quota key 'producer_rate': "
        'did you mean producer_byte_rate? Kafka rejects it ("Invalid configuration key '
        'producer_rate"); known keys: producer_byte_rate, consumer_byte_rate, '
        "request_percentage, controller_mutation_rate, connection_creation_rate",
        f"{path}:18: spec.quotas[2].values.connection_creation_rate: 2.5 must be a whole "
        "number of connections/s (Kafka rejects fractions)",
        f'{path}:19: spec.quotas[3].entity.ip: "192.0.2.0/24" is a CIDR range: Kafka IP '
        "quotas apply to single addresses only (CIDR is not supported by Kafka); use "
        "{default: true} for every other address",
        f"{path}:22: spec.quotas[4].values.request_percentage: request_percentage does not "
        'apply to ip entities (Kafka: "Invalid configuration key request_percentage"); it '
        "applies to user, client-id and user+client-id entities",
        f"{path}:23: spec.quotas[5].entity.user: an empty user name is rejected by Kafka "
        '("Empty user not supported"); write {default: true} for the default user',
        f"{path}:25: spec.quotas[6].entity.user: {{default: false}} is not allowed: write a "
        "name, {default: true} for the default user, or leave user out",
        f"{path}:27: spec.quotas[7].entity: ip cannot be combined with user or client-id (KIP-612)",
        f"{path}:30: spec.quotas[8].values: values must set at least one quota key",
    ]


def test_problems_from_two_files_are_reported_together() -> None:
    a = str(BAD / "two-files" / "a.yaml")
    b = str(BAD / "two-files" / "b.yaml")
    with pytest.raises(ManifestError) as caught:
        load_manifests([BAD / "two-files"])
    error = caught.value
    assert error.problems == (
        ManifestProblem(
            a, 13, "spec.quotas[1].values.producer_byte_rate", "-1 must be greater than 0"
        ),
        ManifestProblem(
            b,
            4,
            "metadata.cluster",
            f'"other" differs from "fixture" at {a}:4: all manifests of a set '
            "must name the same cluster",
        ),
        ManifestProblem(
            b,
            5,
            "metadata.clusterId",
            f'"id-b" differs from "id-a" at {a}:5: all manifests of a set must '
            "name the same clusterId",
        ),
        ManifestProblem(
            b,
            6,
            "metadata.owner",
            "unknown field 'owner': allowed: cluster, clusters, clusterId, labels",
        ),
        ManifestProblem(
            b, 10, "spec.quotas[0].entity", f'user="svc-a" is declared twice: first at {a}:10'
        ),
        ManifestProblem(
            b,
            12,
            "spec.quotas[1].entity",
            'client-id="reports" is outside the manifests\' scope (user): add a '
            "spec.scope entry that owns it, or remove it",
        ),
    )
    assert str(error).splitlines()[0] == (
        f"{a}:13: spec.quotas[1].values.producer_byte_rate: -1 must be greater than 0"
    )
    assert len(str(error).splitlines()) == 6
    assert isinstance(error, QuotaformError)
    assert error.exit_code == 1


def test_duplicate_entity_within_one_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + """\
spec:
  scope: [{shape: user+client-id}]
  quotas:
    - entity: {user: a, client-id: {default: true}}
      values: {producer_byte_rate: 1MiB}
    - entity: {client-id: {default: true}, user: a}
      values: {consumer_byte_rate: 1MiB}
""",
    )
    assert problems_of(path) == [
        f'{path}:10: spec.quotas[1].entity: user="a", client-id=<default> is declared '
        f"twice: first at {path}:8",
    ]


def test_ipv6_spellings_of_one_address_are_duplicates() -> None:
    path = str(BAD / "ipv6-duplicate.yaml")
    assert problems_of(path) == [
        f'{path}:10: spec.quotas[1].entity: ip="::1" is declared twice: first at '
        f'{path}:8 ("0:0:0:0:0:0:0:1" is the same address)',
    ]


@pytest.mark.parametrize(
    ("ip", "message"),
    [
        (
            "192.0.2.0/24",
            '"192.0.2.0/24" is a CIDR range: Kafka IP quotas apply to single '
            "addresses only (CIDR is not supported by Kafka); use {default: true} for every "
            "other address",
        ),
        (
            "2001:db8::/64",
            '"2001:db8::/64" is a CIDR range: Kafka IP quotas apply to single '
            "addresses only (CIDR is not supported by Kafka); use {default: true} for every "
            "other address",
        ),
        (
            "broker.example.com",
            '"broker.example.com" is not an IPv4 or IPv6 address (host '
            "names are not supported: the controller would resolve them by DNS)",
        ),
        (
            "192.0.2.256",
            '"192.0.2.256" is not an IPv4 or IPv6 address (host names are not '
            "supported: the controller would resolve them by DNS)",
        ),
    ],
)
def test_bad_ip_names(tmp_path: Path, ip: str, message: str) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + f"""\
spec:
  scope: [{{shape: ip}}]
  quotas:
    - entity:
        ip: "{ip}"
      values: {{connection_creation_rate: 5}}
""",
    )
    assert problems_of(path) == [f"{path}:9: spec.quotas[0].entity.ip: {message}"]


def test_unknown_fields_are_reported_with_their_line(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  cluster: c
  lables: {team: x}
spec:
  scope:
    - shape: user
      includeDefault: false
  quotas:
    - entity: {user: a, group: g}
      values: {producer_byte_rate: 1MiB}
      prevent_destroy: true
status: {}
""",
    )
    assert problems_of(path) == [
        f"{path}:5: metadata.lables: unknown field 'lables': did you mean labels? allowed: "
        "cluster, clusters, clusterId, labels",
        f"{path}:9: spec.scope[0].includeDefault: unknown field 'includeDefault': did you "
        "mean includeDefaults? allowed: shape, prefixes, includeDefaults",
        f"{path}:11: spec.quotas[0].entity.group: unknown field 'group': allowed: user, "
        "client-id, ip",
        f"{path}:13: spec.quotas[0].prevent_destroy: unknown field 'prevent_destroy': did "
        "you mean preventDestroy? allowed: entity, values, preventDestroy",
        f"{path}:14: status: unknown field 'status': allowed: apiVersion, kind, metadata, spec",
    ]


def test_missing_and_mistyped_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        """\
apiVersion: quotaform.io/v2
metadata:
  labels: {team: 7}
spec:
  scope: [{shape: users}]
  allowDeletes: "yes"
  quotas:
    - entity: {user: null, client-id: 42}
      values: {producer_byte_rate: null}
      preventDestroy: 1
    - values: {producer_byte_rate: 1}
""",
    )
    assert problems_of(path) == [
        f"{path}:1: apiVersion: expected 'quotaform.io/v1', got \"quotaform.io/v2\"",
        f"{path}:1: kind: required field is missing",
        f"{path}:2: metadata.cluster: required field is missing",
        f"{path}:3: metadata.labels.team: expected a string, got 7",
        f"{path}:5: spec.scope[0].shape: expected 'user', 'client-id', 'user+client-id' or "
        "'ip', got \"users\"",
        f'{path}:6: spec.allowDeletes: expected true or false, got "yes"',
        f"{path}:8: spec.quotas[0].entity.client-id: expected a client-id name (a non-empty "
        "string) or {default: true}, got 42",
        f"{path}:8: spec.quotas[0].entity.user: user is null: write a name, {{default: true}} "
        "for the default user, or leave user out",
        f"{path}:9: spec.quotas[0].values.producer_byte_rate: producer_byte_rate is null: give "
        "a value, or delete the line to leave the key unmanaged",
        f"{path}:10: spec.quotas[0].preventDestroy: expected true or false, got 1",
        f"{path}:11: spec.quotas[1].entity: required field is missing",
    ]


def test_yaml_syntax_error_has_its_line() -> None:
    path = str(BAD / "syntax.yaml")
    assert problems_of(path) == [
        f"{path}:8: (yaml): invalid YAML: expected ',' or '}}', but got ':' (while parsing a "
        "flow mapping at line 7)",
    ]


def test_duplicate_yaml_key_is_a_problem() -> None:
    path = str(BAD / "duplicate-key.yaml")
    assert problems_of(path) == [
        f'{path}:11: (yaml): invalid YAML: found duplicate key "producer_byte_rate" with '
        'value "2MiB" (original value: "1MiB") (while constructing a mapping at line 10)',
    ]


def test_yaml_error_in_one_file_does_not_hide_the_others(tmp_path: Path) -> None:
    broken = write(tmp_path, "a.yaml", "scope: [\n")
    other = write(
        tmp_path,
        "b.yaml",
        HEADER
        + """\
spec:
  quotas:
    - entity: {user: a}
      values: {producer_byte_rate: 1MiBps}
""",
    )
    # The broken file might have declared the scope: no "no scope" or
    # "outside the scope" guesses, only what is known to be wrong.
    assert problems_of(tmp_path) == [
        f"{broken}:2: (yaml): invalid YAML: expected the node content, but found "
        "'<stream end>' (while parsing a flow node at line 2)",
        f'{other}:8: spec.quotas[0].values.producer_byte_rate: "1MiBps" is not a byte rate '
        "(examples: 1048576, 512KiB, 10MiB, 1.5MB)",
    ]


def test_no_scope_anywhere_is_a_problem() -> None:
    path = str(BAD / "no-scope.yaml")
    assert problems_of(path) == [
        f"{path}:5: spec.scope: no manifest declares spec.scope: the set must say which "
        "entities it owns, e.g. scope: [{shape: user}, {shape: client-id}, "
        "{shape: user+client-id}, {shape: ip}]",
    ]


def test_scope_declared_in_another_file_is_enough(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", HEADER + "spec:\n  scope: [{shape: user}]\n")
    write(
        tmp_path,
        "b.yaml",
        HEADER
        + """\
spec:
  quotas:
    - entity: {user: a}
      values: {producer_byte_rate: 1MiB}
""",
    )
    state = load_manifests([tmp_path])
    assert list(state.entities) == [Entity.of(user="a")]


def test_entities_outside_the_scope() -> None:
    path = str(BAD / "outside-scope.yaml")
    scope = "user [user names starting with 'svc-'; no defaults]"
    assert problems_of(path) == [
        f'{path}:13: spec.quotas[1].entity: user="alice" is outside the manifests\' scope '
        f"({scope}): add a spec.scope entry that owns it, or remove it",
        f"{path}:15: spec.quotas[2].entity: user=<default> is outside the manifests' scope "
        f"({scope}): add a spec.scope entry that owns it, or remove it",
        f'{path}:17: spec.quotas[3].entity: client-id="reports" is outside the manifests\' '
        f"scope ({scope}): add a spec.scope entry that owns it, or remove it",
    ]


def test_scope_prefix_types_must_be_in_the_shape(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + """\
spec:
  scope:
    - shape: user
      prefixes: {client-id: [x]}
    - shape: ip
      prefixes: {ip: []}
""",
    )
    assert problems_of(path) == [
        f"{path}:7: spec.scope[0]: prefixes.client-id: client-id is not part of shape user",
        f"{path}:10: spec.scope[1].prefixes.ip: must not be empty",
    ]


def test_cluster_mismatch() -> None:
    a = str(BAD / "two-files" / "a.yaml")
    b = str(BAD / "two-files" / "b.yaml")
    problems = problems_of(a, b)
    assert (
        f'{b}:4: metadata.cluster: "other" differs from "fixture" at {a}:4: all manifests of '
        "a set must name the same cluster"
    ) in problems


def test_allow_deletes_must_agree(tmp_path: Path) -> None:
    a = write(tmp_path, "a.yaml", HEADER + "spec:\n  scope: [{shape: ip}]\n  allowDeletes: true\n")
    b = write(tmp_path, "b.yaml", HEADER + "spec:\n  allowDeletes: false\n")
    write(tmp_path, "c.yaml", HEADER + "spec: {}\n")
    assert problems_of(tmp_path) == [
        f"{b}:6: spec.allowDeletes: false differs from true at {a}:7: all manifests of a set "
        "must agree on allowDeletes",
    ]


def test_key_must_fit_the_entity_type(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + """\
spec:
  scope: [{shape: user}]
  quotas:
    - entity: {user: a}
      values:
        producer_byte_rate: 1MiB
        connection_creation_rate: 5
""",
    )
    assert problems_of(path) == [
        f"{path}:11: spec.quotas[0].values.connection_creation_rate: connection_creation_rate "
        'does not apply to user entities (Kafka: "Invalid configuration key '
        'connection_creation_rate"); it applies to ip entities',
    ]


def test_documents_that_are_not_mappings(tmp_path: Path) -> None:
    path = write(tmp_path, "m.yaml", "- a\n- b\n---\njust text\n")
    assert problems_of(path) == [
        f"{path}: (document): a manifest document must be a mapping with apiVersion, kind, "
        'metadata and spec; got "just text"',
        f"{path}:1: (document): a manifest document must be a mapping with apiVersion, kind, "
        "metadata and spec; got a list",
    ]


def test_missing_paths_and_empty_input(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    empty_dir = tmp_path / "empty"
    empty_dir.mkdir()
    blank = write(tmp_path, "blank.yaml", "# nothing here\n---\n")
    assert problems_of(missing, empty_dir) == [
        f"{empty_dir}: (file): no *.yaml or *.yml files found",
        f"{missing}: (file): no such file or directory",
    ]
    assert problems_of(blank) == [f"{blank}: (file): no manifest documents found"]


def test_same_file_given_twice_is_read_once() -> None:
    state = load_manifests([GOOD, GOOD / "00-base.yaml"])
    assert len(state.entities) == 6


def test_problem_formatting() -> None:
    problem = ManifestProblem("examples/teams.yaml", 14, "spec.quotas[2].values.x", "bad")
    assert str(problem) == "examples/teams.yaml:14: spec.quotas[2].values.x: bad"
    assert str(ManifestProblem("a.yaml", None, "(file)", "gone")) == "a.yaml: (file): gone"
    error = ManifestError([problem, ManifestProblem("a.yaml", 3, "f", "m")])
    assert str(error) == "a.yaml:3: f: m\nexamples/teams.yaml:14: spec.quotas[2].values.x: bad"


# ------------------------------------------------------------------ scope rules


def test_scope_rule_matching() -> None:
    rule = ScopeRule.build(("client-id", "user"), {"user": ["svc-", "app-"]})
    assert rule.shape == ("user", "client-id")
    assert rule.prefixes == (("user", ("app-", "svc-")),)
    assert rule.matches(Entity.of(user="svc-a", client_id="x"))
    assert rule.matches(Entity.of(user="app-b", client_id=None))
    assert rule.matches(Entity.of(user=None, client_id="x"))
    assert not rule.matches(Entity.of(user="bob", client_id="x"))
    assert not rule.matches(Entity.of(user="svc-a"))

    strict = ScopeRule.build(("user",), include_defaults=False)
    assert strict.matches(Entity.of(user="anyone"))
    assert not strict.matches(Entity.of(user=None))

    with pytest.raises(ValueError, match="not part of shape"):
        ScopeRule.build(("user",), {"ip": ["192."]})
    with pytest.raises(ValueError, match="unsupported shape"):
        ScopeRule.build(("user", "ip"))


def test_scope_union_dedupes_and_orders() -> None:
    ip = ScopeRule.build(("ip",))
    user = ScopeRule.build(("user",))
    scope = Scope.build([ip, user, ip])
    assert scope.rules == (user, ip)
    assert scope.contains(Entity.of(ip="192.0.2.1"))
    assert not scope.contains(Entity.of(client_id="x"))
    assert str(scope) == "user, ip"


def test_desired_state_build_rejects_duplicates() -> None:
    state = load_manifests([GOOD])
    entity = next(iter(state.entities.values()))
    with pytest.raises(ValueError, match="given twice"):
        DesiredState.build(
            cluster="c",
            cluster_id=None,
            scope=state.scope,
            entities=[entity, entity],
        )


def test_yaml_1_2_that_libyaml_refuses_still_loads(tmp_path: Path) -> None:
    # A plain IPv6 address inside a flow mapping is valid YAML 1.2; libyaml
    # (YAML 1.1) refuses it, so the loader must fall back to ruamel's parser.
    path = tmp_path / "v6.yaml"
    path.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\n"
        "spec:\n  scope: [{shape: ip}]\n  quotas:\n"
        "    - entity: {ip: 2001:db8::10}\n      values: {connection_creation_rate: 5}\n",
        encoding="utf-8",
    )
    state = load_manifests([path])
    entity = Entity.of(ip="2001:db8::10")
    assert dict(state.entities[entity].quotas) == {"connection_creation_rate": 5.0}
    assert state.entities[entity].source.line == 7


# ------------------------------------------------------------------ protection and budget


def test_protect_and_prevent_destroy(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + """\
spec:
  scope: [{shape: user}, {shape: ip}]
  protect:
    - entity: {user: {default: true}}
    - entity: {user: svc-gone}
    - entity: {ip: "0:0:0:0:0:0:0:1"}
    - entity: {user: svc-a}
  quotas:
    - entity: {user: svc-a}
      values: {producer_byte_rate: 1MiB}
      preventDestroy: true
    - entity: {user: svc-b}
      values: {producer_byte_rate: 1MiB}
      preventDestroy: true
    - entity: {user: svc-c}
      values: {producer_byte_rate: 1MiB}
""",
    )
    state = load_manifests([path])
    at = str(path)
    assert dict(state.protected) == {
        Entity.of(user=None): SourceLocation(at, 8),
        Entity.of(user="svc-a"): SourceLocation(at, 11),  # spec.protect wins
        Entity.of(user="svc-b"): SourceLocation(at, 16),  # preventDestroy's entry
        Entity.of(user="svc-gone"): SourceLocation(at, 9),
        Entity.of(ip="::1"): SourceLocation(at, 10),
    }
    assert list(state.protected) == sorted(state.protected, key=Entity.sort_key)
    assert state.entities[Entity.of(user="svc-b")].prevent_destroy is True
    assert state.entities[Entity.of(user="svc-c")].prevent_destroy is False
    assert state.warnings == (
        f'{at}:10: spec.protect[2].entity.ip: ip "0:0:0:0:0:0:0:1" is used as "::1", its '
        "canonical spelling: Kafka stores two spellings of one address as separate entities "
        "that enforce as one",
    )


def test_protect_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER
        + """\
spec:
  scope: [{shape: user, prefixes: {user: [svc-]}}]
  protect:
    - entity: {user: alice}
    - entity: {user: svc-a, ip: 192.0.2.1}
    - {user: svc-b}
""",
    )
    empty = write(tmp_path, "n.yaml", HEADER + "spec:\n  protect: null\n")
    scope = "user [user names starting with 'svc-']"
    assert problems_of(path, empty) == [
        f'{path}:8: spec.protect[0].entity: user="alice" is protected but outside the '
        f"manifests' scope ({scope}): add a spec.scope entry that owns it, or remove it",
        f"{path}:9: spec.protect[1].entity: ip cannot be combined with user or client-id (KIP-612)",
        f"{path}:10: spec.protect[2].entity: required field is missing",
        f"{path}:10: spec.protect[2].user: unknown field 'user': allowed: entity",
        f"{empty}:6: spec.protect: protect is null: give a value, or leave protect out",
    ]


def test_change_budget(tmp_path: Path) -> None:
    write(
        tmp_path,
        "a.yaml",
        HEADER
        + "spec:\n  scope: [{shape: user}]\n  changeBudget: {maxDeletes: 3, maxRelaxFactor: 4}\n",
    )
    write(tmp_path, "b.yaml", HEADER + "spec:\n  changeBudget:\n    maxDeleteFraction: 0.25\n")
    write(tmp_path, "c.yaml", HEADER + "spec:\n  changeBudget: {maxDeletes: 3}\n")
    state = load_manifests([tmp_path])
    assert state.budget == ChangeBudget(
        max_deletes=3, max_delete_fraction=0.25, max_relax_factor=4.0, allow_deletes=False
    )
    assert load_manifests([tmp_path / "b.yaml", tmp_path / "a.yaml"]).budget == state.budget
    # Nothing declared: nothing set but allowDeletes' default.
    assert load_manifests([EXAMPLES]).budget == ChangeBudget(allow_deletes=False)


def test_change_budget_problems(tmp_path: Path) -> None:
    a = write(
        tmp_path,
        "a.yaml",
        HEADER + "spec:\n  scope: [{shape: user}]\n  changeBudget: {maxDeletes: 3}\n",
    )
    b = write(
        tmp_path,
        "b.yaml",
        HEADER
        + """\
spec:
  changeBudget:
    maxDeletes: 4
    maxDeleteFraction: 1.5
    maxRelaxFactor: 0.5
""",
    )
    c = write(tmp_path, "c.yaml", HEADER + "spec:\n  changeBudget: {}\n")
    d = write(
        tmp_path, "d.yaml", HEADER + "spec:\n  changeBudget: {maxDeletes: true, maxDelete: 1}\n"
    )
    assert problems_of(tmp_path) == [
        f"{b}:7: spec.changeBudget.maxDeletes: 4 differs from 3 at {a}:7: all manifests of "
        "a set must agree on changeBudget.maxDeletes",
        f"{b}:8: spec.changeBudget.maxDeleteFraction: Input should be less than or equal to 1 "
        "(got 1.5)",
        f"{b}:9: spec.changeBudget.maxRelaxFactor: Input should be greater than or equal to 1 "
        "(got 0.5)",
        f"{c}:6: spec.changeBudget: changeBudget must set at least one of maxDeletes, "
        "maxDeleteFraction, maxRelaxFactor",
        f"{d}:6: spec.changeBudget.maxDelete: unknown field 'maxDelete': did you mean "
        "maxDeletes? allowed: maxDeletes, maxDeleteFraction, maxRelaxFactor",
        f"{d}:6: spec.changeBudget.maxDeletes: Input should be a valid integer (got true)",
    ]


# ------------------------------------------------------------------ several clusters

MULTI = FIXTURES / "multi-cluster"


def test_manifest_clusters() -> None:
    assert manifest_clusters([MULTI]) == ["prod-eu", "prod-us"]
    assert manifest_clusters([EXAMPLES]) == ["sandbox"]
    with pytest.raises(ManifestError):
        manifest_clusters([BAD / "syntax.yaml"])


def test_cluster_selection_and_overlays() -> None:
    shared, eu = str(MULTI / "shared.yaml"), str(MULTI / "prod-eu.yaml")
    state = load_manifests([MULTI], cluster="prod-eu")
    assert state.cluster == "prod-eu"
    assert state.cluster_id == "EUclusterIdAAAAAAAAAAA"
    assert state.allow_deletes is False  # prod-us.yaml's true is not part of it
    assert state.budget == ChangeBudget(
        max_deletes=5, max_delete_fraction=0.1, max_relax_factor=4.0, allow_deletes=False
    )
    assert [str(e) for e in state.entities] == [
        "user=<default>",
        'user="svc-eu-billing"',
        'user="svc-orders"',
        'user="svc-payments", client-id=<default>',
        "ip=<default>",
    ]
    orders = state.entities[Entity.of(user="svc-orders")]
    # prod-eu overrides producer_byte_rate; consumer_byte_rate stays shared.
    assert dict(orders.quotas) == {
        "consumer_byte_rate": 10 * 1024**2,
        "producer_byte_rate": 20 * 1024**2,
    }
    assert list(orders.quotas) == sorted(orders.quotas)
    assert orders.prevent_destroy is True  # from shared.yaml
    assert orders.source == SourceLocation(eu, 11)
    assert orders.shared_source == SourceLocation(shared, 24)
    assert state.entities[Entity.of(user=None)].shared_source is None
    assert dict(state.protected) == {
        Entity.of(user=None): SourceLocation(shared, 19),
        Entity.of(user="svc-orders"): SourceLocation(shared, 24),
        Entity.of(ip=None): SourceLocation(shared, 20),
    }

    us = load_manifests([MULTI], cluster="prod-us")
    assert us.cluster == "prod-us"
    assert us.cluster_id is None
    assert us.allow_deletes is True
    assert us.budget.max_relax_factor is None
    assert dict(us.entities[Entity.of(user=None)].quotas) == {
        "consumer_byte_rate": 2 * 1024**2,
        "producer_byte_rate": 1024**2,
        "request_percentage": 50.0,
    }
    assert dict(us.entities[Entity.of(user="svc-orders")].quotas) == {
        "consumer_byte_rate": 10 * 1024**2,
        "producer_byte_rate": 10 * 1024**2,
    }
    assert Entity.of(user="svc-eu-billing") not in us.entities
    assert Entity.of(ip="198.51.100.7") in us.entities


def test_several_clusters_need_a_choice() -> None:
    payments = str(MULTI / "payments.yaml")
    assert problems_of(MULTI) == [
        f"{payments}:5: metadata.clusters: the manifests name 2 clusters (prod-eu, prod-us): "
        "choose one with --cluster NAME (connecting with its profile from "
        "quotaform.clusters.yaml), or plan them all with --all-clusters",
    ]
    with pytest.raises(ManifestError) as caught:
        load_manifests([MULTI], cluster="prod-asia")
    assert [str(p) for p in caught.value.problems] == [
        f'{MULTI}: metadata.cluster: no manifest names cluster "prod-asia" (the set names '
        'prod-eu, prod-us); "*" documents apply only to clusters some document names',
    ]


def test_single_cluster_sets_load_with_or_without_a_name(tmp_path: Path) -> None:
    assert load_manifests([EXAMPLES], cluster="sandbox") == load_manifests([EXAMPLES])
    with pytest.raises(ManifestError, match='no manifest names cluster "prod"'):
        load_manifests([EXAMPLES], cluster="prod")
    # A "*" document next to one named cluster: no choice needed, overlays apply.
    write(
        tmp_path,
        "own.yaml",
        HEADER + "spec:\n  quotas:\n"
        "    - entity: {user: a}\n      values: {consumer_byte_rate: 2MiB}\n",
    )
    write(
        tmp_path,
        "shared.yaml",
        HEADER.replace("cluster: c", 'clusters: ["*"]')
        + "spec:\n  scope: [{shape: user}]\n  quotas:\n"
        "    - entity: {user: a}\n      values: {producer_byte_rate: 1MiB}\n",
    )
    state = load_manifests([tmp_path])
    assert state.cluster == "c"
    assert dict(state.entities[Entity.of(user="a")].quotas) == {
        "consumer_byte_rate": 2 * 1024**2,
        "producer_byte_rate": 1024**2,
    }


def test_only_shared_documents(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        HEADER.replace("cluster: c", 'clusters: ["*"]') + "spec:\n  scope: [{shape: user}]\n",
    )
    assert problems_of(path) == [
        f'{path}:4: metadata.clusters: no manifest names a cluster: "*" stands for every '
        "cluster the set names; name one with metadata.cluster or metadata.clusters",
    ]


def test_duplicates_within_one_level_are_errors(tmp_path: Path) -> None:
    shared = HEADER.replace("cluster: c", "clusters: [c, d]")
    entry = "    - entity: {user: a}\n      values: {producer_byte_rate: 1MiB}\n"
    s1 = write(tmp_path, "s1.yaml", shared + "spec:\n  scope: [{shape: user}]\n  quotas:\n" + entry)
    s2 = write(
        tmp_path,
        "s2.yaml",
        HEADER.replace("cluster: c", 'clusters: ["*"]') + "spec:\n  quotas:\n" + entry,
    )
    o1 = write(tmp_path, "o1.yaml", HEADER + "spec:\n  quotas:\n" + entry)
    o2 = write(tmp_path, "o2.yaml", HEADER + "spec:\n  quotas:\n" + entry)
    with pytest.raises(ManifestError) as caught:
        load_manifests([o1, o2, s1, s2], cluster="c")
    assert [str(p) for p in caught.value.problems] == [
        f'{o2}:7: spec.quotas[0].entity: user="a" is declared twice: first at {o1}:7',
        f'{s2}:7: spec.quotas[0].entity: user="a" is declared twice: first at {s1}:8',
    ]
    # For cluster d only the shared documents count.
    with pytest.raises(ManifestError) as caught:
        load_manifests([o1, o2, s1, s2], cluster="d")
    assert [str(p) for p in caught.value.problems] == [
        f'{s2}:7: spec.quotas[0].entity: user="a" is declared twice: first at {s1}:8',
    ]


def test_metadata_problems(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.yaml",
        """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  cluster: a
  clusters: [b, b]
  clusterId: x
spec:
  scope: [{shape: user}]
---
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata:
  clusters: ["*", a, ""]
spec: {}
---
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata: {clusters: [a, c], clusterId: x}
spec: {}
---
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata: {clusters: []}
spec: {}
""",
    )
    assert problems_of(path) == [
        f'{path}:5: metadata.clusters: "b" is listed twice',
        f"{path}:5: metadata.clusters: give cluster (this cluster's own document) or clusters "
        "(a document shared by several clusters), not both",
        f"{path}:6: metadata.clusterId: only allowed with cluster: a document shared by several "
        "clusters (clusters) cannot name one cluster id",
        f"{path}:13: metadata.clusters[2]: must not be empty",
        f"{path}:18: metadata.clusterId: only allowed with cluster: a document shared by "
        "several clusters (clusters) cannot name one cluster id",
        f"{path}:18: metadata.clusters: the manifests name 2 clusters (a, c): choose one with "
        "--cluster NAME (connecting with its profile from quotaform.clusters.yaml), or plan "
        "them all with --all-clusters",
        f"{path}:23: metadata.clusters: must not be empty",
    ]


def test_problems_of_other_clusters_documents_are_still_reported(tmp_path: Path) -> None:
    write(tmp_path, "a.yaml", HEADER + "spec:\n  scope: [{shape: user}]\n")
    other = write(
        tmp_path,
        "b.yaml",
        HEADER.replace("cluster: c", "cluster: d") + "spec:\n  scope: [{shape: ip}]\n  quotas:\n"
        "    - entity: {ip: 192.0.2.1}\n      values: {producer_byte_rate: 1MiB}\n",
    )
    with pytest.raises(ManifestError) as caught:
        load_manifests([tmp_path], cluster="c")
    assert [str(p) for p in caught.value.problems] == [
        f"{other}:9: spec.quotas[0].values.producer_byte_rate: producer_byte_rate does not "
        'apply to ip entities (Kafka: "Invalid configuration key producer_byte_rate"); it '
        "applies to user, client-id and user+client-id entities",
    ]


def test_settings_only_need_to_agree_within_a_cluster(tmp_path: Path) -> None:
    for name, deletes in (("c", "true"), ("d", "false")):
        write(
            tmp_path,
            f"{name}.yaml",
            HEADER.replace("cluster: c", f"cluster: {name}\n  clusterId: id-{name}")
            + f"spec:\n  scope: [{{shape: user}}]\n  allowDeletes: {deletes}\n",
        )
    assert load_manifests([tmp_path], cluster="c").allow_deletes is True
    assert load_manifests([tmp_path], cluster="d").cluster_id == "id-d"
    # Without a choice, the single-cluster rule (and its message) stands.
    assert any("must name the same cluster" in p for p in problems_of(tmp_path))


def test_documents_before_a_yaml_error_still_count(tmp_path: Path) -> None:
    # The first document is read and checked even though the second is broken:
    # its own problem (an unknown quota key) is reported beside the YAML error.
    path = tmp_path / "m.yaml"
    path.write_text(
        "apiVersion: quotaform.io/v1\nkind: ClientQuotas\nmetadata: {cluster: c}\n"
        "spec:\n  scope: [{shape: user}]\n  quotas:\n"
        "    - entity: {user: a}\n      values: {bogus_rate: 5}\n"
        "---\nkey: [unclosed\n",
        encoding="utf-8",
    )
    with pytest.raises(ManifestError) as info:
        load_manifests([path])
    fields = [p.field for p in info.value.problems]
    assert "(yaml)" in fields
    assert any("bogus_rate" in p.field or "bogus_rate" in p.message for p in info.value.problems)
