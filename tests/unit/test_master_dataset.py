"""The raw master dataset as a batch run reads it (local Delta tables, no stack): one pinned
snapshot parsed once for the raw gate and the recompute (``batch_layer.job.BatchInput``), and
a master dataset of the older, parsed format refused with one line instead of a Spark error.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from batch_layer import inputs
from batch_layer.archiver import archive_batch
from batch_layer.job import BatchInput, parse_stats
from core.ingestion import parse_events
from core.master_dataset import (
    PARTITION_COLUMNS,
    PROFILE_PARTITION_COLUMNS,
    MasterDatasetError,
    profile_partitions,
    require_raw,
)
from core.times import HOUR_MS
from lk.errors import guarded
from tests.unit.test_quality_events import LINES, T0, event
from tests.unit.test_spark_parsing import kafka_frame, kafka_rows

LATER = [
    event(7, "page_view", T0 + 2 * HOUR_MS, page="/later"),
    b"not json",
    event(8, "order", T0 + 2 * HOUR_MS + 1, amount_cents=-5),  # invalid: a negative amount
]


def records(spark: SparkSession, lines: list[bytes]) -> DataFrame:
    return kafka_frame(spark, kafka_rows(lines))


def ids(frame: DataFrame) -> set[str]:
    return {row["event_id"] for row in frame.select("event_id").collect()}


@pytest.fixture
def archive(spark: SparkSession, tmp_path: Path) -> str:
    """A raw events table of two archiver micro-batches (Delta versions 0 and 1) and a third
    append the snapshot does not reach (version 2)."""
    path = str(tmp_path / "events")
    archive_batch(records(spark, LINES), path, "test", 0)
    archive_batch(records(spark, LATER), path, "test", 1)
    archive_batch(
        records(spark, [event(9, "page_view", T0 + 3 * HOUR_MS, page="/x")]), path, "test", 2
    )
    return path


def pinned(spark: SparkSession, path: str, published: int | None) -> BatchInput:
    added = inputs.added_since(spark, path, published, at=1)
    return BatchInput(1, added, inputs.read_at(spark, path, 1))


def test_gate_and_recompute_read_one_snapshot_parsed_once(
    spark: SparkSession, archive: str
) -> None:
    alone = pinned(spark, archive, published=0)
    assert not alone.added.everything and alone.added.partitions == [("2026-11-01", 12)]
    gate_alone, parsed_alone = ids(alone.checked()), alone.parsed()
    stats_alone = parse_stats(parsed_alone)
    alone.release()

    shared = pinned(spark, archive, published=0)
    assert shared.share() == len(LINES) + len(LATER)  # version 1 only: "e9" came after it
    try:
        # The gate checks the valid events archived since the published snapshot (version 0);
        # the recompute reads every record of the pinned one: the same answers shared or not.
        assert ids(shared.checked()) == gate_alone == {"e7"}
        assert parse_stats(shared.parsed()) == stats_alone
        assert stats_alone.quarantined == 2
        assert ids(shared.parsed().where(F.col("reason").isNull())) == {
            f"e{n}" for n in range(1, 8)
        }
        assert shared.parsed().columns == parsed_alone.columns
    finally:
        shared.release()


def test_a_first_batch_checks_every_record_of_its_snapshot(
    spark: SparkSession, archive: str
) -> None:
    first = pinned(spark, archive, published=None)
    assert first.added.everything
    first.share()
    try:
        assert ids(first.checked()) == {f"e{n}" for n in range(1, 8)}
    finally:
        first.release()


def test_a_raw_table_is_accepted_and_a_missing_one_is_not_there(
    spark: SparkSession, archive: str, tmp_path: Path
) -> None:
    assert require_raw(spark, archive) is True
    assert require_raw(spark, str(tmp_path / "nothing-here")) is False


def old_master_events(spark: SparkSession, path: str) -> None:
    """The events table as the archiver wrote it before it kept raw records: the valid
    records with their parsed fields, partitioned by event date and hour."""
    parsed = parse_events(records(spark, LINES)).where(F.col("reason").isNull()).drop("reason")
    old = (
        parsed.withColumn("event_date", F.date_format("event_time", "yyyy-MM-dd"))
        .withColumn("event_hour", F.hour("event_time"))
        .withColumn("archived_at", F.current_timestamp())
    )
    old.write.format("delta").partitionBy("event_date", "event_hour").save(path)


def test_an_old_parsed_master_dataset_is_refused_with_what_to_do(
    spark: SparkSession, tmp_path: Path
) -> None:
    path = str(tmp_path / "old-events")
    old_master_events(spark, path)
    with pytest.raises(MasterDatasetError) as refused:
        require_raw(spark, path)
    reason = str(refused.value)
    assert path in reason and "lk stack reset" in reason and "archive the log again" in reason
    assert f"(it has no {', '.join(PARTITION_COLUMNS)})" in reason


def test_lk_reports_an_old_master_dataset_in_one_line() -> None:
    @click.command()
    @guarded
    def batch() -> None:
        raise MasterDatasetError("s3a://lk-master/events is old:\n  run `lk stack reset`")

    result = CliRunner().invoke(batch, [])
    assert result.exit_code == 1
    assert result.output == "lk: error: s3a://lk-master/events is old: run `lk stack reset`\n"
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_one_file_per_partition_gathers_each_dates_records_into_one_file(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A log with few records per hour across many hours (a backfill of ``profiles``): the
    archive, partitioned by date, writes one file per date, not one per Kafka partition and
    hour, and the same records, each with its hour, either way."""
    day = 24 * HOUR_MS
    lines = [event(n, "page_view", T0 + (n % 5) * day + n, page=f"/p{n}") for n in range(1, 61)]
    frame = records(spark, lines)  # its partitions each span the five dates
    spread, gathered = str(tmp_path / "spread"), str(tmp_path / "gathered")
    archive_batch(frame, spread, "test", 0)
    archive_batch(
        frame,
        gathered,
        "test",
        0,
        partition_by=PROFILE_PARTITION_COLUMNS,
        one_file_per_partition=True,
    )

    def files(path: str) -> int:
        return len(list(Path(path).rglob("*.parquet")))

    def rows(path: str) -> list[tuple[object, ...]]:
        table = spark.read.format("delta").load(path)
        return sorted(
            tuple(r) for r in table.select("offset", "value", *PARTITION_COLUMNS).collect()
        )

    assert files(gathered) == 5 < files(spread)
    assert rows(gathered) == rows(spread)


def test_profiles_keep_the_partitions_their_table_was_created_with(
    spark: SparkSession, tmp_path: Path
) -> None:
    """A new ``profiles`` table is partitioned by date; one archived by date and hour, before
    that, goes on by date and hour (Delta refuses an append partitioned otherwise)."""
    new, old = str(tmp_path / "new"), str(tmp_path / "old")
    assert profile_partitions(spark, new) == PROFILE_PARTITION_COLUMNS
    archive_batch(records(spark, LINES), old, "test", 0)  # as before: date and hour
    assert profile_partitions(spark, old) == PARTITION_COLUMNS
    archive_batch(
        records(spark, LATER), old, "test", 1, partition_by=profile_partitions(spark, old)
    )
    assert spark.read.format("delta").load(old).count() == len(LINES) + len(LATER)
