"""Connection settings, taken the way Kafka's own tools take them.

Sources, later ones winning:
1. a client properties file (``--command-config``, as for ``kafka-configs``),
2. environment variables ``QUOTAFORM_BOOTSTRAP_SERVER``,
   ``QUOTAFORM_SASL_USERNAME``, ``QUOTAFORM_SASL_PASSWORD``,
   ``QUOTAFORM_SSL_KEY_PASSWORD`` (so secrets need not sit in files),
3. ``--bootstrap-server``.

Secrets (SASL password, key password, the JAAS line) are kept out of ``repr``,
out of :meth:`ConnectionSettings.describe`, and out of kafka-python's own log
records by :func:`redact_secrets_in_logs`.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from quotaform.errors import ConnectionSettingsError, InputError
from quotaform.inputs.files import read_text
from quotaform.inputs.limits import LIMITS

__all__ = [
    "ENV_BOOTSTRAP",
    "ConnectionSettings",
    "exposed_secret_warning",
    "load_connection_settings",
    "redact_secrets_in_logs",
]

ENV_BOOTSTRAP = "QUOTAFORM_BOOTSTRAP_SERVER"
ENV_COMMAND_CONFIG = "QUOTAFORM_COMMAND_CONFIG"
ENV_SASL_USERNAME = "QUOTAFORM_SASL_USERNAME"
ENV_SASL_PASSWORD = "QUOTAFORM_SASL_PASSWORD"
ENV_SSL_KEY_PASSWORD = "QUOTAFORM_SSL_KEY_PASSWORD"

_PROTOCOLS = {"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"}
_MECHANISMS = {"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"}

#: Client properties that change nothing for an admin connection and are ignored.
_IGNORED_KEYS = {
    "ssl.enabled.protocols",
    "ssl.protocol",
    "ssl.truststore.type",
    "ssl.keystore.type",
    "sasl.login.class",
    "default.api.timeout.ms",
    "retries",
    "retry.backoff.ms",
}
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


@dataclass(frozen=True, slots=True)
class ConnectionSettings:
    """How to reach and authenticate to the cluster.

    Attributes:
        bootstrap_servers: ``host:port[,host:port...]``.
        request_timeout_ms: timeout of one RPC in milliseconds.
        connect_timeout_ms: how long to try to reach a bootstrap server, in
            milliseconds.
        warnings: things the operator should fix that do not stop the
            connection (a secret file readable by others), without secrets.
        Others: kafka-python's names for the same settings. ``sasl_password``
        and ``ssl_password`` never appear in ``repr`` or :meth:`describe`.
    """

    bootstrap_servers: str
    security_protocol: str = "PLAINTEXT"
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_password: str | None = field(default=None, repr=False)
    sasl_kerberos_service_name: str | None = None
    ssl_cafile: str | None = None
    ssl_certfile: str | None = None
    ssl_keyfile: str | None = None
    ssl_password: str | None = field(default=None, repr=False)
    ssl_check_hostname: bool = True
    client_id: str = "quotaform"
    request_timeout_ms: int = 30_000
    connect_timeout_ms: int = 15_000
    warnings: tuple[str, ...] = ()

    def with_timeout(self, seconds: float | None) -> ConnectionSettings:
        """These settings with ``--timeout SECONDS`` as both the time to reach
        a bootstrap server and the timeout of one RPC; unchanged for ``None``."""
        if seconds is None:
            return self
        ms = max(int(seconds * 1000), 1)
        return replace(self, connect_timeout_ms=ms, request_timeout_ms=ms)

    @property
    def secrets(self) -> tuple[str, ...]:
        """The secret values, for redaction."""
        return tuple(s for s in (self.sasl_password, self.ssl_password) if s)

    def kafka_configs(self) -> dict[str, Any]:
        """Keyword arguments for ``kafka.KafkaAdminClient`` (the request timeout
        goes separately to :class:`~quotaform.cluster.wire.QuotaAdminClient`)."""
        configs: dict[str, Any] = {
            "bootstrap_servers": self.bootstrap_servers.split(","),
            "security_protocol": self.security_protocol,
            "client_id": self.client_id,
            "ssl_check_hostname": self.ssl_check_hostname,
        }
        optional = {
            "sasl_mechanism": self.sasl_mechanism,
            "sasl_plain_username": self.sasl_username,
            "sasl_plain_password": self.sasl_password,
            "sasl_kerberos_service_name": self.sasl_kerberos_service_name,
            "ssl_cafile": self.ssl_cafile,
            "ssl_certfile": self.ssl_certfile,
            "ssl_keyfile": self.ssl_keyfile,
            "ssl_password": self.ssl_password,
        }
        configs.update({k: v for k, v in optional.items() if v is not None})
        return configs

    def describe(self) -> dict[str, str]:
        """A printable summary with every secret replaced by ``***``."""
        out = {
            "bootstrap_servers": self.bootstrap_servers,
            "security_protocol": self.security_protocol,
        }
        if self.sasl_mechanism:
            out["sasl_mechanism"] = self.sasl_mechanism
        if self.sasl_username:
            out["sasl_username"] = self.sasl_username
        if self.sasl_password:
            out["sasl_password"] = "***"
        if self.ssl_cafile:
            out["ssl_cafile"] = self.ssl_cafile
        return out


def _parse_jaas(jaas: str, source: str) -> tuple[str | None, str | None]:
    """``(username, password)`` from a ``sasl.jaas.config`` value
    (``PlainLoginModule`` / ``ScramLoginModule``: ``... required username="u" password="p";``).
    """
    options = {k: v.replace('\\"', '"') for k, v in _JAAS_OPTION.findall(jaas)}
    if "LoginModule" not in jaas:
        raise ConnectionSettingsError(f"{source}: sasl.jaas.config does not name a LoginModule")
    return options.get("username"), options.get("password")


def _from_properties(path: Path) -> dict[str, Any]:
    import javaproperties  # here: only --command-config needs it (10 ms of imports)

    try:
        props: dict[str, str] = javaproperties.loads(read_text(path, LIMITS["command-config"]))
    except InputError as exc:
        raise ConnectionSettingsError(f"--command-config {exc}") from None
    source = str(path)
    out: dict[str, Any] = {}
    unsupported: list[str] = []
    for key, value in props.items():
        value = value.strip()
        if key == "bootstrap.servers":
            out["bootstrap_servers"] = value
        elif key == "security.protocol":
            out["security_protocol"] = value.upper()
        elif key == "sasl.mechanism":
            out["sasl_mechanism"] = value.upper()
        elif key == "sasl.jaas.config":
            user, password = _parse_jaas(value, source)
            if user is not None:
                out["sasl_username"] = user
            if password is not None:
                out["sasl_password"] = password
        elif key == "sasl.kerberos.service.name":
            out["sasl_kerberos_service_name"] = value
        elif key == "ssl.truststore.location":
            _require_pem(props, "ssl.truststore", value, source)
            out["ssl_cafile"] = value
        elif key == "ssl.keystore.location":
            # A PEM keystore holds the certificate chain and the private key;
            # Python's ssl reads the key from the certificate file then.
            _require_pem(props, "ssl.keystore", value, source)
            out["ssl_certfile"] = value
        elif key in ("ssl.key.password", "ssl.keystore.password"):
            out["ssl_password"] = value
        elif key == "ssl.endpoint.identification.algorithm":
            out["ssl_check_hostname"] = value.lower() == "https"
        elif key == "client.id":
            out["client_id"] = value
        elif key == "request.timeout.ms":
            out["request_timeout_ms"] = int(value)
        elif key == "ssl.truststore.password":
            pass  # PEM truststores have no password
        elif key not in _IGNORED_KEYS:
            unsupported.append(key)
    if unsupported:
        raise ConnectionSettingsError(
            f"{source}: unsupported client properties {', '.join(sorted(unsupported))} "
            "(kafka-python cannot honour them; supported: bootstrap.servers, security.protocol, "
            "sasl.mechanism, sasl.jaas.config, ssl.truststore.location, ssl.keystore.location "
            "(PEM), ssl.key.password, ssl.endpoint.identification.algorithm, client.id, "
            "request.timeout.ms)"
        )
    return out


def _require_pem(props: Mapping[str, str], prefix: str, location: str, source: str) -> None:
    kind = props.get(f"{prefix}.type", "").upper()
    if kind == "PEM" or (not kind and location.lower().endswith((".pem", ".crt"))):
        return
    raise ConnectionSettingsError(
        f"{source}: {prefix}.location must be a PEM file (set {prefix}.type=PEM); "
        "kafka-python cannot read JKS or PKCS12 stores. Convert with "
        "`keytool -exportcert -rfc` or `openssl pkcs12 -nodes`."
    )


def load_connection_settings(
    *,
    bootstrap_server: str | None = None,
    command_config: str | Path | None = None,
    env: Mapping[str, str] | None = None,
) -> ConnectionSettings:
    """Merge the properties file, the environment and the flags.

    Args:
        bootstrap_server: ``--bootstrap-server`` (wins over everything).
        command_config: path of a Kafka client properties file.
        env: environment (default ``os.environ``).

    Raises:
        ConnectionSettingsError: no bootstrap server anywhere, an unreadable or
            unsupported properties file, an unknown security protocol or SASL
            mechanism, or SASL without credentials.
    """
    env = os.environ if env is None else env
    values: dict[str, Any] = {}
    warnings: list[str] = []
    if command_config:
        values.update(_from_properties(Path(command_config)))
        if values.get("sasl_password") or values.get("ssl_password"):
            warnings += filter(None, [exposed_secret_warning(Path(command_config))])
    for var, name in (
        (ENV_BOOTSTRAP, "bootstrap_servers"),
        (ENV_SASL_USERNAME, "sasl_username"),
        (ENV_SASL_PASSWORD, "sasl_password"),
        (ENV_SSL_KEY_PASSWORD, "ssl_password"),
    ):
        if env.get(var):
            values[name] = env[var]
    if bootstrap_server:
        values["bootstrap_servers"] = bootstrap_server
    if not values.get("bootstrap_servers"):
        raise ConnectionSettingsError(
            "no bootstrap server: pass --bootstrap-server HOST:PORT, set "
            f"{ENV_BOOTSTRAP}, or put bootstrap.servers in the --command-config file"
        )
    settings = ConnectionSettings(**values, warnings=tuple(warnings))
    if settings.security_protocol not in _PROTOCOLS:
        raise ConnectionSettingsError(
            f"unknown security.protocol {settings.security_protocol!r} "
            f"(one of {', '.join(sorted(_PROTOCOLS))})"
        )
    if settings.security_protocol.startswith("SASL"):
        mech = settings.sasl_mechanism or "GSSAPI"
        if mech not in _MECHANISMS:
            raise ConnectionSettingsError(
                f"unsupported sasl.mechanism {mech!r} (one of {', '.join(sorted(_MECHANISMS))})"
            )
        settings = replace(settings, sasl_mechanism=mech)
        if mech != "GSSAPI" and not (settings.sasl_username and settings.sasl_password):
            raise ConnectionSettingsError(
                f"SASL {mech} needs a username and password: sasl.jaas.config in the "
                f"--command-config file, or {ENV_SASL_USERNAME} and {ENV_SASL_PASSWORD}"
            )
    return settings


def exposed_secret_warning(path: Path) -> str | None:
    """A warning when ``path``, which holds a secret, can be read by its
    group or by others (as ssh refuses such key files), else ``None``."""
    try:
        mode = path.stat().st_mode & 0o777
    except OSError:
        return None
    if not mode & 0o077:
        return None
    return (
        f"{path} holds a secret but is readable by its group or others (mode {mode:04o}): "
        f"restrict it with chmod 600 {path}"
    )


_REDACTED: set[str] = set()


def _install_record_factory() -> None:
    previous = logging.getLogRecordFactory()

    def factory(*args: Any, **kwargs: Any) -> logging.LogRecord:
        record = previous(*args, **kwargs)
        if _REDACTED:
            message = record.getMessage()
            if any(secret in message for secret in _REDACTED):
                for secret in _REDACTED:
                    message = message.replace(secret, "***")
                record.msg, record.args = message, None
        return record

    logging.setLogRecordFactory(factory)


def redact_secrets_in_logs(settings: ConnectionSettings) -> None:
    """Keep ``settings``' secrets out of every log record, whoever logs it.

    kafka-python logs its whole configuration (password included) at DEBUG
    when a client starts; a log-record factory rewrites such records when they
    are made, before any filter or handler sees them.
    """
    if not settings.secrets:
        return
    if not _REDACTED:
        _install_record_factory()
    _REDACTED.update(settings.secrets)
