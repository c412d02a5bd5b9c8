"""A class-data archive for the local Spark driver's JVM (the JDK's class-data sharing).

Before its first query, a Spark JVM loads, parses and verifies some 15,000 classes from a few
hundred jars, on every start. A dynamic class-data archive holds them already parsed and
verified; each later JVM maps it and skips that work (and JVMs running side by side share its
pages). Measured here (2 cores, a session then its first Kafka query): 21-22 CPU-s and 14-15 s
before, 11-13 CPU-s and 8.5-9 s with the archive. Every `lk` command, stream job, batch run,
replay, test and demo step that starts Spark pays that start.

`lk stack up` writes the archive once into the cache (`build`): a short training run
(`core.class_archive_training`) does what Spark jobs here do, on a few records, in a JVM that
dumps its classes when it exits. The archive is only good for the JVM and the classpath it was
made with, so its file name carries a fingerprint of both: a new JDK, pyspark or connector jar
set simply finds no archive (and `lk stack up` makes a new one). A JVM started without one, or
in a container image, runs as before.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

from core.settings import Settings

_FOLDER = "jvm"
TRAINING_MODULE = "core.class_archive_training"


def _java() -> Path | None:
    """The `java` pyspark starts: `$JAVA_HOME/bin/java`, else the one on the PATH."""
    if home := os.environ.get("JAVA_HOME"):
        return Path(home, "bin", "java").resolve()
    found = shutil.which("java")
    return Path(found).resolve() if found else None


def archive_path(settings: Settings) -> Path | None:
    """Where the archive of this JVM and classpath is (whether or not it exists yet); None
    without a `java` to run."""
    java = _java()
    if java is None or not java.is_file():
        return None
    stat = java.stat()
    identity = [str(java), str(stat.st_size), str(stat.st_mtime_ns), version("pyspark")]
    for jar in sorted(settings.spark_jars_path.glob("*.jar")):
        identity.append(f"{jar.name}:{jar.stat().st_size}")
    digest = hashlib.sha256("\n".join(identity).encode()).hexdigest()[:16]
    return settings.cache_path / _FOLDER / f"spark-driver-{digest}.jsa"


def java_options(settings: Settings) -> tuple[str, ...]:
    """The driver JVM's option to map the archive, when there is one."""
    path = archive_path(settings)
    if path is None or not path.is_file():
        return ()
    return (f"-XX:SharedArchiveFile={path}",)


class ClassArchiveError(RuntimeError):
    pass


def build(settings: Settings) -> tuple[Path | None, float | None]:
    """The archive, made now if missing: (its path, seconds spent making it, None if it was
    there already). (None, None) without a `java`. Raises `ClassArchiveError` with the end of
    the training run's output if it made none."""
    path = archive_path(settings)
    if path is None:
        return None, None
    if path.is_file():
        return path, None
    path.parent.mkdir(parents=True, exist_ok=True)
    for stale in path.parent.glob("spark-driver-*"):  # another JDK's or classpath's
        if not stale.name.startswith(path.stem):
            stale.unlink(missing_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    log = path.with_name(f"{path.stem}.training.log")
    started = time.monotonic()
    env = {
        **os.environ,
        **settings.as_env(),
        "LK_SPARK_DRIVER_JAVA_OPTIONS": f"-XX:ArchiveClassesAtExit={partial}",
    }
    with log.open("wb") as out:
        run = subprocess.run(
            [sys.executable, "-m", TRAINING_MODULE],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if run.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        lines = log.read_text(errors="replace").strip().splitlines() or ["no output"]
        reason = [line for line in lines if "Error" in line or "Exception" in line] or lines
        raise ClassArchiveError(f"the training run made no archive ({log}): {reason[-1]}")
    partial.rename(path)  # complete, or not there: a JVM never maps half an archive
    return path, time.monotonic() - started
