"""Java, Maven and the Kafka jars the sandbox broker runs from.

The broker is plain ``kafka_2.13`` from Maven Central plus log4j2, and Kafka's
``kafka-tools`` jar alone (its own dependencies are the broker's; it brings
``JmxTool``, ``ProducerPerformance``, ``ConsumerPerformance``), resolved by
``mvn dependency:copy-dependencies`` into a per-version cache directory::

    <cache>/kafka-<version>/pom.xml
    <cache>/kafka-<version>/libs/*.jar
    <cache>/kafka-<version>/libs/.complete      # written last, before the rename;
                                                # names the set fetched (a cache of an
                                                # older set is fetched again)

``<cache>`` is ``$QUOTAFORM_CACHE_DIR``, else ``$XDG_CACHE_HOME/quotaform``, else
``~/.cache/quotaform``.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Callable, Sequence
from importlib import resources
from pathlib import Path

from quotaform.errors import SandboxError
from quotaform.sandbox.processes import run_build_tool, tail_text

__all__ = [
    "DEFAULT_KAFKA_VERSION",
    "JMX_EXPORTER_VERSION",
    "MIN_JAVA_MAJOR",
    "cache_root",
    "class_data_archive",
    "complete_marker",
    "ensure_jmx_exporter",
    "ensure_kafka_jars",
    "find_java",
    "find_maven",
    "kafka_java_command",
    "log4j2_config_path",
    "parse_java_major",
    "run_kafka_tool",
]

log = logging.getLogger(__name__)

#: The Kafka release the sandbox runs unless told otherwise (newest 4.x on Maven Central).
DEFAULT_KAFKA_VERSION = "4.3.1"

#: Kafka 4.x brokers and tools need Java 17 or newer.
MIN_JAVA_MAJOR = 17

_SLF4J_VERSION = "2.0.17"
_LOG4J_VERSION = "2.24.3"
_COMPLETE_MARKER = ".complete"
_MVN_TIMEOUT_S = 900
_OUTPUT_TAIL_LINES = 25

#: Command-line tools are short-lived: a small heap, serial GC and the C1 JIT only
#: start fastest. JVM warnings go to stderr so stdout stays parseable, and CDS
#: messages (archive missing or stale) are silenced: the JVM then just runs unshared.
FAST_START_JVM_OPTIONS = (
    "-XX:+UseSerialGC",
    "-XX:TieredStopAtLevel=1",
    "-Xshare:auto",
    "-Xlog:disable",
    "-Xlog:all=warning:stderr",
    "-Xlog:cds*=off:stderr",
)
_TOOL_JVM_OPTIONS = ("-Xmx256m", *FAST_START_JVM_OPTIONS)

_POM_TEMPLATE = """\
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.quotaform</groupId><artifactId>kafka-sandbox</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-api</artifactId><version>{slf4j}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>{kafka}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-core</artifactId><version>{log4j}</version></dependency>
    <dependency><groupId>org.apache.logging.log4j</groupId><artifactId>log4j-slf4j2-impl</artifactId><version>{log4j}</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>{kafka}</version>
      <exclusions><exclusion><groupId>*</groupId><artifactId>*</artifactId></exclusion></exclusions></dependency>
  </dependencies>
</project>
"""

#: The Prometheus JMX exporter release: ``jmx_prometheus_javaagent`` (in the
#: broker's JVM) and ``jmx_prometheus_httpserver`` (the same collector over
#: remote JMX), both self-contained (shaded) jars on Maven Central.
JMX_EXPORTER_VERSION = "1.0.1"
_JMX_EXPORTER_ARTIFACTS = ("jmx_prometheus_javaagent", "jmx_prometheus_httpserver")
_JMX_EXPORTER_POM = """\
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>dev.quotaform</groupId><artifactId>jmx-exporter</artifactId><version>1</version><packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_VM_INIT_ERROR = "Error occurred during initialization of VM"
_VERSION_RE = re.compile(r"^[0-9A-Za-z][0-9A-Za-z.\-]*$")
_JAVA_VERSION_RE = re.compile(r'version "([^"]+)"')


def cache_root() -> Path:
    """Return the quotaform cache directory (not created here).

    ``$QUOTAFORM_CACHE_DIR`` if set, else ``$XDG_CACHE_HOME/quotaform``, else
    ``~/.cache/quotaform``.
    """
    explicit = os.environ.get("QUOTAFORM_CACHE_DIR")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "quotaform"


def parse_java_major(version_output: str) -> int | None:
    """Return the major Java version from ``java -version`` output, or ``None``.

    ``openjdk version "17.0.15" 2025-04-15`` -> 17, ``java version "1.8.0_292"``
    -> 8, ``openjdk version "21" 2023-09-19`` -> 21.
    """
    match = _JAVA_VERSION_RE.search(version_output)
    if match is None:
        return None
    parts = re.split(r"[._+\-]", match.group(1))
    try:
        first = int(parts[0])
        return int(parts[1]) if first == 1 and len(parts) > 1 else first
    except ValueError:
        return None


def find_java() -> str:
    """Return the path of a ``java`` executable of version 17 or newer.

    ``$JAVA_HOME/bin/java`` when ``JAVA_HOME`` is set, else ``java`` on ``PATH``.

    Raises:
        SandboxError: no java found, it does not run, or it is older than 17.
    """
    java_home = os.environ.get("JAVA_HOME")
    if java_home:
        java = str(Path(java_home) / "bin" / "java")
        if not os.access(java, os.X_OK):
            raise SandboxError(
                f"JAVA_HOME is set to {java_home!r} but {java} is not an executable. "
                f"Point JAVA_HOME at a Java {MIN_JAVA_MAJOR}+ installation or unset it."
            )
    else:
        found = shutil.which("java")
        if found is None:
            raise SandboxError(
                f"Java (java) not found on PATH; the sandbox broker needs Java "
                f"{MIN_JAVA_MAJOR} or newer. Install it (e.g. apt-get install "
                f"openjdk-17-jre-headless) or set JAVA_HOME."
            )
        java = found
    _check_java_version(java)
    return java


@functools.lru_cache(maxsize=8)
def _check_java_version(java: str) -> None:
    try:
        proc = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise SandboxError(
            f"Could not run {java} -version ({exc}). Install Java {MIN_JAVA_MAJOR}+ "
            f"or point JAVA_HOME at a working one."
        ) from exc
    output = proc.stderr + proc.stdout
    major = parse_java_major(output)
    if proc.returncode != 0 or major is None:
        raise SandboxError(
            f"{java} -version failed or printed no version (exit {proc.returncode}): "
            f"{tail_text(output, _OUTPUT_TAIL_LINES)}. Install Java {MIN_JAVA_MAJOR}+ or set "
            "JAVA_HOME."
        )
    if major < MIN_JAVA_MAJOR:
        raise SandboxError(
            f"{java} is Java {major}; Kafka 4 needs Java {MIN_JAVA_MAJOR} or newer. "
            f"Install it (e.g. apt-get install openjdk-17-jre-headless) and put it "
            f"first on PATH or set JAVA_HOME."
        )


def find_maven() -> str:
    """Return the path of ``mvn`` on ``PATH``.

    Raises:
        SandboxError: ``mvn`` is not on ``PATH``.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise SandboxError(
            "Maven (mvn) not found on PATH; the sandbox fetches the Kafka jars from "
            "Maven Central with it. Install it, e.g. apt-get install maven "
            "(or brew install maven), and retry."
        )
    return mvn


def ensure_kafka_jars(
    version: str = DEFAULT_KAFKA_VERSION,
    *,
    cache_dir: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Path:
    """Return the directory holding the jars of Kafka ``version``, fetching them if needed.

    Jars are downloaded into a temporary sibling directory and renamed into
    place only when complete, so an interrupted download is never reused.
    Maven is needed only on a cold cache.

    Args:
        version: Kafka release, e.g. ``"4.3.1"``.
        cache_dir: cache root; ``None`` means :func:`cache_root`.
        on_progress: called with one human-readable line per step.

    Returns:
        ``<cache>/kafka-<version>/libs``, containing ``*.jar`` files.

    Raises:
        SandboxError: bad version string, ``mvn`` missing, or Maven failed.
    """
    if not _VERSION_RE.match(version):
        raise SandboxError(
            f"Invalid Kafka version {version!r}; expected e.g. {DEFAULT_KAFKA_VERSION}."
        )
    version_dir = (cache_dir or cache_root()) / f"kafka-{version}"
    libs = version_dir / "libs"
    pom_text = _pom(version)
    marker = complete_marker(version)
    if _marker(libs) == marker:
        return libs

    def check(staging: Path) -> str | None:
        if any(staging.glob("kafka_2.13-*.jar")):
            return None
        return (
            f"Maven finished but no kafka_2.13 jar landed in {staging}; "
            f"check org.apache.kafka:kafka_2.13:{version} exists on Maven Central."
        )

    _progress(on_progress, f"Fetching Kafka {version} jars from Maven Central ...")
    _fetch_with_maven(libs, pom_text, f"org.apache.kafka:kafka_2.13:{version}", marker, check=check)
    _progress(on_progress, f"Kafka {version} jars cached in {libs}")
    return libs


def ensure_jmx_exporter(
    version: str = JMX_EXPORTER_VERSION,
    *,
    cache_dir: Path | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> Path:
    """Return the folder holding the Prometheus JMX exporter's jars, fetching them if needed.

    ``io.prometheus.jmx:jmx_prometheus_javaagent`` and ``jmx_prometheus_httpserver``
    are fetched through Maven (``dependency:copy-dependencies``, no transitive
    dependencies: both are shaded) into a temporary sibling folder renamed into
    place when complete, like :func:`ensure_kafka_jars`::

        <cache>/jmx_exporter-<version>/jars/jmx_prometheus_javaagent-<version>.jar
        <cache>/jmx_exporter-<version>/jars/jmx_prometheus_httpserver-<version>.jar

    Args:
        version: the exporter release, e.g. ``"1.0.1"``.
        cache_dir: cache root; ``None`` means :func:`cache_root`.
        on_progress: called with one human-readable line per step.

    Returns:
        The ``jars`` folder.

    Raises:
        SandboxError: bad version string, ``mvn`` missing, or Maven failed.
    """
    if not _VERSION_RE.match(version):
        raise SandboxError(
            f"Invalid JMX exporter version {version!r}; expected e.g. {JMX_EXPORTER_VERSION}."
        )
    version_dir = (cache_dir or cache_root()) / f"jmx_exporter-{version}"
    jars = version_dir / "jars"
    marker = f"{version}\n"
    if _marker(jars) == marker:
        return jars
    dependencies = "\n".join(
        f"    <dependency><groupId>io.prometheus.jmx</groupId><artifactId>{artifact}</artifactId>"
        f"<version>{version}</version></dependency>"
        for artifact in _JMX_EXPORTER_ARTIFACTS
    )

    def check(staging: Path) -> str | None:
        missing = [
            a for a in _JMX_EXPORTER_ARTIFACTS if not (staging / f"{a}-{version}.jar").is_file()
        ]
        if not missing:
            return None
        return (
            f"Maven finished but {', '.join(missing)} did not land in {staging}; "
            f"check io.prometheus.jmx:{missing[0]}:{version} exists on Maven Central."
        )

    _progress(on_progress, f"Fetching the Prometheus JMX exporter {version} from Maven Central ...")
    _fetch_with_maven(
        jars,
        _JMX_EXPORTER_POM.format(dependencies=dependencies),
        f"io.prometheus.jmx:jmx_prometheus_javaagent:{version}",
        marker,
        check=check,
        transitive=False,
    )
    _progress(on_progress, f"JMX exporter {version} cached in {jars}")
    return jars


def _fetch_with_maven(
    dest: Path,
    pom_text: str,
    coords: str,
    marker: str,
    *,
    check: Callable[[Path], str | None],
    transitive: bool = True,
) -> None:
    """Fetch ``pom_text``'s dependencies with Maven into ``dest`` (a folder in
    its version folder): into a temporary sibling first, checked by ``check``
    (``None``: complete, else the error), marked complete with ``marker``,
    then renamed into place, so a reader never sees a half-filled folder and
    an interrupted fetch is never reused. An incomplete or older ``dest`` is
    moved aside first; another process finishing first is as good.

    Raises:
        SandboxError: ``mvn`` missing, Maven failed, or ``check``'s error.
    """
    mvn = find_maven()
    version_dir = dest.parent
    version_dir.mkdir(parents=True, exist_ok=True)
    pom = version_dir / "pom.xml"
    pom.write_text(pom_text, encoding="utf-8")
    staging = Path(tempfile.mkdtemp(prefix=f"{dest.name}.partial-", dir=version_dir))
    try:
        _run_maven(mvn, pom, staging, coords, transitive=transitive)
        problem = check(staging)
        if problem is not None:
            raise SandboxError(problem)
        (staging / _COMPLETE_MARKER).write_text(marker, encoding="utf-8")
        if dest.exists() and _marker(dest) != marker:
            aside = Path(tempfile.mkdtemp(prefix=f"{dest.name}.old-", dir=version_dir))
            with contextlib.suppress(OSError):
                dest.rename(aside / dest.name)
            shutil.rmtree(aside, ignore_errors=True)
        try:
            staging.rename(dest)
        except OSError:
            if _marker(dest) != marker:  # else another process finished first
                raise
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _pom(version: str) -> str:
    return _POM_TEMPLATE.format(kafka=version, slf4j=_SLF4J_VERSION, log4j=_LOG4J_VERSION)


def complete_marker(version: str) -> str:
    """The text of ``libs/.complete`` for a complete fetch of ``version``'s
    current jar set (the version and a hash of the pom naming the set)."""
    return f"{version} {hashlib.sha256(_pom(version).encode()).hexdigest()[:16]}\n"


def _marker(libs: Path) -> str | None:
    """The completeness marker's text, ``None`` when there is none."""
    try:
        return (libs / _COMPLETE_MARKER).read_text(encoding="utf-8")
    except OSError:
        return None


def _run_maven(
    mvn: str, pom: Path, output_dir: Path, coords: str, *, transitive: bool = True
) -> None:
    cmd = [
        mvn,
        "-B",
        "-q",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={output_dir}",
        "-DincludeScope=runtime",
        *(() if transitive else ("-DexcludeTransitive=true",)),
        "-f",
        str(pom),
    ]
    run_build_tool(
        cmd,
        doing=f"Maven fetching {coords}",
        advice="Check the version exists on Maven Central and that Maven can reach it.",
        timeout_advice="check network access to Maven Central (or your mirror in "
        "~/.m2/settings.xml).",
        timeout_s=_MVN_TIMEOUT_S,
    )


def log4j2_config_path() -> Path:
    """Return a filesystem path to the shipped ``log4j2.properties`` (WARN to stderr)."""
    resource = resources.files(__package__) / "log4j2.properties"
    if isinstance(resource, Path):
        return resource
    # Installed in a zip: materialize a copy once in the cache.
    target = cache_root() / "log4j2.properties"
    content = resource.read_text(encoding="utf-8")
    if not target.is_file() or target.read_text(encoding="utf-8") != content:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content, encoding="utf-8")
    return target


def kafka_java_command(
    java: str,
    libs: Path,
    main_class: str,
    args: Sequence[str],
    *,
    jvm_options: Sequence[str] = (),
    classpath: Sequence[Path] = (),
) -> list[str]:
    """Return the argv running ``main_class`` from ``libs`` with our log4j2 config.

    Args:
        java: path of the java executable (see :func:`find_java`).
        libs: directory of jars (see :func:`ensure_kafka_jars`).
        main_class: e.g. ``"kafka.Kafka"``, ``"kafka.admin.ConfigCommand"``.
        args: program arguments after the class name.
        jvm_options: extra JVM flags placed before the class name.
        classpath: jars or class directories after ``libs`` (plug-ins).
    """
    return [
        java,
        "-cp",
        os.pathsep.join([str(libs / "*"), *map(str, classpath)]),
        f"-Dlog4j2.configurationFile={log4j2_config_path()}",
        *jvm_options,
        main_class,
        *args,
    ]


def run_kafka_tool(
    main_class: str,
    args: Sequence[str],
    *,
    version: str = DEFAULT_KAFKA_VERSION,
    timeout_s: float = 120.0,
) -> subprocess.CompletedProcess[str]:
    """Run a Kafka command-line class to completion and return its result.

    The first successful (exit 0) run of each ``main_class`` records a class-data-sharing
    archive (``<cache>/kafka-<version>/cds/``) that later runs map in, which
    roughly halves their start-up (about 1.5 s to 0.6 s for ConfigCommand); that
    first run is about 3 s slower.

    Args:
        main_class: e.g. ``"kafka.admin.ConfigCommand"``.
        args: the tool's arguments.
        version: Kafka release whose jars run (fetched if needed).
        timeout_s: seconds before the tool is killed.

    Returns:
        The completed process with text ``stdout``/``stderr``; the exit code is
        not checked.

    Raises:
        SandboxError: Java or the jars are unavailable, or the tool timed out.
    """
    java = find_java()
    libs = ensure_kafka_jars(version)
    archive = class_data_archive(java, libs, main_class)
    unsupported = archive.with_suffix(".unsupported")
    if archive.is_file():
        return _run_tool(
            java, libs, main_class, args, timeout_s, f"-XX:SharedArchiveFile={archive}"
        )
    if unsupported.exists():
        return _run_tool(java, libs, main_class, args, timeout_s, None)

    archive.parent.mkdir(parents=True, exist_ok=True)
    # Several tools may start at once (a sandbox formats its nodes side by side).
    recording = archive.with_name(f".{archive.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    proc: subprocess.CompletedProcess[str] | None = None
    try:
        proc = _run_tool(
            java, libs, main_class, args, timeout_s, f"-XX:ArchiveClassesAtExit={recording}"
        )
    finally:
        # A failed run loaded only part of the tool's classes; a killed one may
        # have left a short file: keep archives of successful runs only.
        _keep_archive(recording, archive, keep=proc is not None and proc.returncode == 0)
    if proc.returncode != 0 and _VM_INIT_ERROR in proc.stderr + proc.stdout:
        # No base CDS archive in this JDK: dynamic archiving stops the JVM from starting.
        log.info("class-data sharing unavailable for %s; running without it", java)
        unsupported.write_text(
            tail_text(proc.stderr + proc.stdout, _OUTPUT_TAIL_LINES) + "\n", encoding="utf-8"
        )
        return _run_tool(java, libs, main_class, args, timeout_s, None)
    return proc


def _run_tool(
    java: str,
    libs: Path,
    main_class: str,
    args: Sequence[str],
    timeout_s: float,
    cds_option: str | None,
) -> subprocess.CompletedProcess[str]:
    options = (*_TOOL_JVM_OPTIONS, cds_option) if cds_option else _TOOL_JVM_OPTIONS
    cmd = kafka_java_command(java, libs, main_class, args, jvm_options=options)
    log.debug("running %s", " ".join(cmd))
    try:
        return subprocess.run(
            cmd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise SandboxError(
            f"{main_class} {' '.join(args)} did not finish within {timeout_s:g} s; "
            f"check that the broker it talks to is up, or allow more time."
        ) from exc
    except OSError as exc:
        raise SandboxError(f"Could not run {java}: {exc}") from exc


def _keep_archive(recording: Path, archive: Path, *, keep: bool) -> None:
    """Move a freshly written archive into place, or drop it."""
    # A JVM killed mid-dump (timeout) may leave a short file: never keep that.
    if keep and recording.is_file() and not archive.is_file():
        with contextlib.suppress(OSError):
            os.replace(recording, archive)  # atomic: readers see all or nothing
    recording.unlink(missing_ok=True)


def class_data_archive(java: str, libs: Path, main_class: str) -> Path:
    """Return where the class-data-sharing archive of ``main_class`` lives (may not exist).

    :func:`run_kafka_tool` writes it on the first successful run. An archive only
    fits the JVM build that wrote it, hence the java key in the name; using a
    mismatched one is harmless (``-Xshare:auto`` runs unshared) but slow.
    """
    real = os.path.realpath(java)
    try:
        stat = os.stat(real)
        identity = f"{real}:{stat.st_size}:{stat.st_mtime_ns}"
    except OSError:
        identity = real
    java_key = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return libs.parent / "cds" / f"{main_class}-{java_key}.jsa"


def _progress(on_progress: Callable[[str], None] | None, message: str) -> None:
    log.info("%s", message)
    if on_progress is not None:
        on_progress(message)
