"""The reading layer (quotaform.inputs) on the inputs an attacker or an
unlucky user hands it: each refusal one line naming the file, the line or
byte offset and the limit; nothing blocks, nothing grows past its bound."""

from __future__ import annotations

import io
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from quotaform.errors import InputError
from quotaform.inputs.files import open_input, read_bytes, read_text
from quotaform.inputs.http import check_media_type, receive_body
from quotaform.inputs.jsondoc import json_lines, load_json
from quotaform.inputs.limits import LIMITS, Limits, limits_for
from tests.hostileserver import HostilePrometheus

SMALL = Limits("test file", 1024, max_depth=8, max_number_chars=20, max_line_bytes=64)


def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "plan.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(InputError, match=r"not a regular file \(a FIFO\)"):
        read_bytes(fifo, SMALL)
    assert time.monotonic() - start < 2


def test_a_directory_and_a_symlink_loop_are_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"not a regular file \(a directory\)"):
        read_bytes(tmp_path, SMALL)
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    with pytest.raises(InputError, match="a symbolic link loop"):
        read_bytes(tmp_path / "a", SMALL)


def test_the_size_bound_names_the_limit_and_the_option_that_raises_it(tmp_path: Path) -> None:
    path = tmp_path / "big.jsonl"
    path.write_bytes(b"x" * 2048)
    with pytest.raises(InputError) as info:
        read_bytes(path, SMALL)
    assert str(info.value) == f"{path}: larger than 1 KiB, the limit for a test file"
    usage = limits_for("usage", max_bytes=1024)
    with pytest.raises(InputError, match=r"raise it with --max-usage-size"):
        open_input(path, usage)


def test_a_file_growing_while_read_stops_at_the_bound(tmp_path: Path) -> None:
    path = tmp_path / "growing.yaml"
    path.write_bytes(b"a" * 512)
    stop = threading.Event()

    def grow() -> None:
        with path.open("ab") as fh:
            while not stop.is_set():
                fh.write(b"b" * 4096)
                fh.flush()

    writer = threading.Thread(target=grow)
    writer.start()
    try:
        time.sleep(0.05)
        with pytest.raises(InputError, match="larger than 1 KiB"):
            read_bytes(path, SMALL)
    finally:
        stop.set()
        writer.join()


def test_text_is_utf8_with_the_bad_byte_named_a_bom_dropped_a_nul_refused(
    tmp_path: Path,
) -> None:
    path = tmp_path / "m.yaml"
    path.write_bytes(b"\xef\xbb\xbfa: 1\r\nb: 2\r\n")
    assert read_text(path, SMALL) == "a: 1\r\nb: 2\r\n"
    path.write_bytes(b"a: 1\nb: \xff\n")
    with pytest.raises(InputError) as info:
        read_text(path, SMALL)
    assert str(info.value).startswith(f"{path}:2: not UTF-8 text: byte 0xff at byte offset 8")
    path.write_bytes(b"a: 1\nb: \x00\n")
    with pytest.raises(InputError, match=r":2: a NUL byte at byte offset 8"):
        read_text(path, SMALL)


def test_a_secret_file_never_has_a_byte_quoted(tmp_path: Path) -> None:
    path = tmp_path / "password"
    path.write_bytes(b"hunter\xe92")
    with pytest.raises(InputError) as info:
        read_text(path, LIMITS["secret"])
    assert "0xe9" not in str(info.value) and "hunter" not in str(info.value)


def test_json_bounds_depth_numbers_and_constants(tmp_path: Path) -> None:
    path = tmp_path / "d.json"
    path.write_text('{"a": [[[[[[[[[1]]]]]]]]]}')
    with pytest.raises(InputError, match=r":1: nested too deeply: more than 8 levels"):
        load_json(path, SMALL)
    path.write_text('{"a":\n 1' + "0" * 30 + "}")
    with pytest.raises(InputError, match=r":2: a number of 31 characters: too long"):
        load_json(path, SMALL)
    path.write_text('{"a": NaN}')
    with pytest.raises(InputError, match="NaN is not a number JSON allows"):
        load_json(path, SMALL)
    assert load_json(b'{"a": [1, 2.5]}', SMALL, name="answer") == (
        {"a": [1, 2.5]},
        '{"a": [1, 2.5]}',
    )


def test_json_lines_judge_each_line_and_skip_what_is_too_long(tmp_path: Path) -> None:
    path = tmp_path / "u.jsonl"
    lines = [
        b'{"a": 1}',
        b'{"a": "' + b"x" * 100 + b'"}',  # over 64 bytes
        b"",
        b'{"a": ' + b"[" * 9 + b"]" * 9 + b"}",  # 10 deep
        b"nope",
        b'{"a": 2}',
    ]
    path.write_bytes(b"\xef\xbb\xbf" + b"\n".join(lines) + b"\n")
    got = [(line.number, line.value, line.problem) for line in json_lines(path, SMALL)]
    assert got[0] == (1, {"a": 1}, None)
    assert got[1][0] == 2 and "longer than" in str(got[1][2])
    assert got[2][0] == 4 and "nested too deeply" in str(got[2][2])
    assert got[3][0] == 5 and str(got[3][2]).startswith("line: not JSON")
    assert got[4] == (6, {"a": 2}, None)


def _open(url: str, timeout: float = 5) -> Any:
    import urllib.request

    return urllib.request.urlopen(url, timeout=timeout)


def test_an_answer_is_cut_at_its_size_and_its_deadline() -> None:
    with (
        HostilePrometheus("huge", size=5_000_000) as server,
        _open(server.url) as response,
        pytest.raises(InputError, match="larger than 1 KiB"),
    ):
        receive_body(
            response, io.BytesIO(), source="s", limits=SMALL, deadline=time.monotonic() + 5
        )
    start = time.monotonic()
    with (
        HostilePrometheus("slow") as server,
        _open(server.url, 30) as response,
        pytest.raises(InputError, match="not complete by its deadline"),
    ):
        receive_body(
            response,
            io.BytesIO(),
            source="s",
            limits=LIMITS["prometheus-answer"],
            deadline=time.monotonic() + 2,
        )
    assert time.monotonic() - start < 5
    with (
        HostilePrometheus("html200") as server,
        _open(server.url) as response,
        pytest.raises(InputError, match="answered with text/html, not application/json"),
    ):
        check_media_type(response, source="s", expected="application/json", what="x")
