"""The master dataset: Lambda's immutable, append-only record of everything the log delivered.

Two Delta tables on MinIO, written only by the archiver, one per topic, each holding the log's
records as Kafka gave them (`RAW_COLUMNS`: topic, partition, offset, Kafka timestamp, key,
value) and when they were archived:

- `events`: every record of `events`, valid or not;
- `profiles`: every profile version and tombstone of the CDC stream (compaction may drop
  them from the log later; the master dataset keeps them).

Nothing is parsed on the way in, so archiving runs at the speed of reading the log. Readers
validate with the shared parsing (`core.ingestion`: `parse_events`, `parse_profiles`),
which gives every invalid record its reason: the quarantine is the invalid records of the
master dataset, with their topic, partition and offset, derived where the data is read.

Both tables hold the UTC date and hour of the record's Kafka timestamp (`record_date`,
`record_hour`; for an event, `received_ts`), which needs no parsing and grows with time.
`events` is partitioned by both, so the records a batch has not seen yet sit in few, recent
partitions; `profiles` by the date alone (`profile_partitions`).

A master dataset written before the archiver kept raw records (parsed events partitioned by
`event_date`/`event_hour`, and a separate `quarantine` table) cannot be read or appended to:
`require_raw` recognises it and says how to start over (`MasterDatasetError`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from core.ingestion import KAFKA_COLUMNS
from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import Column, SparkSession

RAW_COLUMNS: Final = KAFKA_COLUMNS
"""The columns of a log record, as the Kafka source gives them and the parsing reads them."""
PARTITION_COLUMNS: Final = ("record_date", "record_hour")
"""The columns every record gets, the UTC date (``YYYY-MM-DD``) and hour (0-23) of its Kafka
timestamp, and the partitions of ``events``."""
PROFILE_PARTITION_COLUMNS: Final = ("record_date",)
"""The partitions of a new ``profiles`` table: the date alone. Profile versions are few per
hour, and nothing reads them by hour (a batch reads them all). Measured here on the bench's
backfill: its versions span 724 hours, and one file per hour cost 9-16 s of S3 requests (a
create, an upload and a size probe per file); one file per date cost 3 s."""


class MasterDatasetError(RuntimeError):
    """The master dataset is not in the form this code reads and writes (a one-line reason)."""


@dataclass(frozen=True)
class MasterDataset:
    root: str

    @classmethod
    def from_settings(cls, settings: Settings) -> MasterDataset:
        return cls(f"s3a://{settings.master_bucket}")

    @property
    def events(self) -> str:
        return f"{self.root}/events"

    @property
    def profiles(self) -> str:
        return f"{self.root}/profiles"


def partition_values() -> tuple[Column, Column]:
    """``record_date`` and ``record_hour`` of a Kafka record (the session time zone is UTC,
    see ``core.spark``)."""
    from pyspark.sql import functions as F

    return (
        F.date_format("timestamp", "yyyy-MM-dd").alias("record_date"),
        F.hour("timestamp").alias("record_hour"),
    )


def profile_partitions(spark: SparkSession, path: str) -> tuple[str, ...]:
    """The partitions to append ``profiles`` with: the table's own, when it exists (one
    archived before `PROFILE_PARTITION_COLUMNS` keeps date and hour, since Delta refuses an
    append partitioned otherwise), else `PROFILE_PARTITION_COLUMNS`."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return PROFILE_PARTITION_COLUMNS
    detail = DeltaTable.forPath(spark, path).detail().select("partitionColumns").first()
    assert detail is not None, f"{path}: Delta gave no detail"
    return tuple(detail[0])


def require_raw(spark: SparkSession, path: str) -> bool:
    """Whether the master dataset table at ``path`` exists (False: nothing archived there yet).

    A table without the raw columns and partitions, such as one the archiver wrote before it
    kept raw records, raises `MasterDatasetError` with what to do: an append to it or a read of
    it would otherwise fail deep inside Spark. Reads only the table's Delta log."""
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, path):
        return False
    columns = set(spark.read.format("delta").load(path).columns)
    missing = [c for c in (*RAW_COLUMNS, *PARTITION_COLUMNS) if c not in columns]
    if missing:
        raise MasterDatasetError(
            f"{path} is a master dataset of parsed events, from before the archiver kept raw "
            f"log records (it has no {', '.join(missing)}): run `lk stack reset`, or delete the "
            "master dataset and the archiver's checkpoints and archive the log again"
        )
    return True
