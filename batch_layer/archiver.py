"""The archiver: the log (`events`, `profiles`) into the master dataset, exactly once.

    lk drain --architecture lambda      # runs it with an availableNow trigger, among others

Each topic is one Structured Streaming query from Kafka. Every micro-batch lands as it is read:
the raw records (`core.master_dataset.RAW_COLUMNS`) with the UTC date and hour of their Kafka
timestamp, appended to the topic's Delta table with Delta's idempotent-write options
(`txnAppId`, `txnVersion` = the batch id). Nothing is parsed, cached or counted here: the
micro-batch is one pass from Kafka to Parquet, so the archive keeps up with the log; readers
validate with the shared parsing (see `core.master_dataset`).

The query's checkpoint maps batch ids to offsets, so a rerun after a crash replays the same
offsets as the same batch id, and Delta skips what that batch already committed: no
duplicate, no loss. The idempotency key carries the checkpoint's identity (its query id), and
each batch records the offsets it archived in the store (stream `archiver-<topic>`) under that
identity: a lost or replaced checkpoint is refused with a reason rather than taken for the old
one (whose batches would look done) or started again from the log's beginning (twice).

One writer at a time: whoever runs the queries holds the archive lease (`ARCHIVE_LEASE`). The
continuous archiver (`lk archive`, the chart's Deployment) holds it while it runs; `drain` (the
batch's `close_archive`, `lk drain`) runs the queries only when it gets the lease, and otherwise
waits until the running archiver's recorded offsets reach the log's end as it was when asked.

Records of `events` that leave the log before they are archived (retention, a recreated topic)
stop the query with Spark's reason (`failOnDataLoss`); `profiles` is compacted, and its offset
gaps are by design.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from batch_layer import metrics
from batch_layer.errors import BatchError
from core.checkpoints import batch_offsets, behind, checkpoint_id
from core.delta_io import append_once
from core.kafka_io import log_end
from core.master_dataset import (
    PARTITION_COLUMNS,
    RAW_COLUMNS,
    MasterDataset,
    partition_values,
    profile_partitions,
    require_raw,
)
from core.settings import Settings
from core.spark import start_checkpointed, wait_stopped
from core.store import realtime
from core.store.connection import connect, lease, lease_alive
from core.store.streams import ARCHIVE_LEASE, archiver_stream

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

ARCHIVER_APP = "lk-archiver"

LEASE_CHECK_S = 10.0
"""How often the continuous archiver checks that it still holds the lease."""


class ArchiveError(BatchError):
    """The archive could not be brought up to the log's end."""


@dataclass(frozen=True)
class ArchiverConfig:
    checkpoint_root: str
    max_offsets_per_trigger: int = 2_000_000
    """Records per micro-batch at most. Each micro-batch has a fixed cost (planning, a Delta
    commit, the checkpoint's writes: about 1.5 s here), so a backlog goes faster in large ones;
    memory does not grow with it, the records stream through from Kafka to Parquet."""
    compression: str = "zstd"
    """The Parquet codec of the master dataset's files. Measured here on 2M generated events
    (Spark's CPU per micro-batch of 2M): zstd 31 s and 66 MB, lz4_raw 33 s, snappy 40 s and
    118 MB, uncompressed 31 s. The JSON values compress well, and every batch run reads them
    all back: zstd writes half of snappy's bytes for less CPU."""

    @classmethod
    def from_settings(cls, settings: Settings) -> ArchiverConfig:
        return cls(checkpoint_root=f"s3a://{settings.checkpoints_bucket}/archiver")


def _kafka_stream(
    spark: SparkSession, settings: Settings, topic: str, config: ArchiverConfig
) -> DataFrame:
    # Compaction of `profiles` leaves offset gaps by design; a gap in `events` is a loss.
    compacted = topic == settings.profiles_topic
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("failOnDataLoss", "false" if compacted else "true")
        .option("maxOffsetsPerTrigger", config.max_offsets_per_trigger)
        .load()
    )


def archived_rows(raw: DataFrame) -> DataFrame:
    """The master dataset's rows of Kafka records: the records as read, their partition
    values and when they were archived. A projection only: no parse, no shuffle."""
    from pyspark.sql import functions as F

    return raw.select(*RAW_COLUMNS, *partition_values(), F.current_timestamp().alias("archived_at"))


def archive_batch(
    raw: DataFrame,
    path: str,
    app_id: str,
    batch_id: int,
    compression: str = "zstd",
    *,
    partition_by: tuple[str, ...] = PARTITION_COLUMNS,
    one_file_per_partition: bool = False,
) -> None:
    """One micro-batch of a topic, as read, into its master dataset table (once per batch id),
    partitioned by ``partition_by``.

    ``one_file_per_partition``: gather each table partition's records into one task first, so
    that the batch writes one file per table partition instead of one per Kafka partition and
    table partition. For a log whose records are few per table partition, across many: a
    backfill of ``profiles`` (188k versions over 724 hours in the bench, by hour then) wrote
    about 2,000 small objects, 31-52 s of a micro-batch spent opening files, beside the events'
    archive."""
    rows = archived_rows(raw)
    if one_file_per_partition:
        rows = rows.repartition(*partition_by)
    options = {"compression": compression}
    append_once(rows, path, app_id, batch_id, partition_by, options)


class _TopicArchiver:
    """The micro-batch function of one topic's query: the batch into the master dataset once,
    then its offsets into the store, both under the checkpoint's identity."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        topic: str,
        name: str,
        path: str,
        config: ArchiverConfig,
        *,
        partition_by: tuple[str, ...],
        one_file_per_partition: bool,
    ) -> None:
        self.spark, self.settings = spark, settings
        self.topic = topic
        self.partition_by = partition_by
        self.one_file_per_partition = one_file_per_partition
        self.stream, self.path = archiver_stream(name), path
        self.checkpoint = f"{config.checkpoint_root}/{name}"
        self.compression = config.compression
        self._query_id: str | None = None
        self.failure: Exception | None = None

    def __call__(self, raw: DataFrame, batch_id: int) -> None:
        try:
            self._archive(raw, batch_id)
        except Exception as exc:
            self.failure = exc  # the reason, rather than Spark's wrapping of a traceback
            raise

    def _archive(self, raw: DataFrame, batch_id: int) -> None:
        started = time.perf_counter()
        if self._query_id is None:  # Spark wrote it before the first batch
            self._query_id = checkpoint_id(self.spark, self.checkpoint)
        with connect(self.settings) as conn:
            progress = realtime.claim(realtime.load_progress(conn, self.stream), self._query_id)
        app_id = f"{ARCHIVER_APP}-{self.stream}-{self._query_id}"
        archive_batch(
            raw,
            self.path,
            app_id,
            batch_id,
            self.compression,
            partition_by=self.partition_by,
            one_file_per_partition=self.one_file_per_partition,
        )
        before = dict(progress.offsets)
        progress.offsets |= batch_offsets(self.spark, self.checkpoint, batch_id)
        with connect(self.settings) as conn:
            if realtime.commit_batch(conn, progress, batch_id, []):
                metrics.archived(self.topic, started, before, progress.offsets)


def start(
    spark: SparkSession,
    settings: Settings,
    *,
    available_now: bool,
    config: ArchiverConfig | None = None,
) -> list[tuple[StreamingQuery, _TopicArchiver]]:
    """Start both archiving queries (each with its micro-batch function); with
    `available_now`, they stop at the log's current end. A master dataset in an older format
    stops here (`MasterDatasetError`), before any append. The caller holds the archive lease
    (`drain` and `follow` do)."""
    config = config or ArchiverConfig.from_settings(settings)
    master = MasterDataset.from_settings(settings)
    for path in (master.events, master.profiles):
        require_raw(spark, path)
    # (topic, name, table, partitions, one file per partition): events are many per hour, and
    # a shuffle of a 2M-record micro-batch would cost more than its files; profile versions
    # are few per date.
    jobs = (
        (settings.events_topic, "events", master.events, PARTITION_COLUMNS, False),
        (
            settings.profiles_topic,
            "profiles",
            master.profiles,
            profile_partitions(spark, master.profiles),
            True,
        ),
    )
    queries = []
    for topic, name, path, partition_by, one_file in jobs:
        batch = _TopicArchiver(
            spark,
            settings,
            topic,
            name,
            path,
            config,
            partition_by=partition_by,
            one_file_per_partition=one_file,
        )
        writer = (
            _kafka_stream(spark, settings, topic, config)
            .writeStream.queryName(f"archiver-{name}")
            .foreachBatch(batch)
        )
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime="5 seconds")
        )
        queries.append((start_checkpointed(spark, writer, batch.checkpoint), batch))
    return queries


def _raise_failed(queries: list[tuple[StreamingQuery, _TopicArchiver]]) -> None:
    for query, batch in queries:
        if query.exception() is not None:
            reason = batch.failure if batch.failure is not None else query.exception()
            raise ArchiveError(f"{query.name} failed: {reason}")


def archived(settings: Settings) -> dict[str, int]:
    """The offsets the archive has recorded, per ``topic/partition`` of both topics."""
    with connect(settings) as conn:
        return realtime.archived(conn)


def drain(
    spark: SparkSession, settings: Settings, echo: Callable[[str], None] = lambda _: None
) -> None:
    """Archive everything now in the log, then return: with the lease, by running the queries
    up to the log's end; without it, by waiting for the archiver that holds it to get there."""
    with lease(settings, ARCHIVE_LEASE, wait=False) as held:
        if held is not None:
            queries = start(spark, settings, available_now=True)
            for query, _ in queries:
                wait_stopped(query)
            _raise_failed(queries)
            return
    target = log_end(settings)
    echo("  another archiver holds the archive lease: waiting for it to reach the log's end")
    deadline = time.monotonic() + settings.archive_wait_s
    while missing := behind(archived(settings), target):
        if time.monotonic() > deadline:
            where = ", ".join(f"{tp} at {ours} of {end}" for tp, (ours, end) in missing.items())
            raise ArchiveError(
                f"the running archiver did not reach the log's end within "
                f"{settings.archive_wait_s} s ({where})"
            )
        time.sleep(1.0)


def follow(spark: SparkSession, settings: Settings, echo: Callable[[str], None]) -> None:
    """Archive continuously, as the one holder of the archive lease, until a query stops or the
    lease is lost (then stop: a second writer may already have it)."""
    echo("archiver: waiting for the archive lease")
    with lease(settings, ARCHIVE_LEASE, wait=True) as conn:
        assert conn is not None
        queries = start(spark, settings, available_now=False)
        echo("archiver running; stop with SIGTERM")
        try:
            while all(query.isActive for query, _ in queries):
                wait_stopped(queries[0][0], LEASE_CHECK_S)
                if not lease_alive(conn):
                    raise ArchiveError("the archive lease was lost (its store connection broke)")
            _raise_failed(queries)
        finally:
            for query, _ in queries:
                query.stop()
