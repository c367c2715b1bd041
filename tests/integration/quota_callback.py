"""A real KIP-257 quota callback for broker tests: ``tests/fixtures/callback/
FlatQuotaCallback.java`` compiled with ``javac`` against the cached Kafka jars,
once per source and Kafka version (the classes are cached by their hash under
``<cache>/callbacks/``), and the broker options that start a sandbox broker
with it."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from quotaform.sandbox import BrokerOptions
from tests.javaclasses import compiled_classes

ROOT = Path(__file__).resolve().parents[2]
SOURCE = ROOT / "tests" / "fixtures" / "callback" / "FlatQuotaCallback.java"
#: The class the brokers name in ``client.quota.callback.class``.
FLAT_CALLBACK = "quotaform.testing.FlatQuotaCallback"
#: Its one limit for produce and fetch, bytes/s per broker.
FLAT_LIMIT = 1048576.0


def flat_callback_classes(version: str) -> Path:
    """The class directory holding :data:`FLAT_CALLBACK` compiled for Kafka
    ``version`` (cached: about 1.5 s the first time).

    Raises:
        SandboxError: no javac, no Kafka jars, or the source does not compile.
    """
    return compiled_classes(SOURCE, FLAT_CALLBACK, version, folder="callbacks", tag="flat")


def flat_callback_options(
    version: str, properties: Mapping[str, str] | None = None
) -> BrokerOptions:
    """A sandbox broker whose ``client.quota.callback.class`` is the flat
    callback, with more broker ``properties`` if given."""
    extra = {"client.quota.callback.class": FLAT_CALLBACK, **(properties or {})}
    return BrokerOptions(extra_properties=extra, extra_classpath=(flat_callback_classes(version),))
