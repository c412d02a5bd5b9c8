"""The batch layer's run as steps, each a gate or a write: what the `lambda_batch` DAG runs.

    partitions = close_archive(spark, settings)          # the log -> master dataset
    validate_raw(spark, settings, run, partitions)        # gate: the new partitions
    version = compute_views(spark, settings)              # a new version, status `building`
    validate_views(spark, settings, version, run)         # gate: its views (else `failed`)
    publish(spark, settings, version)                     # `ready`, then the hand-off

A gate raises ``core.quality.QualityGateError`` and nothing after it runs, so a failing suite
leaves the published version serving: readers only ever see a version that passed both gates.
`run_batch` is these steps in one call (without the archive and the hand-off):

    run_batch(spark, settings, cutoff_ms=None)   # scheduled: the cutoff the archive allows

Every step is idempotent and safe to retry: the archiver appends each micro-batch once;
a gate only reads (and re-records its result); a retried `compute_views` writes a new version
(a version left `building` by a crash is never published, and its rows are dropped at the next
hand-off); `publish` does nothing for a version already published or superseded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from batch_layer import inputs
from batch_layer.cutoff import scheduled_cutoff
from batch_layer.inputs import Partition
from batch_layer.job import (
    LAMBDA,
    BatchError,
    BatchResult,
    batch_views,
    deduplicated,
    max_event_ts,
    read_master_events,
    read_master_profiles,
    write_version,
)
from core.master_dataset import MasterDataset
from core.quality import layers
from core.quality.result import QualityResult
from core.settings import Settings
from core.store import versions
from core.store.connection import connect
from core.store.schema import create_all
from core.store.streams import to_ms, to_timestamp
from core.timefmt import iso

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


# --- 1. the archive -------------------------------------------------------------------------


def close_archive(spark: SparkSession, settings: Settings) -> list[Partition]:
    """Archive the log to its current end; returns the partitions that received data since the
    published batch's snapshot (all of them before the first), sorted."""
    from batch_layer import archiver

    archiver.drain(spark, settings)
    return new_partitions(spark, settings)


def new_partitions(spark: SparkSession, settings: Settings) -> list[Partition]:
    """The master dataset's partitions that received data since the snapshot the published
    batch read (every partition before the first); empty without an archive."""
    from delta.tables import DeltaTable

    master = MasterDataset.from_settings(settings)
    if not DeltaTable.isDeltaTable(spark, master.events):
        return []
    return inputs.added_since(spark, master.events, inputs.published_input(settings))


# --- 2. the raw gate ------------------------------------------------------------------------


def _in_partitions(partitions: list[Partition]) -> Column:
    """A filter Delta prunes partitions with: per date, the hours of that date."""
    from pyspark.sql import functions as F

    hours: dict[str, list[int]] = {}
    for day, hour in partitions:
        hours.setdefault(day, []).append(hour)
    condition = F.lit(False)
    for day, day_hours in sorted(hours.items()):
        condition = condition | (
            (F.col("event_date") == day) & F.col("event_hour").isin(sorted(set(day_hours)))
        )
    return condition


def partition_rows(
    spark: SparkSession, settings: Settings, partitions: list[Partition]
) -> DataFrame:
    """The master dataset's event rows in ``partitions``."""
    events = read_master_events(spark, MasterDataset.from_settings(settings))
    return events.where(_in_partitions(partitions))


def validate_raw(
    spark: SparkSession,
    settings: Settings,
    run_name: str,
    partitions: list[Partition] | None = None,
) -> QualityResult:
    """Gate ``master_partition`` on ``partitions`` (default: ``new_partitions``); raises
    ``QualityGateError`` on failure. Nothing new to check passes, with 0 expectations."""
    from core.quality import records, validate
    from core.quality.checks import raise_on_failure

    if partitions is None:
        partitions = new_partitions(spark, settings)
    if not partitions:
        return QualityResult(
            suite="master_partition",
            layer=layers.LAMBDA_BATCH,
            run_name=run_name,
            success=True,
            rows=0,
            evaluated=0,
            failed=0,
        )
    frame = partition_rows(spark, settings, partitions)
    result = validate(
        "master_partition", frame, settings=settings, layer=layers.LAMBDA_BATCH, run_name=run_name
    )
    records.record(settings, [result])
    raise_on_failure([result])
    return result


# --- 3. the views ---------------------------------------------------------------------------


def published_version(settings: Settings) -> versions.Version | None:
    """The batch version readers get now (None before the first hand-off)."""
    with connect(settings) as conn:
        create_all(conn)
        return versions.current(conn, LAMBDA)


def cutoff_floor(published: versions.Version | None) -> int | None:
    """The earliest cutoff a new batch may have: the published one. The speed layer dropped
    the events before it at the hand-off, so an earlier cutoff would leave the windows in
    between to nobody."""
    return None if published is None or published.cutoff is None else to_ms(published.cutoff)


def compute(
    spark: SparkSession,
    settings: Settings,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
) -> BatchResult:
    """Recompute the batch views and write them as a new version, left `building`."""
    from core.views.logic_versions import event_filter

    master = MasterDataset.from_settings(settings)
    read_master_events(spark, master)  # a clear error when there is no archive yet
    # One pinned snapshot, recorded with the version: the next raw gate checks what came after.
    snapshot = inputs.latest_version(spark, master.events)
    events = inputs.read_at(spark, master.events, snapshot)
    published = published_version(settings)
    published_cutoff = cutoff_floor(published)
    if cutoff_ms is None:
        latest = max_event_ts(events)
        if latest is None:
            raise BatchError("the master dataset holds no event yet")
        cutoff_ms = scheduled_cutoff(latest, settings.watermark_delay_ms)
        if published_cutoff is not None:  # never backwards (`lk drain` publishes a later one)
            cutoff_ms = max(cutoff_ms, published_cutoff)
    elif published_cutoff is not None and cutoff_ms < published_cutoff:
        raise BatchError(
            f"cutoff {iso(cutoff_ms)} is before the published batch's "
            f"({iso(published_cutoff)}): choose a later one"
        )
    if logic_version is None and published is not None:
        logic_version = published.logic_version  # a scheduled batch keeps the published logic
    keep = event_filter(logic_version) if logic_version is not None else None
    history = deduplicated(events).persist()  # read and deduplicated once for the five views
    try:
        views = batch_views(history, read_master_profiles(spark, master), cutoff_ms, keep)
        with connect(settings) as conn:
            create_all(conn)
            version = versions.begin_version(
                conn, LAMBDA, cutoff=to_timestamp(cutoff_ms), logic_version=logic_version
            )
            inputs.record(conn, version, snapshot)
            try:
                counts = write_version(settings, views, version)
            except Exception:
                versions.mark(conn, LAMBDA, version, "failed")
                raise
            versions.mark(conn, LAMBDA, version, "building", row_counts=counts)
    finally:
        history.unpersist()
    return BatchResult(version, cutoff_ms, counts)


def compute_views(
    spark: SparkSession,
    settings: Settings,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
) -> int:
    """Write a new batch version (status `building`, not visible); returns its number."""
    return compute(spark, settings, cutoff_ms, logic_version).version


# --- 4. the views' gate ---------------------------------------------------------------------


def validate_views(
    spark: SparkSession, settings: Settings, version: int, run_name: str
) -> list[QualityResult]:
    """Gate ``batch_views.<view>`` on every view of ``version``. On failure the version is
    marked `failed` (it can never be published) and ``QualityGateError`` is raised."""
    from core.quality import QualityGateError
    from core.quality.checks import gate_batch_version

    del spark  # the rows are read back from the serving store, as readers would get them
    try:
        return gate_batch_version(settings, version, run_name)
    except QualityGateError:
        with connect(settings) as conn:
            found = versions.get(conn, LAMBDA, version)
            if found is not None and found.status in ("building", "ready"):
                versions.mark(conn, LAMBDA, version, "failed")
        raise


# --- 5. publication -------------------------------------------------------------------------


def mark_ready(settings: Settings, version: int) -> None:
    """Mark a version that passed its gates `ready` (the speed layer publishes it at its next
    hand-off). A version already ready, published or retired is left as it is."""
    with connect(settings) as conn:
        found = versions.get(conn, LAMBDA, version)
        if found is None:
            raise BatchError(f"batch version {version} does not exist")
        if found.status == "failed":
            raise BatchError(f"batch version {version} failed its checks: it is never published")
        if found.status == "building":
            versions.mark(conn, LAMBDA, version, "ready")


def publish(spark: SparkSession, settings: Settings, version: int) -> int:
    """Mark ``version`` ready and hand off to it now; returns the version readers see.

    Until this step the previous version keeps serving. A newer version already published
    wins (this one is then never shown)."""
    from speed_layer.lambda_speed import SpeedLayer

    mark_ready(settings, version)
    SpeedLayer(spark, settings).handoff()
    with connect(settings) as conn:
        current = versions.current(conn, LAMBDA)
    if current is None:
        raise BatchError(f"batch version {version} was not published")
    return current.version


def run_batch(
    spark: SparkSession,
    settings: Settings,
    *,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
    run_name: str | None = None,
) -> BatchResult:
    """Gate the new raw partitions, write a new batch version, gate its views and mark it
    ready; returns it (not yet published: the speed layer's hand-off does that).

    A failing gate raises `BatchError` (with the suite's one-line reasons): nothing is marked
    ready, and the published version keeps serving.
    """
    from core.quality import QualityGateError

    run = run_name or f"batch-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    try:
        validate_raw(spark, settings, run)
        result = compute(spark, settings, cutoff_ms, logic_version)
        validate_views(spark, settings, result.version, run)
    except QualityGateError as exc:
        raise BatchError(f"nothing published: {exc}") from exc
    mark_ready(settings, result.version)
    return result
