"""The documentation site (mkdocs.yml, docs/) builds strictly, as the README
shows it, in CI: a broken link, a missing anchor or a page left out of the
navigation fails the build; the parts written from the code at build time
(the exit-code table, every schema's fields, the import contracts) are read
back from the HTML; every link of the README to a page and its anchor lands;
`mkdocs serve` serves the site; every full manifest a page shows loads.

The commands run exactly as the README shows them, in a scratch copy of the
site's sources whose ``.venv`` is the interpreter's own environment (so the
build's ``site/`` never lands in the checkout). Budget: about 6 s."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

from quotaform.errors import EXIT_CODE_MEANINGS
from quotaform.manifest import load_manifests
from tests.docblocks import ROOT, doc_text, documents, fenced_block, fenced_blocks, shell_commands

#: What the site is built from (mkdocs.yml names docs/; the hook reads the rest).
SOURCES = ("mkdocs.yml", "docs", "schemas", "pyproject.toml")


def _readme_docs_commands() -> dict[str, str]:
    """The README's two MkDocs commands, by verb (``serve``, ``build``)."""
    block = fenced_block("README.md", after="## Documentation")
    commands = shell_commands(block)
    return {command.split()[1]: command for command in commands}


def _scratch(where: Path) -> Path:
    """A copy of the site's sources with ``.venv`` pointing at this interpreter's
    environment, where ``.venv/bin/mkdocs`` is (the ``docs`` extra)."""
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, where / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, where / name)
    (where / ".venv").symlink_to(sys.prefix, target_is_directory=True)
    mkdocs = where / ".venv" / "bin" / "mkdocs"
    assert mkdocs.exists(), f"no {mkdocs}: install the docs extra (pip install -e '.[docs]')"
    return where


def _run(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run(
        ["bash", "-c", command], cwd=cwd, env=env, capture_output=True, text=True, timeout=120
    )


def _text(page: Path) -> str:
    """The visible text of a built page's article, whitespace collapsed."""
    body = page.read_text(encoding="utf-8")
    article = body[body.index("<article") : body.index("</article>")]
    return " ".join(html.unescape(re.sub(r"<[^>]+>", " ", article)).split())


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'\sid="([^"]+)"', page.read_text(encoding="utf-8")))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built by the README's command: its ``site/`` folder."""
    where = _scratch(tmp_path_factory.mktemp("docs"))
    command = _readme_docs_commands()["build"]
    assert command == ".venv/bin/mkdocs build --strict", command
    done = _run(command, where)
    assert done.returncode == 0, done.stderr[-4000:]
    assert "WARNING" not in done.stderr, done.stderr[-4000:]
    return where / "site"


def test_every_page_is_built(site: Path) -> None:
    pages = sorted(p.stem for p in (ROOT / "docs").glob("*.md"))
    built = [p for p in pages if (site / ("" if p == "index" else p) / "index.html").exists()]
    assert built == pages
    assert not (site / "hooks").exists() and not (site / "_incoming").exists()


def test_no_list_item_is_read_as_part_of_a_paragraph(site: Path) -> None:
    # Python-Markdown wants 4 spaces (GitHub 2) for what continues a list item:
    # a bullet after an under-indented block is glued to the paragraph above.
    swallowed = [
        f"{page.relative_to(site)}: {line.strip()[:80]}"
        for page in sorted(site.glob("**/index.html"))
        for paragraph in re.findall(r"<p>(.*?)</p>", page.read_text(encoding="utf-8"), re.S)
        for line in paragraph.splitlines()[1:]
        if re.match(r"\s*[*-] ", line)
    ]
    assert swallowed == []


def test_the_exit_code_page_is_the_code(site: Path) -> None:
    text = _text(site / "exit-codes" / "index.html")
    for code, meaning in EXIT_CODE_MEANINGS.items():
        assert f" {code} {' '.join(meaning.split())}" in text, (code, text[:3000])
    assert "on GitHub, read that file" not in text  # the placeholder was replaced


def test_the_json_documents_page_has_every_schema_and_its_fields(site: Path) -> None:
    page = site / "json-documents" / "index.html"
    ids, text = _ids(page), _text(page)
    schemas = sorted((ROOT / "schemas").glob("*.json"))
    assert len(schemas) >= 13
    for path in schemas:
        schema = json.loads(path.read_text(encoding="utf-8"))
        assert path.name.removesuffix(".schema.json") in ids, path.name
        assert schema["title"] in text, path.name
        for field in schema["properties"]:
            assert field in text, (path.name, field)


def test_the_architecture_page_lists_every_import_contract(site: Path) -> None:
    text = _text(site / "architecture" / "index.html")
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    assert len(contracts) >= 5
    for contract in contracts:
        assert " ".join(contract["name"].split()) in text, contract["name"]


def test_every_link_of_the_readme_lands(site: Path) -> None:
    links = re.findall(r"\]\(([^)\s]+)\)", doc_text("README.md"))
    pages = [link for link in links if link.startswith("docs/")]
    assert len(pages) >= 20, links
    for link in links:
        target, _, anchor = link.partition("#")
        assert (ROOT / target).is_file(), link
        if target.startswith("docs/"):
            stem = Path(target).stem
            built = site / ("" if stem == "index" else stem) / "index.html"
            assert not anchor or anchor in _ids(built), link


def test_a_broken_link_an_unknown_anchor_or_a_page_off_the_nav_fails(tmp_path: Path) -> None:
    where = _scratch(tmp_path)
    index = where / "docs" / "index.md"
    broken = "\n[gone](no-such-page.md) [moved](manifests.md#no-such-anchor)\n"
    index.write_text(index.read_text(encoding="utf-8") + broken, encoding="utf-8")
    (where / "docs" / "orphan.md").write_text("# Orphan\n", encoding="utf-8")
    done = _run(_readme_docs_commands()["build"], where)
    assert done.returncode != 0
    said = " ".join((done.stdout + done.stderr).split())
    assert "no-such-page.md" in said, said[-3000:]
    assert "no-such-anchor" in said, said[-3000:]
    assert "orphan.md" in said, said[-3000:]
    assert "strict mode" in said, said[-3000:]


def test_mkdocs_serve_serves_the_site(tmp_path: Path) -> None:
    where = _scratch(tmp_path)
    command = _readme_docs_commands()["serve"]
    assert command == ".venv/bin/mkdocs serve", command
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    process = subprocess.Popen(
        ["bash", "-c", f"exec {command}"], cwd=where, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        deadline, page = time.monotonic() + 60, ""
        while time.monotonic() < deadline and process.poll() is None and not page:
            try:
                with urllib.request.urlopen("http://127.0.0.1:8000/exit-codes/", timeout=2) as r:
                    page = r.read().decode("utf-8")
            except OSError:
                time.sleep(0.2)
        assert process.poll() is None, process.communicate()[1][-3000:]
        assert "<title>Exit codes - quotaform</title>" in page, page[:500]
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=30)


def _hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_hook", ROOT / "docs/hooks/generated.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_hook_refuses_an_unknown_part_or_an_unclosed_marker() -> None:
    from mkdocs.exceptions import PluginError

    hook = _hook()
    with pytest.raises(PluginError, match="no generated part 'exit-code'"):
        hook.render("<!-- generated: exit-code -->\nx\n<!-- /generated -->\n", ROOT, where="a.md")
    with pytest.raises(PluginError, match="without its end"):
        hook.render("<!-- generated: exit-codes -->\nx\n", ROOT, where="a.md")
    assert hook.render("no part\n", ROOT) == "no part\n"


def test_every_full_manifest_shown_loads(tmp_path: Path) -> None:
    shown = [
        (path.name, block)
        for path in documents()
        for block in fenced_blocks(path.read_text(encoding="utf-8"), "yaml")
        if block.startswith("apiVersion: quotaform.io/v1")
    ]
    assert {name for name, _ in shown} >= {"README.md", "manifests.md"}
    for index, (name, block) in enumerate(shown):
        path = tmp_path / f"{index}-{name}.yaml"
        path.write_text(block, encoding="utf-8")
        assert len(load_manifests([path]).entities) == block.count("- entity:"), name
