"""export / import without a broker: documents built from synthetic live
quotas, the round trip through ``load_manifests``, and comment-keeping edits.

The golden export is ``tests/unit/golden/exported.yaml`` (see ``conftest.py``).
"""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from typer.testing import CliRunner

from quotaform.app.export import export_manifest, import_entities
from quotaform.cluster.wire.types import FilterComponent
from quotaform.errors import ExportError, QuotaformError
from quotaform.export.build import (
    export_header,
    export_scope,
    manifest_document,
    parse_prefixes,
    split_exportable,
    yaml_name,
    yaml_quota_value,
)
from quotaform.export.edit import (
    ManifestFile,
    add_entities,
    entry_entity,
    manifest_yaml,
    target_document,
    update_entities,
)
from quotaform.export.files import write_new_file
from quotaform.kafka.entity import SHAPE_NAMES, Entity
from quotaform.manifest import load_manifests
from quotaform.plan.state import Scope

from .builders import Golden

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "manifests"
FIXTURES = Path(__file__).parent / "fixtures" / "export"
EXPORTED_AT = datetime(2025, 3, 1, 12, 30, tzinfo=UTC)
ALL_SHAPES = list(SHAPE_NAMES)

MiB = 1024.0**2

#: Every shape, every default shape, IPv4/IPv6, awkward names.
LIVE: dict[Entity, dict[str, float]] = {
    Entity.of(user=None): {"producer_byte_rate": 1 * MiB, "consumer_byte_rate": 2 * MiB},
    Entity.of(user="svc-orders"): {"producer_byte_rate": 10 * MiB, "request_percentage": 150.0},
    Entity.of(user="<default>"): {"consumer_byte_rate": 1536.0},
    Entity.of(user="team lead"): {"request_percentage": 12.5},
    Entity.of(user="yes"): {"producer_byte_rate": 1234567.0},
    Entity.of(client_id=None): {"controller_mutation_rate": 5.0},
    Entity.of(client_id="zähler-αβ"): {"consumer_byte_rate": 1_500_000.0},
    Entity.of(client_id="reporting|batch"): {"controller_mutation_rate": 0.5},
    Entity.of(user=None, client_id=None): {"request_percentage": 25.0},
    Entity.of(user=None, client_id="search-reporting"): {"consumer_byte_rate": 512 * 1024.0},
    Entity.of(user="svc-orders", client_id=None): {"producer_byte_rate": 1 * MiB},
    Entity.of(user="svc-orders", client_id="orders-api"): {"producer_byte_rate": 999.0},
    Entity.of(ip=None): {"connection_creation_rate": 200.0},
    Entity.of(ip="192.0.2.10"): {"connection_creation_rate": 100.0},
    Entity.of(ip="198.51.100.7"): {"connection_creation_rate": 5.0},
    Entity.of(ip="2001:db8::10"): {"connection_creation_rate": 50.0},
}


class FakeCluster:
    """Describe and cluster_id over a fixed set of live quotas."""

    def __init__(self, live: Mapping[Entity, Mapping[str, float]], cluster_id: str = "Fake-Id"):
        self.live = live
        self._cluster_id = cluster_id
        self.rpc_counts: dict[str, int] = {}

    def describe_client_quotas(
        self, components: list[FilterComponent], *, strict: bool
    ) -> dict[Entity, dict[str, float]]:
        assert strict
        self.rpc_counts["DescribeClientQuotas"] = self.rpc_counts.get("DescribeClientQuotas", 0) + 1
        types = {c.entity_type for c in components}
        return {e: dict(q) for e, q in self.live.items() if set(e.types) == types}

    def cluster_id(self) -> str:
        return self._cluster_id


def dump(document: object) -> str:
    import io

    out = io.StringIO()
    manifest_yaml().dump(document, out)
    return out.getvalue()


def declared(paths: list[Path]) -> dict[Entity, dict[str, float]]:
    return {e: dict(d.quotas) for e, d in load_manifests(paths).entities.items()}


def comment_lines(text: str) -> list[str]:
    """The comments of ``text``, in order (none of the files quote a "#")."""
    return [line[line.index("#") :] for line in text.splitlines() if "#" in line]


@pytest.fixture
def manifests(tmp_path: Path) -> Path:
    """A private copy of examples/."""
    target = tmp_path / "manifests"
    shutil.copytree(EXAMPLES, target)
    return target


# ----------------------------------------------------------------- names and values


@pytest.mark.parametrize(
    "name", ["svc-orders", "192.0.2.10", "orders_api", "a.b@example.com", "svc/x+y=z", "ANONYMOUS"]
)
def test_simple_names_are_written_plain(name: str) -> None:
    written = yaml_name(name)
    assert not isinstance(written, DoubleQuotedScalarString)
    assert written == name


@pytest.mark.parametrize(
    "name",
    [
        "<default>",
        "2001:db8::10",
        "yes",
        "on",
        "n",
        "true",
        "null",
        "~",
        "010",
        "1e3",
        "12:30",
        "1_000",
        "team lead",
        " padded ",
        "#hash",
        "a: b",
        "?q",
        "-dash",
        "zähler",
        "line\nbreak",
    ],
)
def test_names_other_yaml_readers_could_misread_are_double_quoted(name: str) -> None:
    written = yaml_name(name)
    assert isinstance(written, DoubleQuotedScalarString)
    text = dump({"user": written})
    assert text.startswith('user: "')
    assert YAML(typ="safe", pure=True).load(text) == {"user": name}
    # YAML 1.1 readers (PyYAML, yamllint) read the same string.
    old = YAML(typ="safe", pure=True)
    old.version = (1, 1)
    assert old.load(text) == {"user": name}


@pytest.mark.parametrize(
    ("key", "value", "written"),
    [
        ("producer_byte_rate", 10 * MiB, "10MiB"),
        ("consumer_byte_rate", 1_500_000.0, "1.5MB"),
        ("consumer_byte_rate", 1234567.0, 1234567),
        ("producer_byte_rate", 512.0, 512),
        ("request_percentage", 150.0, "150%"),
        ("request_percentage", 12.5, "12.5%"),
        ("controller_mutation_rate", 2.5, 2.5),
        ("controller_mutation_rate", 1e-05, 1e-05),
        ("connection_creation_rate", 200.0, 200),
    ],
)
def test_values_are_written_in_readable_units(key: str, value: float, written: object) -> None:
    got = yaml_quota_value(key, value)
    assert got == written
    assert type(got) in (type(written), DoubleQuotedScalarString)
    assert isinstance(got, DoubleQuotedScalarString) == key.startswith("request_")


def test_percentages_are_quoted_in_the_text() -> None:
    assert dump({"request_percentage": yaml_quota_value("request_percentage", 150.0)}) == (
        'request_percentage: "150%"\n'
    )


# ----------------------------------------------------------------- scope


def test_export_scope_defaults_and_prefixes() -> None:
    scope = export_scope(ALL_SHAPES, {"user": ["svc-"]})
    assert str(scope) == (
        "user [user names starting with 'svc-'], client-id, "
        "user+client-id [user names starting with 'svc-'], ip"
    )
    narrow = export_scope(["ip", "user"], include_defaults=False)
    assert [r.shape for r in narrow.rules] == [("user",), ("ip",)]
    assert not any(r.include_defaults for r in narrow.rules)


@pytest.mark.parametrize(
    ("shapes", "prefixes", "message"),
    [
        ([], None, "at least one shape"),
        (["users"], None, "unknown shape"),
        (["ip"], {"user": ["svc-"]}, "no exported shape (ip) has user names"),
    ],
)
def test_export_scope_refuses(shapes: list[str], prefixes: dict | None, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ExportError, match=message.replace("(", r"\(").replace(")", r"\)")):
        export_scope(shapes, prefixes)


def test_parse_prefixes() -> None:
    assert parse_prefixes(["user=svc-", "client-id=web", "user=app-"]) == {
        "user": ["svc-", "app-"],
        "client-id": ["web"],
    }
    for bad in ("svc-", "users=svc-", "user="):
        with pytest.raises(ExportError, match="TYPE=PREFIX"):
            parse_prefixes([bad])


# ----------------------------------------------------------------- export


def _export_text(live: Mapping[Entity, Mapping[str, float]], scope: Scope) -> str:
    kept, skipped = split_exportable(live)
    header = export_header(
        exported_at=EXPORTED_AT,
        bootstrap="127.0.0.1:9092",
        cluster_id="Fake-Id",
        scope=scope,
        count=len(kept),
        skipped=skipped,
    )
    return dump(
        manifest_document(kept, cluster="sandbox", cluster_id=None, scope=scope, header=header)
    )


def test_export_matches_the_golden_file(golden: Golden) -> None:
    golden("exported.yaml", _export_text(LIVE, export_scope(ALL_SHAPES)))


def test_exported_document_loads_back_to_the_same_entities_and_values(tmp_path: Path) -> None:
    path = tmp_path / "exported.yaml"
    path.write_text(_export_text(LIVE, export_scope(ALL_SHAPES)), encoding="utf-8")
    desired = load_manifests([path])
    assert desired.cluster == "sandbox"
    assert desired.cluster_id is None
    assert desired.scope == export_scope(ALL_SHAPES)
    assert desired.allow_deletes is False
    assert set(desired.entities) == set(LIVE)
    for entity, wanted in LIVE.items():
        got = dict(desired.entities[entity].quotas)
        assert set(got) == set(wanted), entity
        for key, value in wanted.items():
            assert got[key] == float(value), (entity, key)
    # The literal "<default>" user is an ordinary user, and the loader says so.
    assert any('"<default>" is an ordinary user name' in w for w in desired.warnings)


def test_exported_text_is_readable_and_unambiguous() -> None:
    text = _export_text(LIVE, export_scope(ALL_SHAPES))
    assert "- entity: {user: {default: true}}\n" in text
    assert "- entity: {user: {default: true}, client-id: {default: true}}\n" in text
    assert "- entity: {ip: {default: true}}\n" in text
    assert (
        '- entity: {user: "<default>"}  # "<default>" is an ordinary user name here, '
        "not the default user\n" in text
    )
    assert '{ip: "2001:db8::10"}' in text
    assert "{ip: 192.0.2.10}" in text
    assert '{user: "team lead"}' in text
    assert '{client-id: "zähler-αβ"}' in text
    assert '{user: "yes"}' in text
    assert 'values: {producer_byte_rate: 10MiB, request_percentage: "150%"}' in text
    assert "values: {consumer_byte_rate: 1.5MB}" in text
    # Sorted by Entity.sort_key: user, client-id, user+client-id, ip.
    entries = [line for line in text.splitlines() if line.lstrip().startswith("- entity:")]
    assert len(entries) == len(LIVE)
    assert entries[0].endswith("{user: {default: true}}")
    assert entries[-1].endswith('{ip: "2001:db8::10"}')


def test_header_names_time_address_scope_and_count_but_no_secrets() -> None:
    text = _export_text(LIVE, export_scope(ALL_SHAPES))
    header = text[: text.index("apiVersion")]
    assert header.splitlines() == [
        "# Exported by quotaform 0.1.0 (quotaform export) on 2025-03-01T12:30:00Z",
        "# from the live cluster at 127.0.0.1:9092 (cluster id Fake-Id).",
        f"# Scope: user, client-id, user+client-id, ip. {len(LIVE)} entities.",
        "# Values are in readable units; each reads back to exactly the live value.",
    ]


def test_entities_a_manifest_cannot_reproduce_are_left_out_and_listed(tmp_path: Path) -> None:
    odd = {
        Entity.of(ip="2001:DB8::11"): {"connection_creation_rate": 5.0},
        Entity.of(user="frac"): {"producer_byte_rate": 1024.0000001},
        Entity.of(user="newer-broker"): {"some_future_quota": 1.0},
        Entity.of(user="ok"): {"producer_byte_rate": 1024.0},
    }
    kept, skipped = split_exportable(odd)
    assert kept == {Entity.of(user="ok"): {"producer_byte_rate": 1024.0}}
    reasons = {s.entity: s.reason for s in skipped}
    assert "would be read as '2001:db8::11'" in reasons[Entity.of(ip="2001:DB8::11")]
    assert "not a whole number of bytes/s" in reasons[Entity.of(user="frac")]
    assert "unknown to quotaform" in reasons[Entity.of(user="newer-broker")]
    text = _export_text(odd, export_scope(ALL_SHAPES))
    assert "# Left out (3), a manifest cannot reproduce them exactly:" in text
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    assert declared([path]) == kept


def test_export_with_prefixes_and_no_defaults_loads(tmp_path: Path) -> None:
    scope = export_scope(
        ["user", "user+client-id"], {"user": ["svc-", "team "]}, include_defaults=False
    )
    live = {e: q for e, q in LIVE.items() if scope.contains(e)}
    assert set(live) == {
        Entity.of(user="svc-orders"),
        Entity.of(user="team lead"),
        Entity.of(user="svc-orders", client_id="orders-api"),
    }
    text = _export_text(live, scope)
    assert '  scope:\n    - shape: user\n      prefixes: {user: [svc-, "team "]}\n' in text
    assert "      includeDefaults: false\n" in text
    path = tmp_path / "m.yaml"
    path.write_text(text, encoding="utf-8")
    assert load_manifests([path]).scope == scope
    assert declared([path]) == live


def test_export_manifest_reads_only_the_scope_and_pins_the_id(tmp_path: Path) -> None:
    cluster = FakeCluster(LIVE)
    scope = export_scope(["ip"])
    result = export_manifest(
        cluster,
        cluster="edge",
        scope=scope,
        bootstrap="192.0.2.1:9092",
        pin_cluster_id=True,
        exported_at=EXPORTED_AT,
    )
    assert cluster.rpc_counts == {"DescribeClientQuotas": 1}
    assert result.cluster_id == "Fake-Id"
    assert result.entities == tuple(
        sorted((e for e in LIVE if e.types == ("ip",)), key=Entity.sort_key)
    )
    assert "  cluster: edge\n  clusterId: Fake-Id\n" in result.text
    path = tmp_path / "edge.yaml"
    write_new_file(path, result.text, force=False)
    desired = load_manifests([path])
    assert desired.cluster_id == "Fake-Id"
    assert declared([path]) == {e: LIVE[e] for e in result.entities}


def test_an_empty_export_is_a_valid_manifest(tmp_path: Path) -> None:
    result = export_manifest(
        FakeCluster({}), cluster="empty", scope=export_scope(ALL_SHAPES), bootstrap="b:1"
    )
    assert "  quotas: []\n" in result.text
    path = tmp_path / "empty.yaml"
    path.write_text(result.text, encoding="utf-8")
    assert load_manifests([path]).entities == {}


def test_write_new_file_refuses_to_overwrite_without_force(tmp_path: Path) -> None:
    path = tmp_path / "out.yaml"
    path.write_text("keep me\n", encoding="utf-8")
    with pytest.raises(ExportError, match="already exists: pass --force"):
        write_new_file(path, "new\n", force=False)
    assert path.read_text(encoding="utf-8") == "keep me\n"
    write_new_file(path, "new\n", force=True)
    assert path.read_text(encoding="utf-8") == "new\n"
    assert issubclass(ExportError, QuotaformError)


def test_cli_export_refuses_an_existing_out_before_connecting(tmp_path: Path) -> None:
    import typer

    from quotaform.cli.app import _QuotaformGroup
    from quotaform.cli.export import register

    app = typer.Typer(cls=_QuotaformGroup)
    register(app)
    out = tmp_path / "out.yaml"
    out.write_text("keep me\n", encoding="utf-8")
    # Port 9 (discard) has no Kafka: reaching the network would fail differently.
    result = CliRunner().invoke(
        app,
        ["export", "--cluster-name", "c", "--out", str(out), "--bootstrap-server", "127.0.0.1:9"],
    )
    assert result.exit_code == 1
    assert "already exists: pass --force" in result.output
    assert out.read_text(encoding="utf-8") == "keep me\n"


def test_cli_shape_choices_are_the_manifest_shapes() -> None:
    from quotaform.cli.export import Shape

    assert [s.value for s in Shape] == list(SHAPE_NAMES)


# ----------------------------------------------------------------- round-trip editing


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.yaml")), ids=lambda p: p.name)
def test_examples_round_trip_byte_for_byte(path: Path) -> None:
    manifest = ManifestFile.read(path)
    assert manifest.keeps_format
    assert manifest.text() == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("path", sorted(FIXTURES.glob("*.yaml")), ids=lambda p: p.name)
def test_fixtures_round_trip_byte_for_byte(path: Path) -> None:
    assert ManifestFile.read(path).text() == path.read_text(encoding="utf-8")


NEW = {
    Entity.of(user="svc-payments-batch"): {"producer_byte_rate": 3 * MiB},
    Entity.of(user="svc-payments-batch", client_id="nightly"): {"request_percentage": 33.3},
}


def test_add_entities_keeps_every_comment_and_line(manifests: Path) -> None:
    path = manifests / "payments.yaml"
    original = path.read_text(encoding="utf-8")
    manifest = ManifestFile.read(path)
    added = add_entities(
        manifest.documents[0], NEW, comment="imported from the live cluster 2025-03-01"
    )
    assert added == sorted(NEW, key=Entity.sort_key)
    path.write_text(manifest.text(), encoding="utf-8")
    edited = path.read_text(encoding="utf-8")

    assert edited.startswith(original)  # nothing above the new entries moved
    assert comment_lines(original) == comment_lines(edited)[: len(comment_lines(original))]
    assert "# Losing this entry would drop the API to 1MiB/s (the entry below):" in edited
    assert edited[len(original) :] == (
        "\n"
        "    # imported from the live cluster 2025-03-01\n"
        "    - entity: {user: svc-payments-batch}\n"
        "      values:\n"
        "        producer_byte_rate: 3MiB\n"
        "\n"
        "    # imported from the live cluster 2025-03-01\n"
        "    - entity: {user: svc-payments-batch, client-id: nightly}\n"
        "      values:\n"
        '        request_percentage: "33.3%"\n'
    )
    assert declared([manifests]) == {**declared([EXAMPLES]), **NEW}


def test_add_entities_skips_entities_the_document_declares() -> None:
    manifest = ManifestFile.read(EXAMPLES / "edge-ips.yaml")
    document = manifest.documents[0]
    again = {
        Entity.of(ip="192.0.2.10"): {"connection_creation_rate": 1.0},
        Entity.of(ip="2001:db8::10"): {"connection_creation_rate": 1.0},
    }
    assert add_entities(document, again) == []
    assert manifest.text() == (EXAMPLES / "edge-ips.yaml").read_text(encoding="utf-8")
    assert [entry_entity(item) for item in document["spec"]["quotas"]][-1] == Entity.of(
        ip="2001:db8::10"
    )


@pytest.mark.parametrize(
    ("name", "expected_tail"),
    [
        (
            "empty-quotas.yaml",
            "  quotas:     # filled by quotaform import\n"
            "    # imported\n"
            "    - entity: {user: svc-b}\n"
            "      values: {producer_byte_rate: 2MiB}\n",
        ),
        (
            "scope-only.yaml",
            "  allowDeletes: false\n"
            "  quotas:\n"
            "    # imported\n"
            "    - entity: {user: svc-b}\n"
            "      values: {producer_byte_rate: 2MiB}\n",
        ),
        (
            "multi-doc.yaml",
            "      values: {producer_byte_rate: 1MiB}  # flow style, kept for new entries\n"
            "\n"
            "    # imported\n"
            "    - entity: {user: svc-b}\n"
            "      values: {producer_byte_rate: 2MiB}\n",
        ),
    ],
)
def test_add_entities_to_other_layouts(tmp_path: Path, name: str, expected_tail: str) -> None:

    path = tmp_path / name
    shutil.copy(FIXTURES / name, path)
    original = path.read_text(encoding="utf-8")
    manifest = ManifestFile.read(path)
    target = target_document(manifest.documents)
    assert target is not None
    assert add_entities(
        target, {Entity.of(user="svc-b"): {"producer_byte_rate": 2 * MiB}}, comment="imported"
    ) == [Entity.of(user="svc-b")]
    path.write_text(manifest.text(), encoding="utf-8")
    edited = path.read_text(encoding="utf-8")
    assert edited.endswith(expected_tail)
    assert set(comment_lines(original)) - {"quotas: []  # filled by quotaform import"} <= set(
        comment_lines(edited)
    )
    assert declared([path])[Entity.of(user="svc-b")] == {"producer_byte_rate": 2 * MiB}


def test_update_entities_keeps_comments_around_changed_keys(manifests: Path) -> None:
    path = manifests / "payments.yaml"
    original = path.read_text(encoding="utf-8")
    manifest = ManifestFile.read(path)
    live = {
        # request_percentage changes (written as a number, stays one); a key is added.
        Entity.of(user="svc-payments-api"): {
            "consumer_byte_rate": 4 * MiB,
            "request_percentage": 75.0,
            "producer_byte_rate": 1024.0,
        },
        # The last key goes, and with it the place ruamel keeps the next entry's comment.
        Entity.of(user="svc-payments-ledger"): {"producer_byte_rate": 2 * MiB},
        # Unchanged.
        Entity.of(user="svc-payments-ledger", client_id="ledger-replay"): {
            "consumer_byte_rate": 5 * MiB,
            "request_percentage": 10.0,
        },
    }
    changed = update_entities(manifest.documents[0], live)
    assert changed == [Entity.of(user="svc-payments-api"), Entity.of(user="svc-payments-ledger")]
    path.write_text(manifest.text(), encoding="utf-8")
    edited = path.read_text(encoding="utf-8")
    assert comment_lines(edited) == comment_lines(original)
    assert (
        "        consumer_byte_rate: 4MiB\n"
        "        request_percentage: 75        # % of one thread: plain numbers work too\n"
        "        producer_byte_rate: 1KiB\n"
        "\n"
        "    # The API process itself (client.id=payments-api) writes every payment\n"
    ) in edited
    assert (
        "    - entity: {user: svc-payments-ledger}\n"
        "      values:\n"
        "        producer_byte_rate: 2MiB\n"
        "\n"
        "    # The replay job runs under the ledger's principal; keep it from starving\n"
    ) in edited
    got = declared([manifests])
    for entity, quotas in live.items():
        assert got[entity] == quotas


def test_crlf_files_keep_their_line_ends(tmp_path: Path) -> None:
    path = tmp_path / "crlf.yaml"
    path.write_bytes((EXAMPLES / "edge-ips.yaml").read_bytes().replace(b"\n", b"\r\n"))
    manifest = ManifestFile.read(path)
    assert manifest.keeps_format
    add_entities(
        manifest.documents[0], {Entity.of(ip="192.0.2.99"): {"connection_creation_rate": 1.0}}
    )
    text = manifest.text()
    assert "\n" not in text.replace("\r\n", "")
    assert text.endswith("connection_creation_rate: 1\r\n")


# ----------------------------------------------------------------- import


def test_import_adds_only_undeclared_entities_into_the_chosen_file(manifests: Path) -> None:
    live = dict(declared([EXAMPLES]))
    live.update(NEW)
    live[Entity.of(ip="192.0.2.200")] = {"connection_creation_rate": 7.0}
    cluster = FakeCluster(live)
    into = manifests / "payments.yaml"
    original = into.read_text(encoding="utf-8")
    result = import_entities([manifests], cluster, into=into, today=date(2025, 3, 1))  # type: ignore[arg-type]
    assert result.added == tuple(sorted([*NEW, Entity.of(ip="192.0.2.200")], key=Entity.sort_key))
    assert result.updated == ()
    assert result.reformatted == ()
    edited = into.read_text(encoding="utf-8")
    assert edited.startswith(original)
    assert edited.count("# imported from the live cluster 2025-03-01") == 3
    assert declared([manifests]) == live
    # Only payments.yaml changed.
    for other in ("00-cluster.yaml", "edge-ips.yaml", "search.yaml"):
        assert (manifests / other).read_bytes() == (EXAMPLES / other).read_bytes()

    again = import_entities([manifests], cluster, into=into)  # type: ignore[arg-type]
    assert not again.changed
    assert into.read_text(encoding="utf-8") == edited


def test_import_update_adopts_drift_in_the_declaring_file(manifests: Path) -> None:
    live = dict(declared([EXAMPLES]))
    live[Entity.of(ip="198.51.100.7")] = {"connection_creation_rate": 9.0}
    live[Entity.of(user="svc-search-query")] = {"consumer_byte_rate": 16 * MiB}
    cluster = FakeCluster(live)
    into = manifests / "payments.yaml"

    without = import_entities([manifests], cluster, into=into)  # type: ignore[arg-type]
    assert not without.changed

    result = import_entities([manifests], cluster, into=into, update=True)  # type: ignore[arg-type]
    assert result.added == ()
    assert result.updated == (
        (Entity.of(user="svc-search-query"), str(manifests / "search.yaml")),
        (Entity.of(ip="198.51.100.7"), str(manifests / "edge-ips.yaml")),
    )
    assert declared([manifests]) == live
    assert into.read_bytes() == (EXAMPLES / "payments.yaml").read_bytes()
    edge = (manifests / "edge-ips.yaml").read_text(encoding="utf-8")
    assert "    # A partner's egress address that reconnects aggressively; hold it down.\n" in edge
    assert "        connection_creation_rate: 9\n" in edge


def test_import_refuses_a_file_outside_the_set(manifests: Path, tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere.yaml"
    shutil.copy(EXAMPLES / "payments.yaml", outside)
    cluster = FakeCluster(NEW)
    with pytest.raises(ExportError, match="is not one of the manifest files given"):
        import_entities([manifests], cluster, into=outside)  # type: ignore[arg-type]
    hidden = manifests / ".draft.yaml"
    shutil.copy(EXAMPLES / "payments.yaml", hidden)
    with pytest.raises(ExportError, match="is not one of the manifest files given"):
        import_entities([manifests], cluster, into=hidden)  # type: ignore[arg-type]
    with pytest.raises(ExportError, match="is not one of the manifest files given"):
        import_entities(
            [manifests / "00-cluster.yaml", manifests / "payments.yaml"],
            cluster,  # type: ignore[arg-type]
            into=manifests / "search.yaml",
        )
    assert cluster.rpc_counts == {}


def test_import_accepts_a_file_given_by_name(manifests: Path) -> None:
    paths = [manifests / "00-cluster.yaml", manifests / "payments.yaml"]
    live = {**declared(paths), **NEW}
    result = import_entities(paths, FakeCluster(live), into=manifests / "payments.yaml")  # type: ignore[arg-type]
    assert set(result.added) == set(NEW)
    assert declared(paths) == live


def test_import_restores_the_files_when_the_set_would_not_load(
    manifests: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import quotaform.app.export as export_module
    import quotaform.export.manifest_set as manifest_set_module
    from quotaform.manifest import ManifestError, ManifestProblem

    into = manifests / "payments.yaml"
    original = into.read_bytes()
    calls = []
    real = export_module.load_manifests

    def failing_second_load(paths, cluster=None):  # type: ignore[no-untyped-def]
        calls.append(paths)
        if len(calls) == 2:
            raise ManifestError([ManifestProblem(str(into), 1, "(file)", "simulated")])
        return real(paths, cluster=cluster)

    monkeypatch.setattr(export_module, "load_manifests", failing_second_load)
    monkeypatch.setattr(manifest_set_module, "load_manifests", failing_second_load)
    live = {**declared([EXAMPLES]), **NEW}
    with pytest.raises(ExportError, match="would not load, so nothing was changed"):
        import_entities([manifests], FakeCluster(live), into=into)  # type: ignore[arg-type]
    assert into.read_bytes() == original
    assert len(calls) == 2


def test_import_refuses_the_wrong_cluster_id(tmp_path: Path) -> None:
    from quotaform.errors import ClusterMismatchError

    path = tmp_path / "m.yaml"
    text = (FIXTURES / "scope-only.yaml").read_text(encoding="utf-8")
    path.write_text(
        text.replace("  cluster: sandbox\n", "  cluster: sandbox\n  clusterId: Other\n")
    )
    with pytest.raises(ClusterMismatchError):
        import_entities([path], FakeCluster(NEW), into=path)  # type: ignore[arg-type]
    assert path.read_text(encoding="utf-8").count("clusterId: Other") == 1

