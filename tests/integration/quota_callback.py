"""A real KIP-257 quota callback for broker tests: ``tests/fixtures/callback/
FlatQuotaCallback.java`` compiled with ``javac`` against the cached Kafka jars,
once per source and Kafka version (the classes are cached by their hash under
``<cache>/callbacks/``), and the broker options that start a sandbox broker
with it."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox import BrokerOptions
from quotaform.sandbox.jars import cache_root, ensure_kafka_jars, find_java

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "fixtures" / "callback" / "FlatQuotaCallback.java"
#: The class the brokers name in ``client.quota.callback.class``.
FLAT_CALLBACK = "quotaform.testing.FlatQuotaCallback"
#: Its one limit for produce and fetch, bytes/s per broker.
FLAT_LIMIT = 1048576.0
_CLASS_FILE = Path(*FLAT_CALLBACK.split(".")).with_suffix(".class")


def _javac() -> str:
    """``javac`` on the PATH, else beside the ``java`` the sandbox runs."""
    found = shutil.which("javac") or str(Path(find_java()).resolve().parent / "javac")
    if not os.access(found, os.X_OK):
        raise SandboxError("no javac (a JDK, not a JRE) to compile the test quota callback")
    return found


def flat_callback_classes(version: str) -> Path:
    """The class directory holding :data:`FLAT_CALLBACK` compiled for Kafka
    ``version`` (cached: about 1.5 s the first time).

    Raises:
        SandboxError: no javac, no Kafka jars, or the source does not compile.
    """
    digest = hashlib.sha256(SOURCE.read_bytes() + version.encode()).hexdigest()[:16]
    target = cache_root() / "callbacks" / f"flat-{digest}"
    if (target / _CLASS_FILE).is_file():
        return target
    libs = ensure_kafka_jars(version)
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".flat-", dir=target.parent))
    try:
        done = subprocess.run(
            [_javac(), "--release", "17", "-cp", str(libs / "*"), "-d", str(staging), str(SOURCE)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        if done.returncode != 0:
            raise SandboxError(f"javac {SOURCE.name} failed:\n{done.stderr[-2000:]}")
        try:
            os.rename(staging, target)  # atomic; another session may have won
        except OSError:
            if not (target / _CLASS_FILE).is_file():
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def flat_callback_options(
    version: str, properties: Mapping[str, str] | None = None
) -> BrokerOptions:
    """A sandbox broker whose ``client.quota.callback.class`` is the flat
    callback, with more broker ``properties`` if given."""
    extra = {"client.quota.callback.class": FLAT_CALLBACK, **(properties or {})}
    return BrokerOptions(extra_properties=extra, extra_classpath=(flat_callback_classes(version),))
