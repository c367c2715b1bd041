"""Cluster profiles (quotaform.cluster.profiles), the multi-cluster report
(quotaform.plan.multicluster and its renderings), and the CLI's option checks
that need no broker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from quotaform.app.plan import plan_clusters
from quotaform.cli.app import app
from quotaform.cluster.profiles import (
    ClusterTarget,
    find_config_file,
    load_cluster_profiles,
    load_required_profiles,
    resolve_settings,
    resolve_target,
)
from quotaform.errors import (
    ClusterConfigError,
    ConnectionSettingsError,
    ManifestError,
    plan_exit_code,
)
from quotaform.formats.multicluster import MultiClusterDocument, render_multi_json
from quotaform.formats.plan import PlanDocument
from quotaform.kafka.entity import Entity
from quotaform.manifest import load_manifests
from quotaform.plan.model import EntityChange, Plan
from quotaform.plan.multicluster import ClusterPlan, MultiClusterPlan
from quotaform.plan.review import PlanReview
from quotaform.plan.state import ChangeBudget
from quotaform.render.multicluster import (
    multi_summary_line,
    render_multi_markdown,
    render_multi_text,
)

MULTI = Path(__file__).resolve().parents[1] / "integration" / "fixtures" / "multi-cluster"

PROFILES = """\
clusters:
  prod-eu:
    bootstrapServers: kafka-eu-1:9093,kafka-eu-2:9093
    commandConfig: config/prod-eu.properties
    clusterId: MkU3OEVBNTcwNTJENDM2Qk
    securityProtocol: SASL_SSL
    saslMechanism: SCRAM-SHA-512
    saslUsernameEnv: PROD_EU_QUOTA_USER
    saslPasswordEnv: PROD_EU_QUOTA_PASSWORD
  prod-us:
    bootstrapServers: kafka-us-1:9093
    securityProtocol: SASL_SSL
    saslMechanism: SCRAM-SHA-256
    saslUsername: quota-admin
    saslPasswordFile: secrets/prod-us
  sandbox:
    bootstrapServers: 127.0.0.1:9092
"""


HEADER_SANDBOX = """\
apiVersion: quotaform.io/v1
kind: ClientQuotas
metadata: {cluster: sandbox}
spec:
  scope: [{shape: user}]
  quotas:
    - entity: {user: alice}
      values: {producer_byte_rate: 10mb}
"""


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def profiles_file(tmp_path: Path) -> Path:
    path = write(tmp_path / "repo" / "quotaform.clusters.yaml", PROFILES)
    write(path.parent / "config" / "prod-eu.properties", "ssl.endpoint.identification.algorithm=\n")
    write(path.parent / "secrets" / "prod-us", "pa55-from-file\n")
    return path


# ----------------------------------------------------------------- parsing


def test_profiles_are_parsed_and_paths_are_relative_to_the_file(profiles_file: Path) -> None:
    profiles = load_cluster_profiles(profiles_file)
    assert profiles.names == ("prod-eu", "prod-us", "sandbox")
    eu = profiles.get("prod-eu")
    assert eu.bootstrap_servers == "kafka-eu-1:9093,kafka-eu-2:9093"
    assert eu.command_config == profiles_file.parent / "config" / "prod-eu.properties"
    assert eu.cluster_id == "MkU3OEVBNTcwNTJENDM2Qk"
    assert (eu.sasl_username_env, eu.sasl_password_env) == (
        "PROD_EU_QUOTA_USER",
        "PROD_EU_QUOTA_PASSWORD",
    )
    assert eu.source == f"{profiles_file}:2"
    assert profiles.get("prod-us").sasl_password_file == profiles_file.parent / "secrets/prod-us"
    assert profiles.get("sandbox").command_config is None


@pytest.mark.parametrize(
    ("key", "line"),
    [("saslPassword", 4), ("password", 4), ("sslKeyPassword", 4), ("saslJaasConfig", 4)],
)
def test_an_inline_secret_is_refused_with_file_line_and_field(
    tmp_path: Path, key: str, line: int
) -> None:
    path = write(
        tmp_path / "c.yaml",
        f"clusters:\n  eu:\n    bootstrapServers: b:9092\n    {key}: hunter2\n",
    )
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_profiles(path)
    message = str(info.value)
    assert f"{path}:{line}: clusters.eu.{key}: a secret must not be written in this file" in (
        message
    )
    assert "saslPasswordEnv" in message
    assert "hunter2" not in message
    assert "unknown field" not in message  # one problem per key, not two


def test_a_secret_pasted_as_an_env_var_name_is_refused_without_echoing_it(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.yaml",
        "clusters:\n  eu:\n    bootstrapServers: b:9092\n    saslPasswordEnv: 'p@ss w0rd!'\n",
    )
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_profiles(path)
    assert "NAME of an environment variable" in str(info.value)
    assert "p@ss" not in str(info.value)


def test_every_problem_is_reported_with_its_line(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.yaml",
        "clusters:\n"
        "  eu:\n"
        "    bootstrapServer: b:9092\n"  # 3: typo, and bootstrapServers missing
        "  us:\n"
        "    bootstrapServers: b:9092\n"
        "    securityProtocol: SASL_SSLL\n",  # 6
    )
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_profiles(path)
    lines = str(info.value).splitlines()
    assert lines == [
        f"{path}:2: clusters.eu.bootstrapServers: required field is missing",
        f"{path}:3: clusters.eu.bootstrapServer: unknown field: did you mean "
        "bootstrapServers? allowed: bootstrapServers, commandConfig, clusterId, "
        "securityProtocol, saslMechanism, saslUsername, saslUsernameEnv, saslPasswordEnv, "
        "saslPasswordFile, superUsers",
        f"{path}:6: clusters.us.securityProtocol: expected 'PLAINTEXT', 'SSL', "
        "'SASL_PLAINTEXT' or 'SASL_SSL'",
    ]


def test_problems_in_several_profiles_and_at_the_top_are_all_reported(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.yaml",
        "cluster: x\n"  # 1: a typo of the only top-level key
        "clusters:\n"
        "  eu:\n"
        "    bootstrapServers: 9092\n"  # 4
        "    saslMechanism: PLAIN2\n"  # 5
        "  us: {bootstrapServers: 'b:9092', clusterId: ''}\n"  # 6
        "  ap: []\n",  # 7
    )
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_profiles(path)
    assert str(info.value).splitlines() == [
        f"{path}:1: cluster: unknown field: did you mean clusters? allowed: clusters",
        f"{path}:4: clusters.eu.bootstrapServers: expected a string",
        f"{path}:5: clusters.eu.saslMechanism: expected 'PLAIN', 'SCRAM-SHA-256', "
        "'SCRAM-SHA-512' or 'GSSAPI'",
        f"{path}:6: clusters.us.clusterId: must not be empty",
        f"{path}:7: clusters.ap: expected a mapping",
    ]
    assert "PLAIN2" not in str(info.value)  # values are never quoted back


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("clusters: {}\n", ":1: clusters: must not be empty"),
        ("clusters:\n  eu:\n", ":2: clusters.eu: expected a mapping"),
        (
            "clusters:\n  eu: {bootstrapServers: 9092}\n",
            ":2: clusters.eu.bootstrapServers: expected a string",
        ),
        ("- a\n", ": (document): expected a mapping with a clusters key"),
        ("clusters:\n  eu: {bootstrapServers: a}\n  eu: {bootstrapServers: b}\n", ":3: (yaml)"),
        ('clusters:\n  "*": {bootstrapServers: a}\n', ":2: clusters.*: not a usable cluster name"),
        (
            "clusters:\n  eu: {bootstrapServers: a, saslPasswordEnv: A, saslPasswordFile: f}\n",
            ":2: clusters.eu: give saslPasswordEnv or saslPasswordFile, not both",
        ),
    ],
)
def test_invalid_files(tmp_path: Path, text: str, expected: str) -> None:
    path = write(tmp_path / "c.yaml", text)
    with pytest.raises(ClusterConfigError) as info:
        load_cluster_profiles(path)
    assert f"{path}{expected}" in str(info.value)


def test_an_unknown_profile_names_the_known_ones(profiles_file: Path) -> None:
    with pytest.raises(ClusterConfigError, match="did you mean prod-eu\\? known clusters: "):
        load_cluster_profiles(profiles_file).get("prod-eux")


# ----------------------------------------------------------------- resolving


def test_secrets_come_from_the_named_environment_variables(profiles_file: Path) -> None:
    env = {"PROD_EU_QUOTA_USER": "quota-eu", "PROD_EU_QUOTA_PASSWORD": "s3cret-eu"}
    settings = resolve_settings(load_cluster_profiles(profiles_file).get("prod-eu"), env=env)
    assert settings.bootstrap_servers == "kafka-eu-1:9093,kafka-eu-2:9093"
    assert (settings.security_protocol, settings.sasl_mechanism) == ("SASL_SSL", "SCRAM-SHA-512")
    assert (settings.sasl_username, settings.sasl_password) == ("quota-eu", "s3cret-eu")
    assert settings.ssl_check_hostname is False  # from its commandConfig file
    assert "s3cret" not in repr(settings)
    assert "s3cret" not in str(settings.describe())


def test_the_password_comes_from_the_named_file(profiles_file: Path) -> None:
    settings = resolve_settings(load_cluster_profiles(profiles_file).get("prod-us"), env={})
    assert (settings.sasl_username, settings.sasl_password) == ("quota-admin", "pa55-from-file")


def test_a_missing_environment_variable_is_named(profiles_file: Path) -> None:
    eu = load_cluster_profiles(profiles_file).get("prod-eu")
    with pytest.raises(ClusterConfigError) as info:
        resolve_settings(eu, env={"PROD_EU_QUOTA_USER": "quota-eu"})
    assert str(info.value) == (
        f"cluster 'prod-eu' ({profiles_file}:2): environment variable "
        "PROD_EU_QUOTA_PASSWORD named by saslPasswordEnv is not set"
    )
    with pytest.raises(ClusterConfigError, match="PROD_EU_QUOTA_USER named by saslUsernameEnv is"):
        resolve_settings(eu, env={"PROD_EU_QUOTA_USER": "", "PROD_EU_QUOTA_PASSWORD": "x"})


def test_a_missing_password_file_is_named(profiles_file: Path) -> None:
    (profiles_file.parent / "secrets" / "prod-us").unlink()
    with pytest.raises(ClusterConfigError, match=r"saslPasswordFile .*prod-us: cannot read"):
        resolve_settings(load_cluster_profiles(profiles_file).get("prod-us"), env={})


def test_the_global_quotaform_variables_do_not_leak_into_a_profile(profiles_file: Path) -> None:
    env = {
        "QUOTAFORM_BOOTSTRAP_SERVER": "elsewhere:9092",
        "QUOTAFORM_SASL_USERNAME": "global",
        "QUOTAFORM_SASL_PASSWORD": "global-secret",
    }
    settings = resolve_settings(load_cluster_profiles(profiles_file).get("sandbox"), env=env)
    assert settings.bootstrap_servers == "127.0.0.1:9092"
    assert (settings.sasl_username, settings.sasl_password) == (None, None)


def test_sasl_shortcut_without_credentials_is_an_error(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.yaml",
        "clusters:\n  eu:\n    bootstrapServers: b:9092\n    securityProtocol: SASL_SSL\n"
        "    saslMechanism: PLAIN\n",
    )
    with pytest.raises(ConnectionSettingsError, match=r"cluster 'eu' .*needs a username and"):
        resolve_settings(load_cluster_profiles(path).get("eu"), env={})


def test_a_missing_command_config_names_the_profile(tmp_path: Path) -> None:
    path = write(
        tmp_path / "c.yaml",
        "clusters:\n  eu:\n    bootstrapServers: b:9092\n    commandConfig: nope.properties\n",
    )
    with pytest.raises(ConnectionSettingsError, match=r"cluster 'eu' .*cannot read"):
        resolve_settings(load_cluster_profiles(path).get("eu"), env={})


# ----------------------------------------------------------------- choosing a target


def test_the_config_file_is_found_by_flag_or_in_the_current_directory(
    profiles_file: Path, tmp_path: Path
) -> None:
    assert find_config_file(None, cwd=profiles_file.parent) == profiles_file
    assert find_config_file(None, cwd=tmp_path) is None
    assert find_config_file(profiles_file, cwd=tmp_path) == profiles_file
    with pytest.raises(ClusterConfigError, match="cluster profiles file not found"):
        find_config_file(tmp_path / "missing.yaml")
    with pytest.raises(ClusterConfigError, match="pass --config FILE, set QUOTAFORM_CONFIG"):
        load_required_profiles(None, cwd=tmp_path)


def test_resolve_target_with_and_without_a_profile(profiles_file: Path) -> None:
    target = resolve_target("sandbox", profiles_file, None, None, env={})
    assert (target.cluster, target.cluster_id) == ("sandbox", None)
    assert target.settings.bootstrap_servers == "127.0.0.1:9092"
    env = {"PROD_EU_QUOTA_USER": "u", "PROD_EU_QUOTA_PASSWORD": "p"}
    assert resolve_target("prod-eu", profiles_file, None, None, env=env).cluster_id == (
        "MkU3OEVBNTcwNTJENDM2Qk"
    )
    flags_only = resolve_target(None, profiles_file, "192.0.2.1:9092", None, env={})
    assert (flags_only.cluster, flags_only.settings.bootstrap_servers) == (None, "192.0.2.1:9092")
    with pytest.raises(ClusterConfigError, match="drop --bootstrap-server"):
        resolve_target("sandbox", profiles_file, "192.0.2.1:9092", None, env={})


def test_the_profile_of_the_cluster_the_manifests_name_is_used_without_flags(
    profiles_file: Path, tmp_path: Path
) -> None:
    # Beside the manifests (not in the current directory) and no connection flag:
    # the one cluster the manifests name picks its profile.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def resolve(implied: str, env: dict[str, str]) -> ClusterTarget:
        # No flags at all, run from a folder without a profiles file.
        return resolve_target(
            None, None, None, None, implied=implied, near=[profiles_file.parent], env=env,
            cwd=elsewhere,
        )  # fmt: skip

    found = resolve("sandbox", {})
    assert (found.cluster, found.settings.bootstrap_servers) == ("sandbox", "127.0.0.1:9092")
    # A flag or QUOTAFORM_BOOTSTRAP_SERVER wins over the implied profile.
    flagged = resolve("sandbox", {"QUOTAFORM_BOOTSTRAP_SERVER": "192.0.2.1:9092"})
    assert (flagged.cluster, flagged.settings.bootstrap_servers) == (None, "192.0.2.1:9092")
    # A cluster without a profile: the error names the profiles there are.
    with pytest.raises(ConnectionSettingsError) as caught:
        resolve("prod-ap", {})
    assert str(caught.value) == (
        f"no bootstrap server: pass --cluster NAME to use a profile of {profiles_file} "
        "(prod-eu, prod-us, sandbox); it has none for cluster 'prod-ap', or "
        "--bootstrap-server HOST:PORT (or QUOTAFORM_BOOTSTRAP_SERVER)"
    )


def test_the_profiles_file_beside_manifests_is_not_read_as_one(tmp_path: Path) -> None:
    write(tmp_path / "quotaform.clusters.yaml", PROFILES)
    write(tmp_path / "a.yaml", HEADER_SANDBOX)
    assert load_manifests([tmp_path]).cluster == "sandbox"
    with pytest.raises(ManifestError, match="this is the cluster profiles file, not a manifest"):
        load_manifests([tmp_path / "quotaform.clusters.yaml"])


def test_all_clusters_needs_a_profile_for_every_named_cluster(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "clusters:\n  us: {bootstrapServers: '192.0.2.1:9092'}\n")
    with pytest.raises(ClusterConfigError, match=r"no profile for cluster\(s\) eu named by"):
        plan_clusters([MULTI], load_cluster_profiles(path))


# ----------------------------------------------------------------- the CLI, no broker

runner = CliRunner()


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--all-clusters", "--cluster", "eu"], "drop --cluster"),
        (["--all-clusters", "--bootstrap-server", "192.0.2.1:9092"], "drop --bootstrap-server"),
        (["--all-clusters", "--out", "plan.json"], "drop --out"),
        (["--cluster", "eu", "--bootstrap-server", "192.0.2.1:9092"], "drop --bootstrap-server"),
        (["--cluster", "eu"], "no cluster profiles"),
        (["--cluster", "eu", "--config", "missing.yaml"], "profiles file not found"),
        # Several clusters and no --cluster: the clusters are named, before any connection.
        ([], "the manifests name 2 clusters (eu, us): choose one with --cluster NAME"),
    ],
)
def test_plan_option_conflicts_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: list[str], expected: str
) -> None:
    monkeypatch.chdir(tmp_path)
    for var in ("QUOTAFORM_CONFIG", "QUOTAFORM_BOOTSTRAP_SERVER", "QUOTAFORM_COMMAND_CONFIG"):
        monkeypatch.delenv(var, raising=False)
    result = runner.invoke(app, ["plan", str(MULTI), "--detailed-exitcode", *extra])
    assert result.exit_code == 1, result.output
    assert expected in result.output


def test_validate_one_or_every_cluster_the_set_names() -> None:
    several = runner.invoke(app, ["validate", str(MULTI)])
    assert several.exit_code == 1
    assert "choose one with --cluster NAME" in several.output
    result = runner.invoke(app, ["validate", str(MULTI), "--all-clusters"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "Valid: 3 entities for cluster 'eu' in 2 scope rule(s).",
        "Valid: 5 entities for cluster 'us' in 2 scope rule(s).",
    ]
    one = runner.invoke(app, ["validate", str(MULTI), "--cluster", "us"])
    assert one.stdout.splitlines() == ["Valid: 5 entities for cluster 'us' in 2 scope rule(s)."]
    unknown = runner.invoke(app, ["validate", str(MULTI), "--cluster", "ap"])
    assert unknown.exit_code == 1
    assert 'no manifest names cluster "ap" (the set names eu, us)' in unknown.output
    both = runner.invoke(app, ["validate", str(MULTI), "--all-clusters", "--cluster", "eu"])
    assert both.exit_code == 1
    assert "not both" in both.output


# ----------------------------------------------------------------- the combined report


def _plan(cluster: str, *, changes: bool) -> tuple[Plan, PlanReview]:
    entity = Entity.of(user="mc-orders")
    after = {"producer_byte_rate": 2048.0 if changes else 1024.0}
    change = EntityChange.between(entity, {"producer_byte_rate": 1024.0}, after, source="eu.yaml:8")
    plan = Plan(cluster=cluster, cluster_id="AAAAAAAAAAAAAAAAAAAAAA", changes=(change,))
    return plan, PlanReview(budget=ChangeBudget().resolved(), fallbacks={})


def _cluster(name: str, *, changes: bool) -> ClusterPlan:
    plan, review = _plan(name, changes=changes)
    return ClusterPlan(name, plan=plan, review=review)


REPORT = MultiClusterPlan.build(
    [
        _cluster("us", changes=False),
        _cluster("eu", changes=True),
        ClusterPlan("ap", error="cannot reach Kafka at 192.0.2.1:9092 (PLAINTEXT)"),
    ]
)


def _exit_code(report: MultiClusterPlan, *, detailed: bool) -> int:
    return plan_exit_code(
        failed=bool(report.failed), changes=bool(report.with_changes), detailed=detailed
    )


def test_counts_and_exit_codes() -> None:
    assert [c.cluster for c in REPORT.clusters] == ["ap", "eu", "us"]
    assert (REPORT.with_changes, REPORT.in_sync, REPORT.failed) == (1, 1, 1)
    assert multi_summary_line(REPORT) == "Clusters: 1 with changes, 1 in sync, 1 failed."
    assert _exit_code(REPORT, detailed=True) == 1
    assert _exit_code(REPORT, detailed=False) == 1
    ok = MultiClusterPlan.build(REPORT.clusters[1:])
    assert (_exit_code(ok, detailed=True), _exit_code(ok, detailed=False)) == (2, 0)
    synced = MultiClusterPlan.build(REPORT.clusters[2:])
    assert _exit_code(synced, detailed=True) == 0
    with pytest.raises(ValueError, match="exactly one"):
        ClusterPlan("x")
    with pytest.raises(ValueError, match="comes with its review"):
        ClusterPlan("x", plan=_plan("x", changes=True)[0])
    with pytest.raises(ValueError, match="twice"):
        MultiClusterPlan.build([REPORT.clusters[0], REPORT.clusters[0]])


def test_text_has_a_section_per_cluster_and_the_summary_last() -> None:
    text = render_multi_text(REPORT).plain
    assert text.index("=== cluster ap ===") < text.index("=== cluster eu ===")
    assert text.index("=== cluster eu ===") < text.index("=== cluster us ===")
    assert "Failed: cannot reach Kafka at 192.0.2.1:9092" in text
    assert "~ producer_byte_rate = 1KiB -> 2KiB" in text
    assert 'cluster "us" (id AAAAAAAAAAAAAAAAAAAAAA): No changes.' in text
    assert text.rstrip().splitlines()[-1] == "Clusters: 1 with changes, 1 in sync, 1 failed."


def test_markdown_has_a_section_per_cluster() -> None:
    md = render_multi_markdown(REPORT)
    assert md.startswith("## quotaform plan: 3 clusters\n\n**Clusters: 1 with changes")
    for name in ("ap", "eu", "us"):
        assert f"### quotaform plan: `{name}`" in md
    assert "> cannot reach Kafka at 192.0.2.1:9092 (PLAINTEXT)" in md


def test_json_holds_each_plan_document_or_its_error() -> None:
    doc = json.loads(render_multi_json(REPORT))
    assert doc["format_version"] == 1
    assert list(doc["clusters"]) == ["ap", "eu", "us"]
    assert doc["clusters"]["ap"] == {"error": "cannot reach Kafka at 192.0.2.1:9092 (PLAINTEXT)"}
    eu = PlanDocument.model_validate(doc["clusters"]["eu"])
    assert (eu.cluster, eu.summary.update) == ("eu", 1)
    MultiClusterDocument.model_validate(doc)
