"""Delta writes shared by the layers."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


def append_once(
    df: DataFrame, path: str, app_id: str, batch_id: int, partition_by: Iterable[str] = ()
) -> None:
    """Append a micro-batch's rows at most once per (app_id, batch_id).

    Delta records the pair in the same commit as the data (`txnAppId`, `txnVersion`) and skips
    a write whose version it has already committed: a micro-batch replayed after a crash
    appends nothing twice.
    """
    writer = (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
    )
    partitions = tuple(partition_by)
    if partitions:
        writer = writer.partitionBy(*partitions)
    writer.save(path)
