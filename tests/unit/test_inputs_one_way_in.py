"""Every byte quotaform reads from a file, an answer or a record comes in
through quotaform.inputs: a read anywhere else is either on this list, with
the reason it needs no bounds, or a defect this test names."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "quotaform"

#: Calls that read bytes or hand them to a parser, whatever they are called on.
READS = {
    "read_text",
    "read_bytes",
    "load_all",
    "open_json",
    "open_csv",
    "read_table",
    "read_schema",
    "urlopen",
    "ParquetFile",
}
#: Calls that parse when made on one of these modules (``json.loads``, ``ijson.items``).
PARSERS = {"load", "loads", "parse", "items", "basic_parse"}
PARSER_MODULES = {"json", "ijson", "yaml", "javaproperties", "pickle", "tomllib"}
#: ``open()`` and ``Path.open()`` for reading (a mode with w, a or x writes).
OPENERS = {"open"}

#: (module, function) -> why it needs no bounds of its own.
ALLOWED = {
    # bounded by the layer before the parser sees the bytes
    ("quotaform/cluster/wire/connection.py", "_from_properties"): "text from read_text",
    ("quotaform/export/edit.py", "read"): "text from read_text, check_structure first",
    ("quotaform/sandbox/exporter.py", "load_exporter_config"): "text from _rules_text",
    ("quotaform/sandbox/exporter.py", "load_rules"): "text from _rules_text",
    ("quotaform/analytics/sources/prometheus.py", "prometheus_rows"): "ijson after the depth scan",
    ("quotaform/analytics/sources/generic.py", "generic_records"): "a file from open_input",
    ("quotaform/analytics/sources/generic.py", "_parquet_batches"): "a file from open_input",
    ("quotaform/analytics/sources/generic.py", "_csv_batches"): "after open_input's checks",
    ("quotaform/analytics/sources/generic.py", "_jsonl_batches"): "after scan_json_lines",
    ("quotaform/analytics/prometheus_api.py", "_request_once"): "receive_body bounds it",
    ("quotaform/sandbox/exporter.py", "scrape"): "receive_body bounds it",
    # quotaform's own files, answers and processes: written by this run, its
    # children or the sandbox it started
    ("quotaform/sandbox/exporter.py", "start_exporter_server"): "quotaform's own rules text",
    ("quotaform/sandbox/prometheus.py", "query_range"): "the sandbox's own Prometheus",
    ("quotaform/sandbox/prometheus.py", "prometheus_get"): "the sandbox's own Prometheus",
    ("quotaform/sandbox/prometheus.py", "_ready_probe"): "the sandbox's own Prometheus",
    ("quotaform/sandbox/prometheus.py", "_log_says_ready"): "the sandbox's own log",
    ("quotaform/sandbox/prometheus.py", "_executable"): "quotaform's own build stamp",
    ("quotaform/sandbox/promtool_build.py", "build_promtool"): (
        "Prometheus' sources in the Go module cache, checked by go against go.sum"
    ),
    ("quotaform/sandbox/broker/process.py", "_wait_stopped"): "/proc",
    ("quotaform/sandbox/processes.py", "is_alive"): "/proc",
    ("quotaform/sandbox/processes.py", "cmdline"): "/proc",
    ("quotaform/sandbox/processes.py", "group_members"): "/proc",
    ("quotaform/sandbox/processes.py", "log_tail"): "a child's own log",
    ("quotaform/sandbox/broker/state.py", "_log_tail"): "the broker's own log",
    ("quotaform/sandbox/spark.py", "_read"): "the Spark processes' own logs",
    ("quotaform/sandbox/jars.py", "_marker"): "quotaform's own cache marker",
    ("quotaform/sandbox/jars.py", "log4j2_config_path"): "quotaform's own resource",
    ("quotaform/analytics/jobs.py", "table_rows"): "the table this run wrote",
    ("quotaform/analytics/spark/session.py", "_tail"): "the error file this run wrote",
    ("quotaform/app/analyze.py", "_write_recommendations"): "the table this run wrote",
}


def _reads(path: Path) -> list[tuple[str, int]]:
    """``(enclosing function, line)`` of every read call in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if isinstance(child, ast.Call):
                func = child.func
                called = (
                    func.attr
                    if isinstance(func, ast.Attribute)
                    else func.id
                    if isinstance(func, ast.Name)
                    else ""
                )
                receiver = (
                    func.value.id
                    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name)
                    else ""
                )
                parses = called in PARSERS and receiver in PARSER_MODULES
                # ``read_text(path, limits)`` and kin, called by name, are the layer's own.
                method = isinstance(func, ast.Attribute) and called in READS
                if (method or called in OPENERS or parses) and not _is_write(child):
                    found.append((name, child.lineno))
            visit(child, name)

    visit(tree, "(module)")
    return found


def _is_write(call: ast.Call) -> bool:
    modes = [a.value for a in call.args if isinstance(a, ast.Constant)]
    modes += [
        k.value.value
        for k in call.keywords
        if k.arg == "mode" and isinstance(k.value, ast.Constant)
    ]
    return any(isinstance(m, str) and set(m) & set("wax") for m in modes)


def test_every_read_goes_through_the_reading_layer() -> None:
    strays = []
    for path in sorted(ROOT.rglob("*.py")):
        module = path.relative_to(ROOT.parent).as_posix()
        if module.startswith("quotaform/inputs/"):
            continue
        for function, line in _reads(path):
            if (module, function) not in ALLOWED:
                strays.append(f"{module}:{line} in {function}()")
    assert not strays, (
        "reads outside quotaform.inputs (route them through it, or list them in ALLOWED "
        "with the reason they need no bounds):\n" + "\n".join(strays)
    )


def test_the_allowed_list_has_no_stale_entries() -> None:
    present = set()
    for path in sorted(ROOT.rglob("*.py")):
        module = path.relative_to(ROOT.parent).as_posix()
        present |= {(module, function) for function, _ in _reads(path)}
    assert set(ALLOWED) <= present, sorted(set(ALLOWED) - present)
