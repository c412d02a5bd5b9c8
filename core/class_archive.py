"""A class-data archive for the local Spark driver's JVM (the JDK's class-data sharing).

Before its first query, a Spark JVM loads, parses and verifies some 15,000 classes from a few
hundred jars, on every start. A dynamic class-data archive holds them already parsed and
verified; each later JVM maps it and skips that work (and JVMs running side by side share its
pages). Measured here (2 cores, a session then its first Kafka query, two runs each): 13.5 s
and 20 CPU-s without, 9.5 s and 14 CPU-s with the archive. Every `lk` command, stream job,
batch run, replay, test and demo step that starts Spark pays that start.

`lk stack up` writes the archive once into the cache (`build`): a short training run
(`core.class_archive_training`) does what Spark jobs here do, on a few records, in a JVM that
dumps its classes when it exits. The archive is only good for the JVM and the classpath it was
made with, paths and jar times included, so its file name carries a fingerprint of both (the
JDK; pyspark's version and place, i.e. the virtual environment; every jar's size and time): a
new JDK, another checkout, a venv made anew or another jar set finds no archive, and `lk stack
up` makes one; the three most recent stay in the cache. A JVM started without one, or in a
container image, runs as before.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from importlib.metadata import version
from importlib.util import find_spec
from pathlib import Path

from core.settings import Settings

_FOLDER = "jvm"
_TRAINING_MODULE = "core.class_archive_training"
_TRAINING_TIMEOUT_S = 600


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
    # The JVM checks each jar of the classpath it maps the archive with by path, size and
    # modification time, and refuses (with a warning on stdout) an archive whose jars differ:
    # pyspark's own jars (the virtual environment's place; a venv made anew, as on a fresh
    # clone, has new times) and the connector jars are part of what the archive is good for.
    spec = find_spec("pyspark")
    pyspark_home = Path(spec.origin).parent if spec and spec.origin else None
    identity = [str(java), str(stat.st_size), str(stat.st_mtime_ns)]
    identity += [version("pyspark"), str(pyspark_home), str(settings.spark_jars_path)]
    folders = [settings.spark_jars_path, *([pyspark_home / "jars"] if pyspark_home else [])]
    for folder in folders:
        for jar in sorted(folder.glob("*.jar")):
            jar_stat = jar.stat()
            identity.append(f"{jar}:{jar_stat.st_size}:{jar_stat.st_mtime_ns}")
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


_KEPT = 3
"""Archives kept (each about 240 MB): several checkouts on one machine share the cache, and
each has its own virtual environment, hence its own archive."""


def _forget_old_archives(new: Path) -> None:
    """Make room for `new`: only the most recently made others stay, and no training run's
    leftovers of more than an hour."""
    others = sorted(
        (p for p in new.parent.glob("spark-driver-*.jsa") if p != new),
        key=lambda p: p.stat().st_mtime,
        reverse=True,
    )
    for old in others[_KEPT - 1 :]:
        old.unlink(missing_ok=True)
        old.with_name(f"{old.stem}.training.log").unlink(missing_ok=True)
    for partial in new.parent.glob("spark-driver-*.partial"):
        if time.time() - partial.stat().st_mtime > 3600:
            partial.unlink(missing_ok=True)


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
    _forget_old_archives(path)
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    log = path.with_name(f"{path.stem}.training.log")
    started = time.monotonic()
    env = {
        **os.environ,
        **settings.as_env(),
        "LK_SPARK_DRIVER_JAVA_OPTIONS": f"-XX:ArchiveClassesAtExit={partial}",
    }
    with log.open("wb") as out:
        try:
            run = subprocess.run(
                [sys.executable, "-m", _TRAINING_MODULE],
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                check=False,
                timeout=_TRAINING_TIMEOUT_S,  # its JVM exits with it: its stdin closes
            )
        except subprocess.TimeoutExpired:
            partial.unlink(missing_ok=True)
            raise ClassArchiveError(
                f"the training run took over {_TRAINING_TIMEOUT_S}s ({log})"
            ) from None
    if run.returncode != 0 or not partial.is_file() or partial.stat().st_size == 0:
        partial.unlink(missing_ok=True)
        lines = log.read_text(errors="replace").strip().splitlines() or ["no output"]
        reason = [line for line in lines if "Error" in line or "Exception" in line] or lines
        raise ClassArchiveError(f"the training run made no archive ({log}): {reason[-1]}")
    partial.rename(path)  # complete, or not there: a JVM never maps half an archive
    return path, time.monotonic() - started
