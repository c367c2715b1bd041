"""Fixtures of the Spark tests (the SparkSession, the standalone cluster and
the Connect server are in ``tests/conftest.py``)."""

from __future__ import annotations

from pathlib import Path

import pytest
from pyspark.sql import SparkSession
from typer.testing import CliRunner

from quotaform.cli.app import app

from .analyses import FIXTURES, commands


@pytest.fixture(scope="session")
def reference_analyses(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """Every analysis of :func:`~tests.spark.analyses.commands` from the CLI,
    on local Spark (the shared session) and on the Python engine, run once for
    every test that reads them: ``{engine: folder}``, each analysis's outputs
    in ``folder/<command>``. Tests only read them."""
    outs = {}
    for engine in ("spark", "python"):
        base = tmp_path_factory.mktemp(f"reference-{engine}")
        for command, args in commands(base, base).items():
            result = CliRunner().invoke(app, [*args, "--engine", engine])
            assert result.exit_code == 0, (command, result.output)
        outs[engine] = base
    return outs


@pytest.fixture(scope="session")
def jsonl_utilisation(
    spark: SparkSession, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Path]:
    """``analyze utilisation`` of the fixtures' ``usage.jsonl`` (local paths)
    from the CLI on each engine, run once for the tests that read it:
    ``{engine: out folder}``. Tests only read them."""
    outs = {}
    for engine in ("spark", "python"):
        out = tmp_path_factory.mktemp(f"jsonl-{engine}") / "out"
        result = CliRunner().invoke(
            app,
            ["analyze", "utilisation", str(FIXTURES / "manifest.yaml"), "--usage",
             str(FIXTURES / "usage.jsonl"), "--out", str(out), "--engine", engine],
        )  # fmt: skip
        assert result.exit_code == 0, result.output
        outs[engine] = out
    return outs
