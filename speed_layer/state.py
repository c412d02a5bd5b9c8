"""A stream's own state on MinIO: the events it has accepted, the profile versions it has seen,
and audit logs of what it dropped (late) or quarantined (invalid).

Every append carries the micro-batch id and uses Delta's idempotent write (`txnAppId` = the
table, `txnVersion` = the batch id), so a micro-batch replayed after a crash appends nothing
twice, and the rows a batch appended can still be told apart from older ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.delta_io import append_once

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession


@dataclass(frozen=True)
class StreamState:
    root: str  # s3a://lk-views/state/<stream>

    @property
    def events(self) -> str:
        return f"{self.root}/events"

    @property
    def profiles(self) -> str:
        return f"{self.root}/profiles"

    @property
    def late(self) -> str:
        return f"{self.root}/late"

    @property
    def quarantine(self) -> str:
        return f"{self.root}/quarantine"

    def append(
        self, df: DataFrame, path: str, batch_id: int, partition_by: tuple[str, ...] = ()
    ) -> None:
        from pyspark.sql import functions as F

        tagged = df.withColumn("batch_id", F.lit(batch_id).cast("long"))
        append_once(tagged, path, app_id=path, batch_id=batch_id, partition_by=partition_by)

    def read(
        self, spark: SparkSession, path: str, like: DataFrame, where: Column | None = None
    ) -> DataFrame:
        """The table's rows (empty with `like`'s schema plus batch_id before the first write)."""
        from delta.tables import DeltaTable
        from pyspark.sql import functions as F

        if not DeltaTable.isDeltaTable(spark, path):
            return like.limit(0).withColumn("batch_id", F.lit(0).cast("long"))
        frame = spark.read.format("delta").load(path)
        return frame if where is None else frame.where(where)

    def delete(self, spark: SparkSession, path: str, condition: str) -> None:
        from delta.tables import DeltaTable

        if DeltaTable.isDeltaTable(spark, path):
            DeltaTable.forPath(spark, path).delete(condition)
