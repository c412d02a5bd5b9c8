"""The training run of `core.class_archive`: what Spark jobs here do, on a small workload, in a
JVM that writes the classes it loaded to an archive when it exits.

Run as `python -m core.class_archive_training` by `core.class_archive.build`, which gives the
JVM its `-XX:ArchiveClassesAtExit` option. Covered: a session; the shared parse
(`core.ingestion`, both its compact and exact readings) and deduplication, on a static frame
and in a streaming query with the RocksDB state store and `foreachBatch`; rows to Arrow;
Delta; the Kafka source; s3a on MinIO. A class it does not load still loads at run time, from
its jar, as without an archive.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from core import ingestion
from core.settings import Settings
from core.spark import build_spark_session, start_checkpointed, wait_stopped
from core.workload import WorkloadSpec, generate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def _as_kafka_records(lines: DataFrame) -> DataFrame:
    """Text lines as the Kafka source's columns, in topic `events`."""
    from pyspark.sql import functions as F

    return lines.select(
        F.lit(None).cast("binary").alias("key"),
        F.col("value").cast("binary").alias("value"),
        F.lit("events").alias("topic"),
        F.lit(0).alias("partition"),
        F.xxhash64("value").alias("offset"),  # a position per line, in a stream too
        F.current_timestamp().alias("timestamp"),
    )


def train(settings: Settings, folder: Path) -> None:
    """Run the training in a new Spark JVM, and wait for that JVM to exit."""
    spark = build_spark_session(settings, "lk-class-archive")
    try:
        _exercise(spark, settings, folder)
    finally:
        _stop_and_wait(spark)


def _exercise(spark: SparkSession, settings: Settings, folder: Path) -> None:
    events = folder / "events"
    events.mkdir()
    generate(WorkloadSpec(seed=1, events=2_000), events / "events.jsonl", folder / "p.jsonl")

    parsed = ingestion.parse_events(_as_kafka_records(spark.read.text(str(events))))
    ingestion.first_in_log(ingestion.valid_events(parsed)).toArrow()
    ingestion.quarantine(parsed).toArrow()
    table = str(folder / "delta")
    ingestion.valid_events(parsed).write.format("delta").save(table)
    spark.read.format("delta").load(table).count()

    stream = ingestion.parse_events(
        _as_kafka_records(spark.readStream.format("text").load(str(events)))
    )
    writer = (
        ingestion.first_occurrences(stream, "events")
        .writeStream.foreachBatch(lambda batch, _id: batch.toArrow())
        .trigger(availableNow=True)
    )
    query = start_checkpointed(spark, writer, str(folder / "checkpoint"))
    wait_stopped(query, 300)
    if query.exception() is not None:
        raise RuntimeError(f"the training stream failed: {query.exception()}")

    (
        spark.read.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribePattern", "lk-class-archive-none")
        .load()
        .count()
    )
    with contextlib.suppress(Exception):  # no such bucket: the client's classes load all the same
        spark.read.text(f"s3a://{settings.checkpoints_bucket}-class-archive/none").count()


def _stop_and_wait(spark: SparkSession) -> None:
    """Stop Spark, then wait for its JVM to exit, which is when it writes the archive."""
    from pyspark.core.context import SparkContext

    gateway = SparkContext._gateway
    spark.stop()
    if gateway is not None:
        gateway.proc.stdin.close()  # the JVM exits when its stdin closes
        gateway.proc.wait(timeout=300)


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="lk-class-archive-") as tmp:
        train(Settings(), Path(tmp))
