"""The master dataset: Lambda's immutable, append-only record of everything the log delivered.

Three Delta tables on MinIO, written only by the archiver:

- `events`: every valid event record as received (raw `value`, its `partition`, `offset`,
  Kafka `timestamp`) with its parsed fields, partitioned by event date and hour;
- `profiles`: every profile version and tombstone of the CDC stream (compaction may drop
  them from the log later; the master dataset keeps them);
- `quarantine`: every invalid record with its reason, topic, partition and offset.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.settings import Settings


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

    @property
    def quarantine(self) -> str:
        return f"{self.root}/quarantine"


EVENT_PARTITION_COLUMNS = ("event_date", "event_hour")
