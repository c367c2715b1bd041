"""Java classes the tests need beside Kafka's (a KIP-257 quota callback, a
warm ConfigCommand): compiled with ``javac`` against the cached Kafka jars,
once per source and Kafka version, cached by their hash under ``<cache>/``."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox.jars import cache_root, ensure_kafka_jars, find_java


def javac() -> str:
    """``javac`` on the PATH, else beside the ``java`` the sandbox runs."""
    found = shutil.which("javac") or str(Path(find_java()).resolve().parent / "javac")
    if not os.access(found, os.X_OK):
        raise SandboxError("no javac (a JDK, not a JRE) to compile the tests' Java classes")
    return found


def compiled_classes(source: Path, class_name: str, version: str, *, folder: str, tag: str) -> Path:
    """The class directory holding ``class_name`` compiled from ``source`` for
    Kafka ``version``: ``<cache>/<folder>/<tag>-<hash>`` (about 1.5 s the
    first time).

    Raises:
        SandboxError: no javac, no Kafka jars, or the source does not compile.
    """
    class_file = Path(*class_name.split(".")).with_suffix(".class")
    digest = hashlib.sha256(source.read_bytes() + version.encode()).hexdigest()[:16]
    target = cache_root() / folder / f"{tag}-{digest}"
    if (target / class_file).is_file():
        return target
    libs = ensure_kafka_jars(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{tag}-", dir=target.parent))
    try:
        done = subprocess.run(
            [javac(), "--release", "17", "-cp", str(libs / "*"), "-d", str(staging), str(source)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise SandboxError(f"javac {source.name} failed:\n{done.stderr[-2000:]}")
        try:
            os.rename(staging, target)  # atomic; another session may have won
        except OSError:
            if not (target / class_file).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target
