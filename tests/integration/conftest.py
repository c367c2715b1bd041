"""Fixtures for tests against the real sandbox broker (see ``tests/conftest.py``)."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from quotaform.cluster.wire import QuotaAdminClient, load_connection_settings, open_admin

from .helpers import LONG_WINDOWS, METRICS_SAMPLE_S, SCRAM_USERS


@pytest.fixture(scope="session")
def admin(kafka_broker) -> Iterator[QuotaAdminClient]:  # type: ignore[no-untyped-def]
    """A read-write quota admin client on the session's broker."""
    client = open_admin(
        load_connection_settings(bootstrap_server=kafka_broker.bootstrap), read_only=False
    )
    yield client
    client.close()


@pytest.fixture
def uniq() -> str:
    """A short unique prefix so tests sharing one broker never see each other's entities."""
    return f"t{uuid.uuid4().hex[:8]}-"


@pytest.fixture
def clean(admin):  # type: ignore[no-untyped-def]
    """A broker without client quotas before and after the test (for tests that
    own whole entity shapes; they share the session broker)."""
    from .helpers import wipe

    wipe(admin)
    yield
    wipe(admin)


@pytest.fixture
def bootstrap(kafka_broker) -> str:  # type: ignore[no-untyped-def]
    """The session broker's ``127.0.0.1:PORT``."""
    return str(kafka_broker.bootstrap)




@pytest.fixture(scope="session")
def jmx_session_broker(sandbox_broker):  # type: ignore[no-untyped-def]
    """A sandbox broker with JMX on a loopback port (its quota MBeans), shared
    by the tests that read the broker's metrics, the multi-cluster tests (as
    their second cluster) and the kill test (which kills and restarts it).
    The modules using it are one ``xdist_group("jmx")``: under pytest-xdist
    they run on one worker, which starts it once. Its metric samples are
    :data:`METRICS_SAMPLE_S` long."""
    from quotaform.sandbox import BrokerOptions

    metrics = {"metrics.sample.window.ms": str(METRICS_SAMPLE_S * 1000)}
    options = BrokerOptions(jmx_port=0, extra_properties=None if LONG_WINDOWS else metrics)
    with sandbox_broker(f"pytest-jmx-{os.getpid()}", options=options) as broker:
        yield broker


@pytest.fixture
def jmx_broker(jmx_session_broker):  # type: ignore[no-untyped-def]
    """The JMX broker with no client quotas at the start of the test: each test
    owns every quota on it (they apply whole manifests, defaults included)."""
    from .helpers import wipe

    client = open_admin(
        load_connection_settings(bootstrap_server=jmx_session_broker.bootstrap), read_only=False
    )
    try:
        wipe(client)
        yield jmx_session_broker
    finally:
        client.close()


@pytest.fixture(scope="session")
def scram_session_broker(sandbox_broker):  # type: ignore[no-untyped-def]
    """A SASL_PLAINTEXT sandbox broker with :data:`SCRAM_USERS` (SCRAM-SHA-512,
    the StandardAuthorizer, ``admin`` its super user), shared by the SASL
    tests and the CI workflow tests: one ``xdist_group("scram")``. Use
    ``scram_broker``."""
    from quotaform.sandbox import BrokerOptions

    options = BrokerOptions(scram_users=SCRAM_USERS)
    with sandbox_broker(f"pytest-scram-{os.getpid()}", options=options) as broker:
        yield broker


@pytest.fixture(scope="module")
def scram_broker(scram_session_broker):  # type: ignore[no-untyped-def]
    """The session's SCRAM broker without client quotas when the module
    starts (each module owns every quota on it, in order)."""
    from dataclasses import replace

    from .helpers import wipe

    settings = load_connection_settings(
        bootstrap_server=scram_session_broker.bootstrap,
        env={"QUOTAFORM_SASL_USERNAME": "admin", "QUOTAFORM_SASL_PASSWORD": SCRAM_USERS["admin"]},
    )
    client = open_admin(
        replace(settings, security_protocol="SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512"),
        read_only=False,
    )
    try:
        wipe(client)
    finally:
        client.close()
    return scram_session_broker
