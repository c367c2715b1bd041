"""Connection settings: properties file, environment, flags, secrets."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from quotaform.cluster.wire import load_connection_settings, redact_secrets_in_logs
from quotaform.errors import ConnectionSettingsError


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "client.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_sasl_scram_properties_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "bootstrap.servers=kafka-1:9093,kafka-2:9093\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
        '    username="quota-admin" password="s3cr=t \\\\"x\\\\"";\n'
        "ssl.truststore.location=/etc/kafka/ca.pem\n"
        "ssl.truststore.type=PEM\n",
    )
    s = load_connection_settings(command_config=path, env={})
    assert s.bootstrap_servers == "kafka-1:9093,kafka-2:9093"
    assert (s.security_protocol, s.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (s.sasl_username, s.sasl_password) == ("quota-admin", 's3cr=t "x"')
    assert s.ssl_cafile == "/etc/kafka/ca.pem"
    configs = s.kafka_configs()
    assert configs["sasl_plain_password"] == 's3cr=t "x"'
    assert configs["bootstrap_servers"] == ["kafka-1:9093", "kafka-2:9093"]
    assert "s3cr" not in repr(s)
    assert "s3cr" not in str(s.describe())
    assert s.describe()["sasl_password"] == "***"


def test_flag_beats_environment_beats_file(tmp_path: Path) -> None:
    path = write(tmp_path, "bootstrap.servers=file:9092\n")
    env = {"QUOTAFORM_BOOTSTRAP_SERVER": "env:9092"}
    assert load_connection_settings(command_config=path, env=env).bootstrap_servers == "env:9092"
    assert (
        load_connection_settings(
            bootstrap_server="flag:9092", command_config=path, env=env
        ).bootstrap_servers
        == "flag:9092"
    )


def test_secrets_from_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n")
    s = load_connection_settings(
        bootstrap_server="b:9092",
        command_config=path,
        env={"QUOTAFORM_SASL_USERNAME": "u", "QUOTAFORM_SASL_PASSWORD": "p"},
    )
    assert (s.sasl_username, s.sasl_password) == ("u", "p")


def test_missing_bootstrap_server_is_explained() -> None:
    with pytest.raises(ConnectionSettingsError, match="--bootstrap-server"):
        load_connection_settings(env={})


def test_sasl_without_credentials_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path, "security.protocol=SASL_SSL\nsasl.mechanism=PLAIN\n")
    with pytest.raises(ConnectionSettingsError, match="username and password"):
        load_connection_settings(bootstrap_server="b:9092", command_config=path, env={})


def test_jks_truststore_is_refused_with_a_conversion_hint(tmp_path: Path) -> None:
    path = write(tmp_path, "ssl.truststore.location=/etc/kafka/truststore.jks\n")
    with pytest.raises(ConnectionSettingsError, match="PEM"):
        load_connection_settings(bootstrap_server="b:9092", command_config=path, env={})


def test_unsupported_properties_are_named(tmp_path: Path) -> None:
    path = write(tmp_path, "sasl.login.callback.handler.class=com.example.Handler\n")
    with pytest.raises(ConnectionSettingsError, match=r"sasl\.login\.callback\.handler\.class"):
        load_connection_settings(bootstrap_server="b:9092", command_config=path, env={})


def test_unreadable_file_names_the_path(tmp_path: Path) -> None:
    with pytest.raises(ConnectionSettingsError, match=r"nope\.properties"):
        load_connection_settings(
            bootstrap_server="b:9092", command_config=tmp_path / "nope.properties", env={}
        )


def test_secrets_never_reach_log_output(caplog: pytest.LogCaptureFixture) -> None:
    s = load_connection_settings(
        bootstrap_server="b:9092",
        env={"QUOTAFORM_SASL_USERNAME": "u", "QUOTAFORM_SASL_PASSWORD": "hunter2-very-secret"},
    )
    redact_secrets_in_logs(s)
    with caplog.at_level(logging.DEBUG, logger="kafka.admin.client"):
        # kafka-python logs its whole configuration like this at client start.
        logging.getLogger("kafka.admin.client").debug(
            "Starting KafkaAdminClient with configuration: %s", s.kafka_configs()
        )
    assert "hunter2-very-secret" not in caplog.text
    assert "***" in caplog.text
