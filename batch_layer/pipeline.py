"""The batch layer's run as steps, each a gate or a write: what the `lambda_batch` DAG runs.

    partitions = close_archive(spark, settings)        # the log -> master dataset
    pinned = open_input(spark, settings)                # its events at one Delta version
    validate_raw(spark, settings, run, batch_input=pinned)      # gate: what the batch adds
    version = compute_views(spark, settings, snapshot=pinned.snapshot)  # new, `building`
    validate_views(spark, settings, version, run)       # gate: its views (else `failed`)
    lk.pipelines.publish_batch(settings, version)  # `ready`, then the speed layer's
                                                          # hand-off (two layers: lk joins them)

A gate raises ``quality.QualityGateError`` and nothing after it runs, so a failing suite
leaves the published version serving: readers only ever see a version that passed both gates.
`run_batch` is these steps in one call (without the archive and the hand-off):

    run_batch(spark, settings, cutoff_ms=None)   # scheduled: the cutoff the archive allows

The master dataset holds raw log records: the raw gate and the recompute validate them with the
shared parsing (`core.ingestion`) as they read them, at one pinned snapshot
(`batch_layer.job.BatchInput`; the DAG passes the gate's snapshot on to `compute_views`).
`run_batch` parses that snapshot once for both.

Every step is idempotent and safe to retry: the archiver appends each micro-batch once;
a gate only reads (and re-records its result); a retried `compute_views` writes a new version
(a version left `building` by a crash is never published, and its rows are dropped at the next
hand-off); `mark_ready` (and so `publish_batch`) does nothing for a version already published
or superseded.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from typing import TYPE_CHECKING

from batch_layer import archiver, inputs
from batch_layer.cutoff import choose_cutoff
from batch_layer.errors import BatchError, NothingNewError
from batch_layer.inputs import Partition
from batch_layer.job import (
    LAMBDA,
    RECOMPUTE,
    BatchInput,
    BatchResult,
    batch_matches,
    batch_partials,
    batch_views,
    checked_events,
    deduplicated,
    in_partitions,
    open_input,
    parse_stats,
    read_master_events,
    read_master_profiles,
    require_input,
    write_matches,
    write_partials,
    write_version,
)
from core.master_dataset import MasterDataset, require_raw
from core.settings import Settings
from core.spark import described
from core.store import batch_inputs, versions
from core.store import quality_results as records
from core.store.connection import connect
from core.times import iso, to_timestamp
from core.views.logic_versions import logic_query
from quality import QualityGateError, layers, validate
from quality.checks import gate_batch_version, raise_on_failure
from quality.result import QualityResult

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


# --- 1. the archive -------------------------------------------------------------------------


def close_archive(spark: SparkSession, settings: Settings) -> list[Partition]:
    """Archive the log to its current end; returns the partitions that received data since the
    published batch's snapshot (all of them before the first), sorted."""
    archiver.drain(spark, settings)
    return new_partitions(spark, settings)


def partitions_between(
    spark: SparkSession, settings: Settings, since: date | None, until: date | None
) -> list[Partition]:
    """The master dataset's (date, hour) partitions with a date in [since, until]; an open end
    reaches the first or last partition. The dates are those the records reached the log (their
    Kafka timestamp), read from Delta's file list: nothing is parsed or scanned."""
    if since is not None and until is not None and until < since:
        raise BatchError(f"until ({until}) is before since ({since})")
    events = read_master_events(spark, MasterDataset.from_settings(settings))
    return sorted(
        (day, hour)
        for day, hour in inputs.partitions_of(set(events.inputFiles()))
        if (since is None or day >= since.isoformat())
        and (until is None or day <= until.isoformat())
    )


def new_partitions(spark: SparkSession, settings: Settings) -> list[Partition]:
    """The master dataset's partitions that received data since the snapshot the published
    batch read (every partition before the first); empty without an archive."""
    master = MasterDataset.from_settings(settings)
    if not require_raw(spark, master.events):
        return []
    return inputs.added_since(spark, master.events, inputs.published_input(settings)).partitions


# --- 2. the raw gate ------------------------------------------------------------------------


def partition_rows(
    spark: SparkSession, settings: Settings, partitions: list[Partition]
) -> DataFrame:
    """The valid events of every master dataset record in ``partitions``, validated with the
    shared parsing (`checked_events`)."""
    raw = read_master_events(spark, MasterDataset.from_settings(settings))
    return checked_events(raw.where(in_partitions(partitions)))


def validate_raw(
    spark: SparkSession,
    settings: Settings,
    run_name: str,
    partitions: list[Partition] | None = None,
    *,
    batch_input: BatchInput | None = None,
) -> QualityResult:
    """Gate ``master_partition`` on what the next batch adds: the records of ``batch_input``
    (default: the latest snapshot) archived since the published batch's snapshot, or every
    record of ``partitions``; raises ``QualityGateError`` on failure. Nothing new to check
    passes, with 0 expectations."""
    frame = None
    if partitions is not None:
        if partitions:
            frame = partition_rows(spark, settings, partitions)
    else:
        if batch_input is None:
            batch_input = open_input(spark, settings)
        if batch_input is not None and batch_input.added.files:
            frame = batch_input.checked()
    if frame is None:
        return QualityResult(
            suite="master_partition",
            layer=layers.LAMBDA_BATCH,
            run_name=run_name,
            success=True,
            rows=0,
            evaluated=0,
            failed=0,
        )
    result = validate(
        "master_partition", frame, settings=settings, layer=layers.LAMBDA_BATCH, run_name=run_name
    )
    with connect(settings) as conn:
        records.record(conn, [result])
    raise_on_failure([result])
    return result


# --- 3. the views ---------------------------------------------------------------------------


def published_version(settings: Settings) -> versions.Version | None:
    """The batch version readers get now (None before the first hand-off)."""
    with connect(settings) as conn:
        return versions.current(conn, LAMBDA)


def compute(
    spark: SparkSession,
    settings: Settings,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
    *,
    drain: bool = False,
    until_ms: int | None = None,
    batch_input: BatchInput | None = None,
    skip_unchanged: bool = False,
) -> BatchResult:
    """Recompute the batch views from ``batch_input`` (default: the latest snapshot of the
    master dataset) and write them as a new version, left `building`, with the snapshot it read.

    The cutoff: see `batch_layer.cutoff.choose_cutoff` (``cutoff_ms``, ``drain``, ``until_ms``).
    The recompute is the input's last reader: it releases the parse once the deduplicated
    history is cached. With ``skip_unchanged``, a version that would equal the published one
    (`unchanged_since`) raises `NothingNewError` instead, before anything is written.
    """
    master = MasterDataset.from_settings(settings)
    if batch_input is None:
        batch_input = require_input(spark, settings)
    history = None
    try:
        # The parse (the expensive part), cached: read by the counts and the deduplication,
        # then dropped once the deduplicated history holds what the views need.
        parsed = batch_input.parsed()
        with described(spark, f"{RECOMPUTE}: read the master dataset, parse"):
            stats = parse_stats(parsed)
        published = published_version(settings)
        cutoff_ms = choose_cutoff(
            cutoff_ms,
            None if published is None else published.cutoff_ms,
            stats.max_event_ts,
            settings.watermark_delay_ms,
            drain=drain,
            until_ms=until_ms,
        )
        if logic_version is None and published is not None:
            logic_version = published.logic_version  # a scheduled batch keeps the published logic
        if skip_unchanged and published is not None:
            unchanged_since(published, batch_input, cutoff_ms, logic_version)
        chosen_logic = logic_query(logic_version) if logic_version is not None else None
        history = deduplicated(parsed).persist()  # deduplicated once for the views
        with described(spark, f"{RECOMPUTE}: deduplicate"):
            history.count()  # filled from the parse's cache, which can go now
        batch_input.release()
        profiles = read_master_profiles(spark, master)
        views = batch_views(history, profiles, cutoff_ms, chosen_logic)
        partials = batch_partials(history, profiles, cutoff_ms, chosen_logic)
        matches = batch_matches(history, profiles, cutoff_ms, chosen_logic)
        with connect(settings) as conn:
            version = versions.begin_version(
                conn,
                LAMBDA,
                cutoff=to_timestamp(cutoff_ms),
                logic_version=logic_version,
                quarantined=stats.quarantined,
            )
            batch_inputs.record(conn, version, batch_input.snapshot)
            try:
                counts = write_version(conn, settings, views, version)
                write_partials(conn, partials, version)
                write_matches(settings, matches, version)
            except Exception:
                versions.mark(conn, LAMBDA, version, "failed")
                raise
            versions.mark(conn, LAMBDA, version, "building", row_counts=counts)
    finally:
        batch_input.release()
        if history is not None:
            history.unpersist()
    return BatchResult(version, cutoff_ms, counts, stats.quarantined)


def unchanged_since(
    published: versions.Version, batch_input: BatchInput, cutoff_ms: int, logic_version: str | None
) -> None:
    """Raise `NothingNewError` when a version of ``batch_input`` at ``cutoff_ms`` with
    ``logic_version`` would equal ``published``: no record archived since the snapshot it read
    (so the same records, the same invalid ones), the same cutoff and the same logic."""
    same_records = not batch_input.added.everything and not batch_input.added.files
    same_view = (published.cutoff_ms, published.logic_version) == (cutoff_ms, logic_version)
    if same_records and same_view:
        raise NothingNewError(
            f"nothing archived since batch version {published.version} "
            f"(cutoff {iso(cutoff_ms)}, logic {logic_version or 'default'}), which keeps serving"
        )


def compute_views(
    spark: SparkSession,
    settings: Settings,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
    *,
    until_ms: int | None = None,
    snapshot: int | None = None,
) -> int:
    """Write a new batch version (status `building`, not visible); returns its number.
    ``snapshot``: the master events' Delta version to read, the one the raw gate checked
    (default: the latest).

    Nothing new to compute raises `NothingNewError` (the DAGs' tasks skip on it): nothing
    archived yet, no valid event yet, or a version that would equal the published one
    (`unchanged_since`). `run_batch` (`lk batch`, `lk drain`) writes a version even then."""
    batch_input = require_input(spark, settings, snapshot)
    result = compute(
        spark,
        settings,
        cutoff_ms,
        logic_version,
        until_ms=until_ms,
        batch_input=batch_input,
        skip_unchanged=True,
    )
    return result.version


# --- 4. the views' gate ---------------------------------------------------------------------


def validate_views(
    spark: SparkSession, settings: Settings, version: int, run_name: str
) -> list[QualityResult]:
    """Gate ``batch_views.<view>`` on every view of ``version``. On failure the version is
    marked `failed` (it can never be published) and ``QualityGateError`` is raised."""
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


def run_batch(
    spark: SparkSession,
    settings: Settings,
    *,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
    run_name: str | None = None,
    drain: bool = False,
) -> BatchResult:
    """Gate what the master dataset holds beyond the published batch, write a new batch
    version from the same snapshot (parsed once for both), gate its views and mark it ready;
    returns it (not yet published: the speed layer's hand-off does that). With `drain`, the
    cutoff is the hour after the last archived event (`lk drain`).

    A failing gate raises `BatchError` (with the suite's one-line reasons): nothing is marked
    ready, and the published version keeps serving.
    """
    run = run_name or f"batch-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    batch_input = require_input(spark, settings)
    try:
        # One snapshot and one parse for both readers: the gate checks exactly what the
        # recompute then reads, and the raw records are parsed once (cached), not by each.
        with described(spark, f"{RECOMPUTE}: read the master dataset, parse"):
            batch_input.share()
        with described(spark, f"{RECOMPUTE}: the master dataset's gate"):
            validate_raw(spark, settings, run, batch_input=batch_input)
        result = compute(
            spark, settings, cutoff_ms, logic_version, drain=drain, batch_input=batch_input
        )
        validate_views(spark, settings, result.version, run)
    except QualityGateError as exc:
        raise BatchError(f"nothing published: {exc}") from exc
    finally:
        batch_input.release()
    mark_ready(settings, result.version)
    return result
