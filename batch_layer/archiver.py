"""The archiver: the log (`events`, `profiles`) into the master dataset, exactly once.

    lk drain --architecture lambda      # runs it with an availableNow trigger, among others

Each topic is one Structured Streaming query from Kafka. Every micro-batch is validated with
the shared parsing (`core.views.parsing`) and appended to the master dataset's Delta tables
with Delta's idempotent-write options (`txnAppId`, `txnVersion` = the batch id). The query's
checkpoint maps batch ids to offsets, so a rerun after a crash replays the same offsets as the
same batch id, and Delta skips what that batch already committed: no duplicate, no loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.delta_io import append_once
from core.master_dataset import EVENT_PARTITION_COLUMNS, MasterDataset
from core.settings import Settings
from core.store import realtime
from core.store.connection import connect
from core.store.schema import create_all
from core.store.streams import LAMBDA_ARCHIVER as ARCHIVER_STREAM
from core.views import parsing

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

ARCHIVER_APP = "lk-archiver"


@dataclass(frozen=True)
class ArchiverConfig:
    checkpoint_root: str
    max_offsets_per_trigger: int = 500_000

    @classmethod
    def from_settings(cls, settings: Settings) -> ArchiverConfig:
        return cls(checkpoint_root=f"s3a://{settings.checkpoints_bucket}/archiver")


def _kafka_stream(
    spark: SparkSession, settings: Settings, topic: str, config: ArchiverConfig
) -> DataFrame:
    return (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        # Compaction of `profiles` leaves offset gaps by design.
        .option("failOnDataLoss", "false")
        .option("maxOffsetsPerTrigger", config.max_offsets_per_trigger)
        .load()
    )


def archive_events_batch(
    settings: Settings, master: MasterDataset, raw: DataFrame, batch_id: int
) -> None:
    from pyspark.sql import functions as F

    parsed = parsing.parse_events(raw).persist()
    try:
        archived_at = F.current_timestamp()
        events = (
            parsed.where(F.col("reason").isNull())
            .drop("reason")
            .withColumn("event_date", F.date_format("event_time", "yyyy-MM-dd"))
            .withColumn("event_hour", F.hour("event_time"))
            .withColumn("archived_at", archived_at)
        )
        append_once(
            events, master.events, f"{ARCHIVER_APP}-events", batch_id, EVENT_PARTITION_COLUMNS
        )
        quarantined = parsing.quarantine(parsed).withColumn("archived_at", archived_at)
        append_once(quarantined, master.quarantine, f"{ARCHIVER_APP}-quarantine", batch_id)
        stats = parsed.agg(
            F.count_if(F.col("reason").isNotNull()).alias("invalid"),
            F.max(F.when(F.col("reason").isNull(), F.col("event_ts"))).alias("max_ts"),
        ).first()
    finally:
        parsed.unpersist()
    _record_progress(
        settings,
        batch_id,
        int(stats["invalid"]) if stats else 0,
        stats["max_ts"] if stats else None,
    )


def _record_progress(settings: Settings, batch_id: int, invalid: int, max_ts: int | None) -> None:
    """The archive's counts in the serving store (the API's `quarantined` for Lambda), applied
    once per batch id like the Delta appends."""
    with connect(settings) as conn:
        create_all(conn)
        progress = realtime.load_progress(conn, ARCHIVER_STREAM)
        if batch_id <= progress.last_batch_id:
            return
        progress.quarantined += invalid
        if max_ts is not None:
            progress.max_event_ts = max(int(max_ts), progress.max_event_ts or int(max_ts))
        realtime.commit_batch(conn, progress, batch_id, [])


def archive_profiles_batch(
    settings: Settings, master: MasterDataset, raw: DataFrame, batch_id: int
) -> None:
    from pyspark.sql import functions as F

    profiles = parsing.parse_profiles(raw).withColumn("archived_at", F.current_timestamp())
    append_once(profiles, master.profiles, f"{ARCHIVER_APP}-profiles", batch_id)


def start(
    spark: SparkSession,
    settings: Settings,
    *,
    available_now: bool,
    config: ArchiverConfig | None = None,
) -> list[StreamingQuery]:
    """Start both archiving queries; with `available_now`, they stop at the log's current end."""
    config = config or ArchiverConfig.from_settings(settings)
    master = MasterDataset.from_settings(settings)
    jobs = (
        (settings.events_topic, "events", archive_events_batch),
        (settings.profiles_topic, "profiles", archive_profiles_batch),
    )
    queries = []
    for topic, name, archive_batch in jobs:
        writer = (
            _kafka_stream(spark, settings, topic, config)
            .writeStream.queryName(f"archiver-{name}")
            .option("checkpointLocation", f"{config.checkpoint_root}/{name}")
            .foreachBatch(lambda df, batch_id, f=archive_batch: f(settings, master, df, batch_id))
        )
        writer = (
            writer.trigger(availableNow=True)
            if available_now
            else writer.trigger(processingTime="5 seconds")
        )
        queries.append(writer.start())
    return queries


def drain(spark: SparkSession, settings: Settings) -> None:
    """Archive everything now in the log, then return."""
    for query in start(spark, settings, available_now=True):
        query.awaitTermination()
        if query.exception() is not None:
            raise RuntimeError(f"{query.name} failed: {query.exception()}")
