"""MkDocs hook: the parts of the documentation that are written from the code.

A page marks a generated part with two HTML comments; between them stands a
sentence for readers of the Markdown source (on GitHub), which the build
replaces with the generated text::

    <!-- generated: exit-codes -->
    The table is generated from ``quotaform.errors.EXIT_CODE_MEANINGS``.
    <!-- /generated -->

The parts (``GENERATORS``):

* ``exit-codes``: ``quotaform.errors.EXIT_CODE_MEANINGS`` as a table;
* ``schemas``: every ``schemas/*.json`` (title, description, ``$id``, and
  its top-level fields with type, whether required, and description);
* ``import-contracts``: the import-linter contracts of ``pyproject.toml``;
* ``input-limits``: ``quotaform.inputs.limits.LIMITS``, the bounds every
  input is read within.

So none of them can drift from the code: a test builds the site strictly and
reads them back from the HTML (``tests/unit/test_docs_site.py``). An unknown
part's name, or a marker without its end, fails the build.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mkdocs.exceptions import PluginError

_PART = re.compile(r"<!-- generated: ([a-z-]+) -->\n(.*?)<!-- /generated -->", re.S)
_OPENING = re.compile(r"<!-- generated: ([a-z-]+) -->")


def _cell(text: str) -> str:
    """One Markdown table cell: one line, reST ``literals`` as code, pipes escaped
    outside code (Python-Markdown keeps a pipe inside a code span in its cell)."""
    parts = re.split(r"(`[^`]*`)", text.replace("``", "`"))
    escaped = (p if p.startswith("`") else p.replace("|", "\\|") for p in parts)
    return " ".join("".join(escaped).split())


def exit_codes(root: Path) -> str:
    """The exit-code table every command follows."""
    from quotaform.errors import EXIT_CODE_MEANINGS

    rows = [
        f"| {code} | {_cell(meaning)} |" for code, meaning in sorted(EXIT_CODE_MEANINGS.items())
    ]
    return "\n".join(["| code | meaning |", "|---|---|", *rows]) + "\n"


def _type(node: dict[str, Any]) -> str:
    """A short reading of a JSON Schema node's type: ``string``, ``array of Change``."""
    if "$ref" in node:
        return str(node["$ref"]).rsplit("/", 1)[-1]
    if "const" in node:
        return json.dumps(node["const"])
    if "enum" in node:
        return ", ".join(json.dumps(value) for value in node["enum"])
    for combined in ("anyOf", "oneOf"):
        if combined in node:
            return " or ".join(_type(option) for option in node[combined])
    kind = node.get("type")
    if isinstance(kind, list):
        return " or ".join(str(k) for k in kind)
    if kind == "array" and isinstance(node.get("items"), dict):
        return f"array of {_type(node['items'])}"
    if kind == "object" and isinstance(node.get("additionalProperties"), dict):
        return f"object of {_type(node['additionalProperties'])}"
    return str(kind or "any")


def schemas(root: Path) -> str:
    """One section per ``schemas/*.json``: what it is, and its top-level fields."""
    parts: list[str] = []
    for path in sorted((root / "schemas").glob("*.json")):
        schema = json.loads(path.read_text(encoding="utf-8"))
        anchor = path.name.removesuffix(".schema.json")
        parts += [
            f"### `{path.name}` {{#{anchor}}}",
            "",
            f"**{_cell(schema.get('title', path.name))}**: {_cell(schema.get('description', ''))}",
            "",
            f"`$id`: `{schema.get('$id', '')}`",
            "",
            "| field | type | required | description |",
            "|---|---|---|---|",
        ]
        required = set(schema.get("required", []))
        for name, node in sorted(schema.get("properties", {}).items()):
            needed = "yes" if name in required else ""
            described = _cell(node.get("description", ""))
            parts.append(f"| `{name}` | {_cell(_type(node))} | {needed} | {described} |")
        parts.append("")
    return "\n".join(parts)


def import_contracts(root: Path) -> str:
    """The import-linter contracts ``lint-imports`` checks, in their own words."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    lines: list[str] = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        lines.append(f"* **{_cell(contract['name'])}** ({contract['type']})")
        if contract["type"] == "layers":
            layers = " → ".join(f"`{layer}`" for layer in contract["layers"])
            lines.append(f"    * top to bottom: {layers}")
        if contract["type"] == "forbidden":
            sources = ", ".join(f"`{m}`" for m in contract["source_modules"])
            forbidden = ", ".join(f"`{m}`" for m in contract["forbidden_modules"])
            lines.append(f"    * {sources} never import {forbidden}")
        if contract["type"] == "acyclic_siblings":
            ancestors = ", ".join(f"`{m}`" for m in contract["ancestors"])
            lines.append(f"    * under {ancestors}")
    return "\n".join(lines) + "\n"


def input_limits(root: Path) -> str:
    """The bounds of every kind of input quotaform reads, as a table."""
    from quotaform.inputs.limits import LIMITS, size_text

    rows = [
        f"| {_cell(limits.kind)} | {size_text(limits.max_bytes)}"
        f"{f' (`{limits.overridden_by}`)' if limits.overridden_by else ''} | "
        f"{limits.max_depth} | {limits.max_number_chars} | "
        f"{size_text(limits.max_line_bytes)} |"
        for limits in LIMITS.values()
    ]
    return (
        "\n".join(
            [
                "| input | largest | deepest nesting | longest number (characters) "
                "| longest line |",
                "|---|---|---|---|---|",
                *rows,
            ]
        )
        + "\n"
    )


GENERATORS: dict[str, Callable[[Path], str]] = {
    "exit-codes": exit_codes,
    "schemas": schemas,
    "import-contracts": import_contracts,
    "input-limits": input_limits,
}


def render(markdown: str, root: Path, *, where: str = "") -> str:
    """``markdown`` with every generated part written from the code under ``root``
    (the folder of ``mkdocs.yml``). Raises ``PluginError`` for an unknown part
    or a marker without its end."""
    opened = _OPENING.findall(markdown)
    found = _PART.findall(markdown)
    if len(opened) != len(found):
        raise PluginError(f"{where}: a '<!-- generated: NAME -->' marker without its end")
    for name, _ in found:
        if name not in GENERATORS:
            raise PluginError(f"{where}: no generated part {name!r} (known: {sorted(GENERATORS)})")
    return _PART.sub(lambda match: GENERATORS[match.group(1)](root), markdown)


def on_page_markdown(markdown: str, *, page: Any, config: Any, files: Any) -> str:
    """MkDocs event: write the generated parts of one page."""
    root = Path(config.config_file_path).resolve().parent
    return render(markdown, root, where=page.file.src_uri)
