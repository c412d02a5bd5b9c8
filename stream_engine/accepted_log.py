"""The accepted log on MinIO: the events a stream accepted and the profile versions it read
(Lambda's speed layer keeps one; the Kappa job needs none).

Nothing in a micro-batch reads it: it is there for the hand-off, when a new batch cutoff (or
logic version) makes the speed layer recompute its real-time views from the events after the
cutoff. Every append carries the micro-batch id and uses Delta's idempotent write (`txnAppId`
= the table, `txnVersion` = the batch id), so a micro-batch replayed after a crash appends
nothing twice. (Keyed state lives in the serving store: ``core.store.state``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.delta_io import append_once

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


@dataclass(frozen=True)
class AcceptedLog:
    root: str  # s3a://lk-views/state/<stream>

    @property
    def events(self) -> str:
        return f"{self.root}/events"

    @property
    def profiles(self) -> str:
        return f"{self.root}/profiles"

    def append(
        self,
        df: DataFrame,
        path: str,
        batch_id: int,
        checkpoint_id: str,
        partition_by: tuple[str, ...] = (),
    ) -> None:
        """Append a micro-batch once per batch of checkpoint `checkpoint_id` (batch ids count
        within one checkpoint: a new checkpoint's batch 0 is not the old one's)."""
        from pyspark.sql import functions as F

        tagged = df.withColumn("batch_id", F.lit(batch_id).cast("long"))
        app_id = f"{path}#{checkpoint_id}"
        append_once(tagged, path, app_id=app_id, batch_id=batch_id, partition_by=partition_by)

    def read(self, spark: SparkSession, path: str) -> DataFrame | None:
        """The table's rows, None before its first write."""
        from delta.tables import DeltaTable

        if not DeltaTable.isDeltaTable(spark, path):
            return None
        return spark.read.format("delta").load(path)

    def delete(self, spark: SparkSession, path: str, condition: str) -> None:
        from delta.tables import DeltaTable

        if DeltaTable.isDeltaTable(spark, path):
            DeltaTable.forPath(spark, path).delete(condition)
