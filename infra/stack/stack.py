"""The local stack: Kafka, MinIO, Postgres and Kafka Connect on loopback, plus Spark's connector
jars and the class-data archive its JVMs start from (`core.class_archive`).

`up` is idempotent and waits until each service answers; `down` stops only what `up` started;
`reset` stops everything and deletes the stack's data, keeping the download/build cache.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable

from core import class_archive
from core.settings import Settings
from infra.stack import artifacts
from infra.stack.connect import KafkaConnect
from infra.stack.kafka import Kafka
from infra.stack.minio import MinIO
from infra.stack.postgres import Postgres
from infra.stack.service import Service, ServiceStatus

Progress = Callable[[str], None]


def services(settings: Settings) -> list[Service]:
    # Connect last: it needs Kafka and Postgres, and stops first.
    return [Kafka(settings), MinIO(settings), Postgres(settings), KafkaConnect(settings)]


def up(
    settings: Settings, progress: Progress = print, builds: artifacts.BuildProgress | None = None
) -> dict[str, float]:
    """Fetch and build what is not cached yet (reported to `builds`), then start every service;
    returns seconds spent per step."""
    timings: dict[str, float] = {}
    settings.stack_path.mkdir(parents=True, exist_ok=True)
    if not artifacts.cached(settings):
        started = time.monotonic()
        progress(f"first run: fetching and building into {settings.cache_path} ...")
        artifacts.fetch_all(settings, builds or artifacts.NoProgress())
        timings["downloads"] = time.monotonic() - started
        progress(f"fetched and built in {timings['downloads']:.0f}s (cached for later runs)")
    for service in services(settings):
        started = time.monotonic()
        progress(f"{service.name}: starting on {service.address} ...")
        action = service.up()
        timings[service.name] = time.monotonic() - started
        progress(f"{service.name}: {action}, ready in {timings[service.name]:.1f}s")
    started = time.monotonic()
    progress("spark: resolving connector jars ...")
    jars = artifacts.spark_jars(settings)
    timings["spark-jars"] = time.monotonic() - started
    progress(f"spark: {len(list(jars.glob('*.jar')))} connector jars in {jars}")
    started = time.monotonic()
    progress("spark: class-data archive of the driver JVM ...")
    try:
        archive, made_in = class_archive.build(settings)
    except class_archive.ClassArchiveError as exc:
        progress(f"spark: no class-data archive, every Spark JVM starts slower: {exc}")
    else:
        if archive is None:
            progress("spark: no `java` found, so no class-data archive")
        else:
            how = "cached" if made_in is None else f"made in {made_in:.0f}s (cached for later runs)"
            progress(f"spark: class-data archive {how}: {archive}")
    timings["spark-class-archive"] = time.monotonic() - started
    return timings


def down(settings: Settings, progress: Progress = print) -> None:
    for service in reversed(services(settings)):
        stopped = service.stop()
        progress(f"{service.name}: {'stopped' if stopped else 'not started by the stack'}")


def status(settings: Settings) -> list[ServiceStatus]:
    return [service.status() for service in services(settings)]


# The local cluster's state (infra/cluster) lives beside the services' data but is the
# cluster's own: `lk cluster reset` deletes it, after unmounting what its pods still use.
CLUSTER_FOLDER = "cluster"


def reset(settings: Settings, progress: Progress = print) -> None:
    down(settings, progress)
    if settings.stack_path.is_dir():
        for entry in settings.stack_path.iterdir():
            if entry.name == CLUSTER_FOLDER:
                continue
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
            else:
                entry.unlink(missing_ok=True)
        if not any(settings.stack_path.iterdir()):  # no cluster kept: leave nothing behind
            settings.stack_path.rmdir()
    progress(
        f"deleted the services' data in {settings.stack_path} (kept the cache in "
        f"{settings.cache_path}; `lk cluster reset` deletes the cluster's)"
    )
