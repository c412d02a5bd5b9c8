"""The batch layer's run as steps, each a gate or a write: what the `lambda_batch` DAG runs.

    partitions = close_archive(spark, settings)          # the log -> master dataset
    validate_raw(spark, settings, run)                    # gate: what the next batch adds
    version = compute_views(spark, settings)              # a new version, status `building`
    validate_views(spark, settings, version, run)         # gate: its views (else `failed`)
    publish(spark, settings, version)                     # `ready`, then the hand-off

A gate raises ``core.quality.QualityGateError`` and nothing after it runs, so a failing suite
leaves the published version serving: readers only ever see a version that passed both gates.
`run_batch` is these steps in one call (without the archive and the hand-off):

    run_batch(spark, settings, cutoff_ms=None)   # scheduled: the cutoff the archive allows

The master dataset holds raw log records: the raw gate and the recompute validate them with the
shared parsing (`core.views.parsing`) as they read them.

Every step is idempotent and safe to retry: the archiver appends each micro-batch once;
a gate only reads (and re-records its result); a retried `compute_views` writes a new version
(a version left `building` by a crash is never published, and its rows are dropped at the next
hand-off); `publish` does nothing for a version already published or superseded.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING

from batch_layer import inputs
from batch_layer.cutoff import drain_cutoff, scheduled_cutoff
from batch_layer.inputs import Partition
from batch_layer.job import (
    LAMBDA,
    BatchError,
    BatchResult,
    batch_views,
    deduplicated,
    parse_master_events,
    parse_stats,
    read_master_events,
    read_master_profiles,
    write_version,
)
from core.master_dataset import PARTITION_COLUMNS, RAW_COLUMNS, MasterDataset
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


def _added(spark: SparkSession, settings: Settings) -> inputs.Added | None:
    """What the master dataset holds beyond the published batch's snapshot (everything before
    the first); None without an archive."""
    from delta.tables import DeltaTable

    master = MasterDataset.from_settings(settings)
    if not DeltaTable.isDeltaTable(spark, master.events):
        return None
    return inputs.added_since(spark, master.events, inputs.published_input(settings))


def new_partitions(spark: SparkSession, settings: Settings) -> list[Partition]:
    """The master dataset's partitions that received data since the snapshot the published
    batch read (every partition before the first); empty without an archive."""
    added = _added(spark, settings)
    return [] if added is None else added.partitions


# --- 2. the raw gate ------------------------------------------------------------------------


def _in_partitions(partitions: list[Partition]) -> Column:
    """A filter Delta prunes partitions with: per date, the hours of that date."""
    from pyspark.sql import functions as F

    date, hour = PARTITION_COLUMNS
    hours: dict[str, list[int]] = {}
    for day, at in partitions:
        hours.setdefault(day, []).append(at)
    condition = F.lit(False)
    for day, day_hours in sorted(hours.items()):
        condition = condition | ((F.col(date) == day) & F.col(hour).isin(sorted(set(day_hours))))
    return condition


def checked_events(raw: DataFrame) -> DataFrame:
    """The valid events among raw master records, as the raw gate checks them: the event
    columns (shared parsing), their log position, Kafka timestamp and partition."""
    from pyspark.sql import functions as F

    from core.views.parsing import EVENT_COLUMNS, LOG_POSITION, parse_events

    parsed = parse_events(raw.select(*RAW_COLUMNS, *PARTITION_COLUMNS))
    return parsed.where(F.col("reason").isNull()).select(
        *EVENT_COLUMNS, *LOG_POSITION, "timestamp", *PARTITION_COLUMNS
    )


def partition_rows(
    spark: SparkSession,
    settings: Settings,
    partitions: list[Partition],
    files: frozenset[str] | None = None,
) -> DataFrame:
    """The valid events of the master dataset's records in ``partitions`` (only those of
    ``files``, when given), validated with the shared parsing (`checked_events`)."""
    from pyspark.sql import functions as F

    raw = read_master_events(spark, MasterDataset.from_settings(settings))
    raw = raw.where(_in_partitions(partitions))
    if files is not None:
        raw = raw.where(F.col("_metadata.file_path").isin(sorted(files)))
    return checked_events(raw)


def validate_raw(
    spark: SparkSession,
    settings: Settings,
    run_name: str,
    partitions: list[Partition] | None = None,
) -> QualityResult:
    """Gate ``master_partition`` on what the next batch adds: the records archived since the
    published batch's snapshot (default), or every record of ``partitions``; raises
    ``QualityGateError`` on failure. Nothing new to check passes, with 0 expectations."""
    from core.quality import records, validate
    from core.quality.checks import raise_on_failure

    files = None
    if partitions is None:
        added = _added(spark, settings)
        partitions = [] if added is None else added.partitions
        files = None if added is None else added.files
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
    frame = partition_rows(spark, settings, partitions, files)
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


def _choose_cutoff(
    settings: Settings,
    published_cutoff: int | None,
    latest: int | None,
    *,
    drain: bool,
    until_ms: int | None,
) -> int:
    """The cutoff of a run given none: what the archive closes (scheduled), the hour after the
    last event (`drain`), capped at ``until_ms`` (a reprocess's range); never before the
    published cutoff (the speed layer no longer holds the events before it)."""
    if latest is None:
        raise BatchError("the master dataset holds no valid event yet")
    if drain:
        cutoff_ms = drain_cutoff(latest)
    else:
        cutoff_ms = scheduled_cutoff(latest, settings.watermark_delay_minutes * 60_000)
        if until_ms is not None:
            cutoff_ms = min(cutoff_ms, until_ms)
    return cutoff_ms if published_cutoff is None else max(cutoff_ms, published_cutoff)


def compute(
    spark: SparkSession,
    settings: Settings,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
    *,
    drain: bool = False,
    until_ms: int | None = None,
) -> BatchResult:
    """Recompute the batch views and write them as a new version, left `building`.

    The cutoff: ``cutoff_ms`` when given, else see `_choose_cutoff` (``drain``, ``until_ms``).
    """
    from core.views.logic_versions import event_filter

    master = MasterDataset.from_settings(settings)
    read_master_events(spark, master)  # a clear error when there is no archive yet
    # One pinned snapshot, recorded with the version: the next raw gate checks what came after.
    snapshot = inputs.latest_version(spark, master.events)
    # The one parse of the run (the expensive part): cached narrow, read by the counts and the
    # deduplication, then dropped once the deduplicated history holds what the views need.
    parsed = parse_master_events(inputs.read_at(spark, master.events, snapshot)).persist()
    history = None
    try:
        stats = parse_stats(parsed)
        published = published_version(settings)
        published_cutoff = cutoff_floor(published)
        if cutoff_ms is None:
            cutoff_ms = _choose_cutoff(
                settings, published_cutoff, stats.max_event_ts, drain=drain, until_ms=until_ms
            )
        elif published_cutoff is not None and cutoff_ms < published_cutoff:
            raise BatchError(
                f"cutoff {iso(cutoff_ms)} is before the published batch's "
                f"({iso(published_cutoff)}): choose a later one"
            )
        if logic_version is None and published is not None:
            logic_version = published.logic_version  # a scheduled batch keeps the published logic
        keep = event_filter(logic_version) if logic_version is not None else None
        history = deduplicated(parsed).persist()  # deduplicated once for the five views
        history.count()  # filled from the parse's cache, which can go now
        parsed.unpersist()
        views = batch_views(history, read_master_profiles(spark, master), cutoff_ms, keep)
        with connect(settings) as conn:
            create_all(conn)
            version = versions.begin_version(
                conn,
                LAMBDA,
                cutoff=to_timestamp(cutoff_ms),
                logic_version=logic_version,
                quarantined=stats.quarantined,
            )
            inputs.record(conn, version, snapshot)
            try:
                counts = write_version(settings, views, version)
            except Exception:
                versions.mark(conn, LAMBDA, version, "failed")
                raise
            versions.mark(conn, LAMBDA, version, "building", row_counts=counts)
    finally:
        parsed.unpersist()
        if history is not None:
            history.unpersist()
    return BatchResult(version, cutoff_ms, counts, stats.quarantined)


def compute_views(
    spark: SparkSession,
    settings: Settings,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
    *,
    until_ms: int | None = None,
) -> int:
    """Write a new batch version (status `building`, not visible); returns its number."""
    return compute(spark, settings, cutoff_ms, logic_version, until_ms=until_ms).version


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
    drain: bool = False,
) -> BatchResult:
    """Gate the new raw partitions, write a new batch version, gate its views and mark it
    ready; returns it (not yet published: the speed layer's hand-off does that). With
    `drain`, the cutoff is the hour after the last archived event (`lk drain`).

    A failing gate raises `BatchError` (with the suite's one-line reasons): nothing is marked
    ready, and the published version keeps serving.
    """
    from core.quality import QualityGateError

    run = run_name or f"batch-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    try:
        validate_raw(spark, settings, run)
        result = compute(spark, settings, cutoff_ms, logic_version, drain=drain)
        validate_views(spark, settings, result.version, run)
    except QualityGateError as exc:
        raise BatchError(f"nothing published: {exc}") from exc
    mark_ready(settings, result.version)
    return result
