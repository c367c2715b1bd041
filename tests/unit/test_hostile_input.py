"""Hostile or broken manifests: one clear ``file:line: field:`` line, bounded
time and memory, nothing sent raw to the terminal.

Each test reproduces a defect found by a fuzz run against quotaform 0.1.0.
The timeouts are hang guards (a defect ran for minutes), not performance
targets: those live in ``benchmarks/``.
"""

from __future__ import annotations

import os
import tracemalloc
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaform.cli.app import app
from quotaform.errors import ManifestError
from quotaform.manifest import load_manifests

HEAD = """apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata: {cluster: c}
spec:
  scope: [{shape: user}]
  quotas:
"""
runner = CliRunner()


def write(tmp_path: Path, body: str, name: str = "m.yaml") -> Path:
    path = tmp_path / name
    path.write_text(HEAD + body, encoding="utf-8")
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ManifestError) as info:
        load_manifests([path])
    return [str(p) for p in info.value.problems]


def validate(*args: str) -> tuple[int, str]:
    result = runner.invoke(app, ["validate", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


# ------------------------------------------------------------------ terminal safety


def test_rich_markup_in_names_and_keys_is_printed_literally(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '    - entity: {user: "a[/]b"}\n      values: {"producer_[/]rate": 1, "[red]x[/red]": 2}\n',
    )
    code, out = validate(str(path))
    assert code == 1
    assert "Traceback" not in out and "MarkupError" not in out
    assert "producer_[/]rate" in out
    assert "[red]x[/red]" in out


def test_control_characters_in_names_are_shown_escaped(tmp_path: Path) -> None:
    # A valid name with a terminal escape, in an error message.
    entry = '    - entity: {user: "x\\e[31mred\\u202e"}\n      values: {producer_byte_rate: 1}\n'
    path = write(tmp_path, entry + entry)
    code, out = validate(str(path))
    assert code == 1
    assert "\x1b" not in out and "\u202e" not in out
    assert "\\u001b[31mred\\u202e" in out


# ------------------------------------------------------------------ numbers


@pytest.mark.timeout(30)
def test_an_integer_of_thousands_of_digits_is_a_clean_error(tmp_path: Path) -> None:
    path = write(
        tmp_path, f"    - entity: {{user: a}}\n      values: {{producer_byte_rate: {'9' * 5000}}}\n"
    )
    found = problems(path)
    assert len(found) == 1
    assert found[0].startswith(f"{path}:8: spec.quotas[0].values.producer_byte_rate: ")
    assert "5000 digits" in found[0]


@pytest.mark.timeout(60)
def test_a_huge_quoted_number_is_a_clean_error_in_bounded_memory(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '    - entity: {user: a}\n      values: {producer_byte_rate: "'
        + "9" * (20 * 1024 * 1024)
        + '"}\n',
    )
    tracemalloc.start()
    try:
        found = problems(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(found) == 1
    assert found[0].startswith(f"{path}:8: spec.quotas[0].values.producer_byte_rate: ")
    assert len(found[0]) < 300, "the message quotes a bounded excerpt, not the value"
    # The text itself (20 MiB, read once as str) is the only large allocation.
    assert peak < 200 * 1024 * 1024, peak


# ------------------------------------------------------------------ aliases


@pytest.mark.timeout(30)
def test_a_yaml_alias_bomb_fails_fast_in_bounded_memory(tmp_path: Path) -> None:
    lines = ["bomb:", "  - &a0 [x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        lines.append(f"  - &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]")
    path = write(
        tmp_path, "    - entity: {user: a}\n      values: {producer_byte_rate: 1}\n", "b.yaml"
    )
    path.write_text("\n".join(lines) + "\n---\n" + path.read_text(), encoding="utf-8")
    tracemalloc.start()
    try:
        found = problems(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert any(
        p.startswith(f"{path}:3: (yaml): ") and "aliases are not allowed" in p for p in found
    ), found
    assert peak < 50 * 1024 * 1024, peak


def test_anchors_without_aliases_are_fine(tmp_path: Path) -> None:
    path = write(tmp_path, "    - entity: &e {user: a}\n      values: {producer_byte_rate: 1}\n")
    assert len(load_manifests([path]).entities) == 1


# ------------------------------------------------------------------ files


@pytest.mark.timeout(30)
@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_is_never_read(tmp_path: Path) -> None:
    fifo = tmp_path / "x.yaml"
    os.mkfifo(fifo)
    found = problems(fifo)
    assert found == [f"{fifo}: (file): not a regular file (a FIFO): not read"]
    # In a directory it is skipped, and the warning says so.
    real = write(tmp_path, "    - entity: {user: a}\n      values: {producer_byte_rate: 1}\n")
    state = load_manifests([tmp_path])
    assert list(state.entities) and real.name == "m.yaml"
    assert f"{fifo}: (file): not a regular file (a FIFO): skipped" in state.warnings


def test_yaml_reader_errors_name_the_file_and_line(tmp_path: Path) -> None:
    path = write(
        tmp_path, '    - entity: {user: "a\x00b"}\n      values: {producer_byte_rate: 1}\n'
    )
    found = problems(path)
    assert len(found) == 1
    assert found[0].startswith(f"{path}:7: (yaml): ")
    assert "<unicode string>" not in found[0] and "position" not in found[0]


def test_a_key_with_a_newline_gives_one_line_per_problem(tmp_path: Path) -> None:
    # Found by the property test: the key text reached the field path and the message raw.
    path = write(tmp_path, '    - entity: {user: a}\n      values: {"\\n": 1, "x\\ny": 2}\n')
    found = problems(path)
    assert len(found) == 2
    assert all("\n" not in p for p in found), found
    assert any(".values.\\u000a: unknown quota key '\\n'" in p for p in found), found
