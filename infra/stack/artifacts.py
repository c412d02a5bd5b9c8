"""Downloads and builds the stack needs, cached under the settings' cache folder.

- Kafka broker jars, Kafka Connect's worker, Debezium's connector and Spark connector jars:
  resolved from Maven Central by Maven, from the POMs in infra/maven/ (versions live there).
- The project's Connect transform (infra/connect/smt): compiled by `javac`.
- MinIO: built with `go install` from the Go module proxy, at the pinned module version.

Each artifact is resolved once; a marker file holding the inputs' fingerprint makes a second
run instant, and a change of version or POM resolves again. A first resolution takes minutes:
it reports each file fetched and each package compiled to a `BuildProgress` (`lk` draws a bar).
"""

from __future__ import annotations

import collections
import hashlib
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from core.settings import Settings
from infra.stack.process import StackError

MAVEN_DIR = Path(__file__).resolve().parents[1] / "maven"
SMT_DIR = Path(__file__).resolve().parents[1] / "connect" / "smt" / "src"
_VERSION_SUFFIX = re.compile(r"-\d[\w.]*(?:-[\w.]+)*\.jar$")


class BuildProgress(Protocol):
    """How a fetch or build that is not cached reports itself, unit by unit."""

    def started(self, build: str, unit: str) -> None:
        """`build` begins; it counts its work in `unit`s (files, packages)."""

    def advanced(self, item: str) -> None:
        """One more unit is done: `item` names it."""

    def finished(self) -> None: ...


class NoProgress:
    def started(self, build: str, unit: str) -> None:
        pass

    def advanced(self, item: str) -> None:
        pass

    def finished(self) -> None:
        pass


def _run_reporting(
    cmd: list[str],
    progress: BuildProgress,
    item_of: Callable[[str], str | None],
    env: dict[str, str] | None = None,
) -> tuple[int, list[str]]:
    """Run `cmd`, telling `progress` of each output line that `item_of` names as a unit of
    work; its exit code and its last lines (for the reason of a failure)."""
    tail: collections.deque[str] = collections.deque(maxlen=200)
    with subprocess.Popen(
        cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            tail.append(line.rstrip())
            if (item := item_of(tail[-1])) is not None:
                progress.advanced(item)
    return process.returncode, list(tail)


_MAVEN_FILE = re.compile(r"\[INFO\] (?:Downloaded from \S+: \S*/|Copying )(\S+)")


def _maven_file(line: str) -> str | None:
    """The file a line of Maven's batch output says it fetched or copied."""
    return match[1] if (match := _MAVEN_FILE.match(line)) else None


def _go_unit(line: str) -> str | None:
    """What a line of `go install -v` says it did: a module downloaded, a package compiled."""
    if line.startswith("go: downloading "):
        return line.removeprefix("go: downloading ")
    return None if not line or line.startswith(("go:", "#", " ", "\t")) else line


def _artifact_name(jar: str) -> str:
    return _VERSION_SUFFIX.sub("", jar)


def inputs_fingerprint(*parts: str) -> str:
    """A short digest of a build's inputs, kept in its marker file."""
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def is_current(marker: Path, fingerprint: str) -> bool:
    """True when the marker holds these inputs' fingerprint: the artifact needs no rebuild."""
    return marker.is_file() and marker.read_text().strip() == fingerprint


def require_tool(tool: str, hint: str) -> str:
    """The path of `tool`, or a one-line StackError saying how to install it."""
    path = shutil.which(tool)
    if path is None:
        raise StackError(f"'{tool}' is not installed: {hint}")
    return path


def _maven_copy(
    settings: Settings, pom: Path, out_dir: Path, what: str, progress: BuildProgress
) -> None:
    mvn = require_tool(
        "mvn", "install Maven (apt-get install maven) to fetch jars from Maven Central"
    )
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn,
        "-B",
        "-f",
        str(pom),
        f"-Dmaven.repo.local={settings.cache_path / 'm2'}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    progress.started(f"fetching {what} (Maven Central)", "files")
    try:
        code, lines = _run_reporting(cmd, progress, _maven_file)
    finally:
        progress.finished()
    if code != 0:
        errors = [line for line in lines if "[ERROR]" in line]
        raise StackError(f"Maven could not resolve {pom.name}: {(errors or ['?'])[0]}")
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)


def _resolved(
    settings: Settings, pom_name: str, out: Path, what: str, progress: BuildProgress | None
) -> Path:
    """`out`, holding the runtime jars of the POM `pom_name`, resolved unless already current."""
    pom = MAVEN_DIR / pom_name
    marker = out / ".resolved"
    fingerprint = inputs_fingerprint(pom.read_text())
    if not is_current(marker, fingerprint):
        _maven_copy(settings, pom, out, what, progress or NoProgress())
        marker.write_text(fingerprint)
    return out


def kafka_jars(settings: Settings, progress: BuildProgress | None = None) -> Path:
    """The folder of the Kafka broker's classpath."""
    out = settings.cache_path / "jars" / "kafka"
    return _resolved(settings, "kafka-broker.pom.xml", out, "Kafka's jars", progress)


def connect_jars(settings: Settings, progress: BuildProgress | None = None) -> Path:
    """The folder of Kafka Connect's worker classpath."""
    out = settings.cache_path / "jars" / "connect"
    return _resolved(settings, "kafka-connect.pom.xml", out, "Kafka Connect's jars", progress)


def connect_plugins(settings: Settings, progress: BuildProgress | None = None) -> Path:
    """Connect's `plugin.path`: a folder per plugin, Debezium's Postgres connector and the
    project's own transform (`infra/connect/smt`, compiled here by `javac` against the worker's
    jars)."""
    plugins = connect_plugin_path(settings)
    _resolved(
        settings,
        "debezium-postgres.pom.xml",
        plugins / "debezium-postgres",
        "Debezium's Postgres connector",
        progress,
    )
    _profile_change(connect_jars(settings, progress), plugins / "lk-profile-change")
    return plugins


def connect_plugin_path(settings: Settings) -> Path:
    """Where `connect_plugins` puts them (nothing is fetched or built here)."""
    return settings.cache_path / "jars" / "connect-plugins"


def _profile_change(worker_jars: Path, out: Path) -> None:
    sources = sorted(p for p in SMT_DIR.rglob("*") if p.is_file())
    fingerprint = inputs_fingerprint(*(p.read_text() for p in sources))
    marker = out / ".built"
    if is_current(marker, fingerprint):
        return
    javac = require_tool("javac", "install a JDK 17+ (apt-get install openjdk-17-jdk-headless)")
    jar = require_tool("jar", "install a JDK 17+ (apt-get install openjdk-17-jdk-headless)")
    shutil.rmtree(out, ignore_errors=True)
    classes = out / "classes"
    classes.mkdir(parents=True)
    java_files = [str(p) for p in sources if p.suffix == ".java"]
    compiled = subprocess.run(
        [javac, "--release", "17", "-cp", f"{worker_jars}/*", "-d", str(classes), *java_files],
        capture_output=True,
        text=True,
        check=False,
    )
    if compiled.returncode != 0:
        raise StackError(f"javac of the ProfileChange transform failed: {compiled.stderr.strip()}")
    shutil.copytree(SMT_DIR / "META-INF", classes / "META-INF")
    subprocess.run(
        [jar, "--create", "--file", str(out / "lk-profile-change.jar"), "-C", str(classes), "."],
        check=True,
        capture_output=True,
    )
    shutil.rmtree(classes)
    marker.write_text(fingerprint)


def spark_jars(settings: Settings, progress: BuildProgress | None = None) -> Path:
    """The folder of Spark's connector jars (Kafka source, s3a, Delta).

    Maven brings each connector's whole dependency tree; a jar that pyspark already ships
    (Hadoop client, Jackson, Scala, Parquet, logging...) is dropped so that Spark's own version
    is the only one on the classpath.
    """
    pom = MAVEN_DIR / "spark-connectors.pom.xml"
    out = settings.spark_jars_path
    marker = out / ".resolved"
    pyspark_jars = _pyspark_jars_dir()
    shipped = {_artifact_name(j.name) for j in pyspark_jars.glob("*.jar")}
    fingerprint = inputs_fingerprint(pom.read_text(), *sorted(shipped))
    if not is_current(marker, fingerprint):
        _maven_copy(settings, pom, out, "Spark's connector jars", progress or NoProgress())
        for jar in out.glob("*.jar"):
            # `shims` is RoaringBitmap's companion, which pyspark ships.
            if _artifact_name(jar.name) in shipped | {"shims"}:
                jar.unlink()
        marker.write_text(fingerprint)
    return out


def _pyspark_jars_dir() -> Path:
    import pyspark  # local: importing pyspark is slow and only this step needs its location

    return Path(pyspark.__file__).parent / "jars"


def minio_binary(settings: Settings, progress: BuildProgress | None = None) -> Path:
    """The MinIO server: `MINIO_BINARY` if set, else built once with `go install`."""
    if given := os.environ.get("MINIO_BINARY"):
        path = Path(given)
        if not os.access(path, os.X_OK):
            raise StackError(f"MINIO_BINARY={given} is not an executable file")
        return path
    go_root = settings.cache_path / "go"
    binary = go_root / "bin" / "minio"
    marker = go_root / "minio.version"
    if binary.is_file() and is_current(marker, settings.minio_version):
        return binary
    go = require_tool("go", "install Go to build MinIO from the Go module proxy")
    env = {
        **os.environ,
        "GOBIN": str(go_root / "bin"),
        "GOMODCACHE": str(go_root / "mod"),
        "GOCACHE": str(go_root / "build"),
        "GOFLAGS": "-buildvcs=false -modcacherw",
    }
    module = f"github.com/minio/minio@{settings.minio_version}"
    progress = progress or NoProgress()
    progress.started("building MinIO (go install, Go module proxy)", "modules and packages")
    try:
        code, lines = _run_reporting([go, "install", "-v", module], progress, _go_unit, env)
    finally:
        progress.finished()
    if code != 0 or not binary.is_file():
        last = ([line for line in lines if line.strip()] or ["no output"])[-1]
        raise StackError(f"go install {module} failed: {last}")
    marker.write_text(settings.minio_version)
    return binary


def fetch_all(settings: Settings, progress: BuildProgress) -> None:
    """Everything the stack runs from, fetched or built now rather than when each service
    starts, so that a first run shows its progress in one place."""
    kafka_jars(settings, progress)
    connect_plugins(settings, progress)
    minio_binary(settings, progress)
    spark_jars(settings, progress)


def cached(settings: Settings) -> bool:
    """Whether the downloads and builds a first `lk stack up` makes are already in the cache."""
    cache = settings.cache_path
    jars = (
        cache / "jars" / "kafka" / ".resolved",
        cache / "jars" / "connect" / ".resolved",
        cache / "jars" / "connect-plugins" / "debezium-postgres" / ".resolved",
        cache / "jars" / "connect-plugins" / "lk-profile-change" / ".built",
        settings.spark_jars_path / ".resolved",
    )
    minio = bool(os.environ.get("MINIO_BINARY")) or (cache / "go" / "minio.version").is_file()
    return minio and all(marker.is_file() for marker in jars)
