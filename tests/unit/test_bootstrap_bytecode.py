"""``scripts/bootstrap`` leaves every installed module and quotaform's own
compiled to bytecode (issue 35): where ``PYTHONDONTWRITEBYTECODE`` is set,
as on CI machines, no process writes a ``.pyc``, and each process compiled
every module it imported from source again (``quotaform plan --help``: 1.3-1.5
CPU-seconds instead of 0.5). This checks the venv the suite runs in, which
``scripts/test`` made with ``scripts/bootstrap``."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

#: What every quotaform command imports, the Spark engine's stack, and
#: quotaform itself (an editable install: compiled by bootstrap's compileall).
PACKAGES = ("kafka", "pydantic", "typer", "rich", "pyarrow", "pyspark", "quotaform")


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_of_the_venv_has_its_bytecode(package: str) -> None:
    assert sys.prefix != sys.base_prefix, "not run from the venv scripts/test makes"
    spec = importlib.util.find_spec(package)  # top level: nothing is imported
    assert spec is not None and spec.submodule_search_locations, package
    root = Path(next(iter(spec.submodule_search_locations)))
    sources = [p for p in root.rglob("*.py") if "__pycache__" not in p.parts]
    assert len(sources) > 5, (package, root)
    missing = [
        str(p.relative_to(root))
        for p in sources
        if not Path(importlib.util.cache_from_source(str(p))).is_file()
    ]
    assert missing == [], f"{package}: {len(missing)} of {len(sources)} without bytecode"
