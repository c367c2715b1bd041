"""The three analyses of the fixtures as ``quotaform`` command lines, shared
by the Spark tests that run them locally, on a cluster or over Spark Connect
(a helper module: test modules never import each other)."""

from __future__ import annotations

from pathlib import Path

__all__ = ["FIXTURES", "commands"]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "analytics"


def commands(base: Path, out: Path) -> dict[str, list[str]]:
    """utilisation, impact and recommend of ``usage.csv``, each writing under
    ``out/<command>``; impact of alice's ingest quota halved (the manifests
    written under ``base/changed``) against the snapshot (now)."""
    changed = base / "changed"
    changed.mkdir(exist_ok=True)
    text = (FIXTURES / "manifest.yaml").read_text(encoding="utf-8")
    (changed / "m.yaml").write_text(
        text.replace("values: {producer_byte_rate: 1MiB}", "values: {producer_byte_rate: 512KiB}"),
        encoding="utf-8",
    )
    usage = ["--usage", str(FIXTURES / "usage.csv")]
    return {
        "utilisation": ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), *usage,
                        "--out", str(out / "utilisation")],
        "impact": ["analyze", "impact", str(changed), "--snapshot",
                   str(FIXTURES / "snapshot.jsonl"), *usage, "--out", str(out / "impact")],
        "recommend": ["analyze", "recommend", str(FIXTURES / "manifest.yaml"), *usage,
                      "--out", str(out / "recommend")],
    }  # fmt: skip
