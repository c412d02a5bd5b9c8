"""Downloads and builds the stack needs, cached under the settings' cache folder.

- Kafka broker jars and Spark connector jars: resolved from Maven Central by Maven, from the
  POMs in infra/maven/ (versions live there).
- MinIO: built with `go install` from the Go module proxy, at the pinned module version.

Each artifact is resolved once; a marker file holding the inputs' fingerprint makes a second
run instant, and a change of version or POM resolves again.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
from pathlib import Path

from core.settings import Settings
from infra.stack.process import StackError

MAVEN_DIR = Path(__file__).resolve().parents[1] / "maven"
_VERSION_SUFFIX = re.compile(r"-\d[\w.]*(?:-[\w.]+)*\.jar$")


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


def _maven_copy(settings: Settings, pom: Path, out_dir: Path) -> None:
    mvn = require_tool(
        "mvn", "install Maven (apt-get install maven) to fetch jars from Maven Central"
    )
    staging = out_dir.with_name(out_dir.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    cmd = [
        mvn,
        "-B",
        "-q",
        "-f",
        str(pom),
        f"-Dmaven.repo.local={settings.cache_path / 'm2'}",
        "dependency:copy-dependencies",
        f"-DoutputDirectory={staging}",
        "-DincludeScope=runtime",
    ]
    result = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        errors = [line for line in result.stdout.splitlines() if "[ERROR]" in line]
        raise StackError(f"Maven could not resolve {pom.name}: {(errors or ['?'])[0]}")
    shutil.rmtree(out_dir, ignore_errors=True)
    staging.rename(out_dir)


def kafka_jars(settings: Settings) -> Path:
    """The folder of the Kafka broker's classpath."""
    pom = MAVEN_DIR / "kafka-broker.pom.xml"
    out = settings.cache_path / "jars" / "kafka"
    marker = out / ".resolved"
    fingerprint = inputs_fingerprint(pom.read_text())
    if not is_current(marker, fingerprint):
        _maven_copy(settings, pom, out)
        marker.write_text(fingerprint)
    return out


def spark_jars(settings: Settings) -> Path:
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
        _maven_copy(settings, pom, out)
        for jar in out.glob("*.jar"):
            # `shims` is RoaringBitmap's companion, which pyspark ships.
            if _artifact_name(jar.name) in shipped | {"shims"}:
                jar.unlink()
        marker.write_text(fingerprint)
    return out


def _pyspark_jars_dir() -> Path:
    import pyspark  # local: importing pyspark is slow and only this step needs its location

    return Path(pyspark.__file__).parent / "jars"


def minio_binary(settings: Settings) -> Path:
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
    result = subprocess.run(
        [go, "install", module], env=env, capture_output=True, text=True, check=False
    )
    if result.returncode != 0 or not binary.is_file():
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise StackError(f"go install {module} failed: {last}")
    marker.write_text(settings.minio_version)
    return binary


def cached(settings: Settings) -> bool:
    """Whether the downloads and builds a first `lk stack up` makes are already in the cache."""
    cache = settings.cache_path
    jars = (cache / "jars" / "kafka" / ".resolved", settings.spark_jars_path / ".resolved")
    minio = bool(os.environ.get("MINIO_BINARY")) or (cache / "go" / "minio.version").is_file()
    return minio and all(marker.is_file() for marker in jars)
