"""Integration tests write their manifests with one builder
(tests/integration/helpers.py), whose text reads back as given."""

from __future__ import annotations

from pathlib import Path

from ruamel.yaml import YAML

from quotaform.manifest import load_manifests
from tests.integration.helpers import DEFAULT, quota, write_manifest


def test_the_integration_manifest_builder_writes_what_it_is_given(tmp_path: Path) -> None:
    # Names YAML would read as something else unless quoted.
    names = ["svc-a", "<default>", "true", "null", "1e3", "0x1F", "012", "a: b", "x #y", "é"]
    path = write_manifest(
        tmp_path / "m.yaml",
        "c",
        [
            *(quota({"user": name}, producer_byte_rate="1MiB") for name in names),
            quota({"user": DEFAULT}, request_percentage=150),
        ],
        scope=[{"shape": "user"}, {"shape": "client-id", "prefixes": {"client-id": ["svc-", "1"]}}],
        allow_deletes=True,
    )
    data = YAML(typ="safe", pure=True).load(path.read_text(encoding="utf-8"))
    assert [q["entity"]["user"] for q in data["spec"]["quotas"]] == [*names, {"default": True}]
    assert data["spec"]["scope"][1] == {
        "shape": "client-id",
        "prefixes": {"client-id": ["svc-", "1"]},
    }
    desired = load_manifests([path])
    assert sorted(str(e.name("user")) for e in desired.entities) == sorted([*names, "None"])
