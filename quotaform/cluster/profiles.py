"""Connection profiles per cluster: ``quotaform.clusters.yaml``.

One file names how to reach each cluster a manifest set can target, so
``plan --cluster prod-eu`` needs no connection flags::

    clusters:
      prod-eu:
        bootstrapServers: kafka-eu-1:9093,kafka-eu-2:9093
        commandConfig: config/prod-eu.properties   # optional, relative to this file
        clusterId: MkU3OEVBNTcwNTJENDM2Qk          # optional, checked on connect
        securityProtocol: SASL_SSL                 # optional shortcuts
        saslMechanism: SCRAM-SHA-512
        saslUsernameEnv: PROD_EU_QUOTA_USER        # secrets: a variable's NAME ...
        saslPasswordFile: /run/secrets/prod-eu     # ... or a file's path
        superUsers: [User:admin]                   # optional: the brokers' super.users

The file is meant to be committed, so it never holds a secret: keys such as
``saslPassword`` or ``password`` are refused with their file and line, and the
``*Env`` fields must hold an environment variable's name. Secrets are read
when a profile is resolved (:func:`resolve_settings`), from the environment
or the named file, and go only into :class:`~quotaform.cluster.wire.ConnectionSettings`.

The file is found at ``--config FILE``, else ``$QUOTAFORM_CONFIG``, else
``quotaform.clusters.yaml`` in the current directory, else beside the
manifests (in a directory given as manifests, or beside a manifest file).

Every command selects its cluster the same way (:func:`resolve_target`):
``--cluster NAME`` takes that profile; connection flags (or
``QUOTAFORM_BOOTSTRAP_SERVER``) connect directly; with neither, the cluster
the manifests name is looked up in the profiles file.
"""

from __future__ import annotations

import difflib
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, model_validator
from ruamel.yaml.error import YAMLError
from ruamel.yaml.nodes import Node

from quotaform.cluster.wire.connection import (
    ENV_BOOTSTRAP,
    ENV_SASL_PASSWORD,
    ENV_SASL_USERNAME,
    ConnectionSettings,
    exposed_secret_warning,
    load_connection_settings,
)
from quotaform.errors import ClusterConfigError, ConnectionSettingsError, InputError
from quotaform.inputs.files import read_text
from quotaform.inputs.limits import LIMITS
from quotaform.inputs.yamlsource import Loc, compose_documents, describe_yaml_error, locate
from quotaform.kafka.names import parse_principal
from quotaform.manifest.files import PROFILES_FILE
from quotaform.manifest.pydantic_errors import Wording, validation_problems

__all__ = [
    "DEFAULT_CONFIG_FILE",
    "ENV_CONFIG",
    "ClusterProfile",
    "ClusterProfiles",
    "ClusterTarget",
    "find_config_file",
    "load_cluster_profiles",
    "load_required_profiles",
    "profile_target",
    "resolve_settings",
    "resolve_target",
]

#: Looked for in the current directory when neither ``--config`` nor
#: ``$QUOTAFORM_CONFIG`` names a file.
DEFAULT_CONFIG_FILE = PROFILES_FILE
ENV_CONFIG = "QUOTAFORM_CONFIG"

_log = logging.getLogger(__name__)

_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_CLUSTER_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# Key names that would carry a secret's value. ``*Env`` / ``*File`` keys name
# where the secret is and are fine.
_SECRET_WORDS = ("password", "secret", "jaas", "token", "credential")


# --------------------------------------------------------------- the file's models


#: A principal written ``Type:name`` (``User:admin``), kept as ``Type:name``.
_Principal = Annotated[str, AfterValidator(lambda text: ":".join(parse_principal(text)))]


class _ProfileModel(BaseModel):
    """One cluster's connection profile (the file's boundary model)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, strict=True)

    bootstrap_servers: str = Field(alias="bootstrapServers", min_length=1)
    command_config: str | None = Field(default=None, alias="commandConfig", min_length=1)
    cluster_id: str | None = Field(default=None, alias="clusterId", min_length=1)
    security_protocol: Literal["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"] | None = Field(
        default=None, alias="securityProtocol"
    )
    sasl_mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "GSSAPI"] | None = Field(
        default=None, alias="saslMechanism"
    )
    sasl_username: str | None = Field(default=None, alias="saslUsername", min_length=1)
    sasl_username_env: str | None = Field(default=None, alias="saslUsernameEnv")
    sasl_password_env: str | None = Field(default=None, alias="saslPasswordEnv")
    sasl_password_file: str | None = Field(default=None, alias="saslPasswordFile", min_length=1)
    super_users: list[_Principal] | None = Field(default=None, alias="superUsers")

    @model_validator(mode="after")
    def _one_source_each(self) -> _ProfileModel:
        if self.sasl_username is not None and self.sasl_username_env is not None:
            raise ValueError("give saslUsername or saslUsernameEnv, not both")
        if self.sasl_password_env is not None and self.sasl_password_file is not None:
            raise ValueError("give saslPasswordEnv or saslPasswordFile, not both")
        for name in (self.sasl_username_env, self.sasl_password_env):
            # Never echo the value: it may be the secret itself, pasted by mistake.
            if name is not None and not _ENV_NAME.match(name):
                raise ValueError(
                    "saslUsernameEnv and saslPasswordEnv take the NAME of an environment "
                    "variable (letters, digits, _), never the secret itself"
                )
        return self


class _FileModel(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", frozen=True, strict=True)

    clusters: dict[str, _ProfileModel] = Field(min_length=1)


# --------------------------------------------------------------- the values


@dataclass(frozen=True, slots=True)
class ClusterProfile:
    """How to reach one cluster; no secret values, only where they are.

    Attributes:
        name: the cluster's name, as manifests name it (``metadata.cluster``).
        bootstrap_servers: ``host:port[,host:port...]``.
        command_config: a Kafka client properties file, made absolute against
            the profiles file's directory; ``None`` when not given.
        cluster_id: the expected Kafka cluster id, ``None`` = not checked.
        security_protocol, sasl_mechanism: override the properties file's.
        sasl_username: a username written in the file (not a secret).
        sasl_username_env, sasl_password_env: names of environment variables.
        sasl_password_file: a file holding the password (absolute).
        source: ``path:line`` of the profile, for messages.
        super_users: ``superUsers``: the brokers' ``super.users`` principals
            (``User:admin``), which brokers do not reveal through
            DescribeConfigs; ``plan`` warns when a default user quota would
            throttle one.
        super_users_source: ``path:line`` of ``superUsers`` (empty when not given).
    """

    name: str
    bootstrap_servers: str
    command_config: Path | None = None
    cluster_id: str | None = None
    security_protocol: str | None = None
    sasl_mechanism: str | None = None
    sasl_username: str | None = None
    sasl_username_env: str | None = None
    sasl_password_env: str | None = None
    sasl_password_file: Path | None = None
    source: str = ""
    super_users: tuple[str, ...] = ()
    super_users_source: str = ""


@dataclass(frozen=True, slots=True)
class ClusterProfiles:
    """Every profile of one file, by cluster name (sorted)."""

    path: Path
    profiles: Mapping[str, ClusterProfile]

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.profiles)

    def get(self, name: str) -> ClusterProfile:
        """The profile of ``name``.

        Raises:
            ClusterConfigError: no such profile (the message lists the known ones).
        """
        try:
            return self.profiles[name]
        except KeyError:
            close = difflib.get_close_matches(name, self.names, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ClusterConfigError(
                f"{self.path}: no profile for cluster {name!r}: {hint}"
                f"known clusters: {', '.join(self.names)}"
            ) from None


@dataclass(frozen=True, slots=True)
class ClusterTarget:
    """Where a command connects and what it loads.

    Attributes:
        settings: the connection settings (secrets included, never printed).
        cluster: the selected cluster name for ``load_manifests(cluster=...)``;
            ``None`` without a profile (flags only), as before profiles.
        cluster_id: the profile's expected cluster id, ``None`` = not checked.
        super_users: the profile's ``superUsers`` (empty without a profile).
        super_users_source: where they are written (``path:line``), or empty.
    """

    settings: ConnectionSettings
    cluster: str | None = None
    cluster_id: str | None = None
    super_users: tuple[str, ...] = ()
    super_users_source: str = ""


# --------------------------------------------------------------- loading


def find_config_file(
    config: Path | None, *, cwd: Path | None = None, near: Sequence[Path] = ()
) -> Path | None:
    """The profiles file: ``config`` (``--config`` or ``$QUOTAFORM_CONFIG``, which
    must exist), else ``quotaform.clusters.yaml`` in ``cwd``, else beside the
    manifests ``near`` (in a given directory, or beside a given file), else ``None``.

    Raises:
        ClusterConfigError: ``config`` names a file that does not exist.
    """
    if config is not None:
        if not config.is_file():
            raise ClusterConfigError(f"{config}: cluster profiles file not found")
        return config
    folders = [cwd or Path.cwd()] + [p if p.is_dir() else p.parent for p in map(Path, near)]
    for folder in folders:
        candidate = folder / DEFAULT_CONFIG_FILE
        if candidate.is_file():
            return candidate
    return None


@dataclass(frozen=True, slots=True, order=True)
class _Problem:
    line: int
    text: str


def _problem(path: Path, node: Node, loc: Loc, message: str) -> _Problem:
    line, field = locate(node, loc)
    where = f"{path}:{line}" if line is not None else str(path)
    return _Problem(line or 0, f"{where}: {field}: {message}")


def _inline_secrets(root: Mapping[Any, Any]) -> list[tuple[int | str, ...]]:
    """Locations of keys (top level or in a profile) whose value would be a
    secret written in the file; ``*Env`` / ``*File`` keys only say where one is."""
    candidates: list[tuple[int | str, ...]] = [(k,) for k in root]
    clusters = root.get("clusters")
    if isinstance(clusters, Mapping):
        for name, profile in clusters.items():
            if isinstance(profile, Mapping):
                candidates += [("clusters", name, k) for k in profile]
    return [
        loc
        for loc in candidates
        if any(w in str(loc[-1]).lower() for w in _SECRET_WORDS)
        and not str(loc[-1]).endswith(("Env", "File"))
    ]


def _allowed_fields(loc: Loc) -> list[str]:
    """The keys allowed at the top of the file, or in a profile."""
    if len(loc) >= 2:
        return [f.alias or n for n, f in _ProfileModel.model_fields.items()]
    return ["clusters"]


#: Never a value in a message: a key written by mistake may hold a secret.
_WORDING = Wording(show_input=False, fields=_allowed_fields)


def load_cluster_profiles(path: Path) -> ClusterProfiles:
    """Read and validate a profiles file; nothing is resolved or connected.

    Relative ``commandConfig`` and ``saslPasswordFile`` paths are made
    absolute against the file's directory.

    Raises:
        ClusterConfigError: unreadable file, YAML errors, unknown or missing
            fields, inline secrets, bad cluster names; every problem at once.
    """
    root, node = _profiles_document(path)
    model = _validated(path, root, node)
    profiles = _profiles_of(path, node, model)
    return ClusterProfiles(path=path, profiles=MappingProxyType(profiles))


def _profiles_document(path: Path) -> tuple[Mapping[str, Any], Node]:
    """The profiles file's one document, as data and as the YAML node its
    line numbers come from.

    Raises:
        ClusterConfigError: unreadable file, YAML errors, not one mapping.
    """
    try:
        # A NUL is refused by the YAML reader itself, with its line.
        text = read_text(path, LIMITS["profiles"], nul=True)
    except InputError as exc:
        raise ClusterConfigError(str(exc)) from None
    try:
        documents = list(compose_documents(text))
    except YAMLError as exc:
        line, message = describe_yaml_error(exc, text)
        where = f"{path}:{line}" if line is not None else str(path)
        raise ClusterConfigError(f"{where}: (yaml): {message}") from exc
    root, node = documents[0] if len(documents) == 1 else (None, None)
    if not isinstance(root, Mapping) or node is None:
        raise ClusterConfigError(
            f"{path}: (document): expected a mapping with a clusters key, e.g. "
            "clusters: {prod-eu: {bootstrapServers: HOST:PORT}}"
        )
    return root, node


def _validated(path: Path, root: Mapping[str, Any], node: Node) -> _FileModel:
    """The profiles file's model: every problem at once (inline secrets,
    unknown or missing fields, bad cluster names), each with its line.

    Raises:
        ClusterConfigError: the problems.
    """
    problems: list[_Problem] = []
    secrets = _inline_secrets(root)
    for loc in secrets:
        problems.append(
            _problem(
                path,
                node,
                loc,
                "a secret must not be written in this file (it is meant to be committed): "
                "give the NAME of an environment variable with saslPasswordEnv, or a file "
                "with saslPasswordFile",
            )
        )
    try:
        model = _FileModel.model_validate(root)
    except ValidationError as exc:
        for found in validation_problems(
            exc,
            str(path),
            locate=lambda loc: locate(node, loc),
            wording=_WORDING,
            skip=lambda loc: any(loc[: len(s)] == s for s in secrets),  # reported above
        ):
            problems.append(_Problem(found.line or 0, str(found)))
        model = None
    if model is not None:
        for name in model.clusters:
            if name == "*" or not _CLUSTER_NAME.match(name):
                problems.append(
                    _problem(
                        path,
                        node,
                        ("clusters", name),
                        "not a usable cluster name (letters, digits, '.', '_', '-'; as "
                        "manifests name it in metadata.cluster)",
                    )
                )
    if problems:
        raise ClusterConfigError("\n".join(p.text for p in sorted(set(problems))))
    assert model is not None
    return model


def _profiles_of(path: Path, node: Node, model: _FileModel) -> dict[str, ClusterProfile]:
    """Each profile, relative paths made absolute against the file's
    directory, with where it was written."""
    base = path.parent

    def absolute(value: str | None) -> Path | None:
        return None if value is None else base / Path(value).expanduser()

    profiles = {
        name: ClusterProfile(
            name=name,
            bootstrap_servers=p.bootstrap_servers,
            command_config=absolute(p.command_config),
            cluster_id=p.cluster_id,
            security_protocol=p.security_protocol,
            sasl_mechanism=p.sasl_mechanism,
            sasl_username=p.sasl_username,
            sasl_username_env=p.sasl_username_env,
            sasl_password_env=p.sasl_password_env,
            sasl_password_file=absolute(p.sasl_password_file),
            source=f"{path}:{locate(node, ('clusters', name))[0] or 1}",
            super_users=tuple(p.super_users or ()),
            super_users_source=(
                f"{path}:{locate(node, ('clusters', name, 'superUsers'))[0] or 1}"
                if p.super_users is not None
                else ""
            ),
        )
        for name, p in sorted(model.clusters.items())
    }
    return profiles


# --------------------------------------------------------------- resolving


def _from_env(profile: ClusterProfile, field: str, var: str, env: Mapping[str, str]) -> str:
    value = env.get(var)
    if not value:
        state = "is empty" if value is not None else "is not set"
        raise ClusterConfigError(
            f"cluster {profile.name!r} ({profile.source}): environment variable {var} "
            f"named by {field} {state}"
        )
    return value


def _from_file(profile: ClusterProfile, path: Path) -> str:
    try:
        # A trailing newline is an editor's or `echo`'s, not part of the secret.
        value = read_text(path, LIMITS["secret"]).rstrip("\r\n")
    except InputError as exc:
        raise ClusterConfigError(
            f"cluster {profile.name!r} ({profile.source}): saslPasswordFile {exc}"
        ) from None
    if not value:
        raise ClusterConfigError(
            f"cluster {profile.name!r} ({profile.source}): saslPasswordFile {path} is empty"
        )
    return value


def resolve_settings(
    profile: ClusterProfile, *, env: Mapping[str, str] | None = None
) -> ConnectionSettings:
    """Connection settings for ``profile``: its properties file, then its
    shortcuts, then its secrets read from ``env`` (default ``os.environ``) or
    the named file.

    Only the profile's own sources count: the global ``QUOTAFORM_BOOTSTRAP_SERVER``
    and ``QUOTAFORM_SASL_*`` variables are ignored, so one exported variable
    cannot leak into every cluster (name it with ``saslPasswordEnv`` instead).

    Raises:
        ClusterConfigError: a named environment variable is unset or empty, the
            password file cannot be read or is empty.
        ConnectionSettingsError: the properties file is unreadable or
            unsupported, or SASL lacks a username or password.
    """
    env = os.environ if env is None else env
    secrets: dict[str, str] = {}
    exposed: str | None = None
    if profile.sasl_username_env is not None:
        secrets[ENV_SASL_USERNAME] = _from_env(
            profile, "saslUsernameEnv", profile.sasl_username_env, env
        )
    elif profile.sasl_username is not None:
        secrets[ENV_SASL_USERNAME] = profile.sasl_username
    if profile.sasl_password_env is not None:
        secrets[ENV_SASL_PASSWORD] = _from_env(
            profile, "saslPasswordEnv", profile.sasl_password_env, env
        )
    elif profile.sasl_password_file is not None:
        secrets[ENV_SASL_PASSWORD] = _from_file(profile, profile.sasl_password_file)
        exposed = exposed_secret_warning(profile.sasl_password_file)
    try:
        settings = load_connection_settings(
            bootstrap_server=profile.bootstrap_servers,
            command_config=profile.command_config,
            env=secrets,
        )
        if profile.security_protocol is not None or profile.sasl_mechanism is not None:
            # Checked again with the shortcuts in place (e.g. SASL needs credentials).
            settings = _recheck(
                replace(
                    settings,
                    security_protocol=profile.security_protocol or settings.security_protocol,
                    sasl_mechanism=profile.sasl_mechanism or settings.sasl_mechanism,
                )
            )
    except ConnectionSettingsError as exc:
        raise ConnectionSettingsError(
            f"cluster {profile.name!r} ({profile.source}): {exc}"
        ) from exc
    if exposed is not None:
        settings = replace(settings, warnings=(*settings.warnings, exposed))
    return settings


def _recheck(settings: ConnectionSettings) -> ConnectionSettings:
    if not settings.security_protocol.startswith("SASL"):
        return settings
    mechanism = settings.sasl_mechanism or "GSSAPI"
    if mechanism != "GSSAPI" and not (settings.sasl_username and settings.sasl_password):
        raise ConnectionSettingsError(
            f"SASL {mechanism} needs a username and password: saslUsernameEnv (or "
            "saslUsername) and saslPasswordEnv or saslPasswordFile, or sasl.jaas.config "
            "in the commandConfig file"
        )
    return replace(settings, sasl_mechanism=mechanism)


def resolve_target(
    cluster: str | None,
    config: Path | None,
    bootstrap_server: str | None,
    command_config: Path | None,
    *,
    implied: str | None = None,
    near: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> ClusterTarget:
    """What ``--cluster`` / ``--config`` / ``--bootstrap-server`` /
    ``--command-config`` select; the one rule of every command.

    1. ``cluster`` given: that profile of the profiles file, and no connection
       flag (one would silently point the cluster's manifests at another
       cluster).
    2. A connection flag, or ``QUOTAFORM_BOOTSTRAP_SERVER``: connect with the
       flags and variables, as without profiles (``cluster`` ``None``).
    3. Neither, and the manifests name one cluster (``implied``): its profile,
       when a profiles file (see :func:`find_config_file`; ``near`` are the
       manifest paths) has one.

    Raises:
        ClusterConfigError: ``--cluster`` with a connection flag, no profiles
            file, an invalid file, no such profile, unreadable secrets.
        ConnectionSettingsError: as :func:`quotaform.cluster.wire.load_connection_settings`;
            "no bootstrap server" names the profiles that could be used.
    """
    env = os.environ if env is None else env
    if cluster is None:
        flagged = bool(bootstrap_server or command_config or env.get(ENV_BOOTSTRAP))
        if not flagged:
            path = find_config_file(config, cwd=cwd, near=near)
            profiles = load_cluster_profiles(path) if path is not None else None
            if profiles is not None and implied is not None and implied in profiles.profiles:
                profile = profiles.profiles[implied]
                _log.info("cluster %r: connecting with its profile (%s)", implied, profile.source)
                return profile_target(profile, env)
            if profiles is not None:
                raise ConnectionSettingsError(
                    "no bootstrap server: pass --cluster NAME to use a profile of "
                    f"{profiles.path} ({', '.join(profiles.names)})"
                    + (f"; it has none for cluster {implied!r}" if implied else "")
                    + f", or --bootstrap-server HOST:PORT (or {ENV_BOOTSTRAP})"
                )
        settings = load_connection_settings(
            bootstrap_server=bootstrap_server, command_config=command_config, env=env
        )
        return ClusterTarget(settings)
    if bootstrap_server is not None or command_config is not None:
        raise ClusterConfigError(
            "--cluster takes the connection from its profile: drop --bootstrap-server / "
            "--command-config (and unset QUOTAFORM_BOOTSTRAP_SERVER / "
            "QUOTAFORM_COMMAND_CONFIG), or drop --cluster"
        )
    profile = load_required_profiles(config, cwd=cwd, near=near).get(cluster)
    return profile_target(profile, env)


def profile_target(
    profile: ClusterProfile, env: Mapping[str, str] | None = None
) -> ClusterTarget:
    """Where ``profile`` connects (its settings resolved from ``env``, default
    the process's environment), with its cluster id and super users.

    Raises:
        ConnectionSettingsError: as :func:`resolve_settings`.
    """
    return ClusterTarget(
        resolve_settings(profile, env=env),
        profile.name,
        profile.cluster_id,
        super_users=profile.super_users,
        super_users_source=profile.super_users_source,
    )


def load_required_profiles(
    config: Path | None, *, cwd: Path | None = None, near: Sequence[Path] = ()
) -> ClusterProfiles:
    """The profiles file, which must exist (for ``--cluster`` and ``--all-clusters``).

    Raises:
        ClusterConfigError: no file found, or it is invalid.
    """
    path = find_config_file(config, cwd=cwd, near=near)
    if path is None:
        raise ClusterConfigError(
            f"no cluster profiles: pass --config FILE, set {ENV_CONFIG}, or create "
            f"{DEFAULT_CONFIG_FILE} in the current directory or beside the manifests"
        )
    return load_cluster_profiles(path)
