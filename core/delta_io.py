"""Delta writes shared by the layers."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def append_once(
    df: DataFrame,
    path: str,
    app_id: str,
    batch_id: int,
    partition_by: Iterable[str] = (),
    options: Mapping[str, str] | None = None,
) -> None:
    """Append a micro-batch's rows at most once per (app_id, batch_id).

    Delta records the pair in the same commit as the data (`txnAppId`, `txnVersion`) and skips
    a write whose version it has already committed: a micro-batch replayed after a crash
    appends nothing twice. ``options`` go to the Parquet writer (e.g. ``compression``).
    """
    writer = (
        df.write.format("delta")
        .mode("append")
        .option("txnAppId", app_id)
        .option("txnVersion", batch_id)
        .options(**(options or {}))
    )
    partitions = tuple(partition_by)
    if partitions:
        writer = writer.partitionBy(*partitions)
    writer.save(path)


def delete_tree(spark: SparkSession, uri: str) -> bool:
    """Delete everything under `uri` (s3a:// or a local path); False if nothing was there.

    Through Hadoop's FileSystem, so the object store's credentials are the session's own.
    """
    jvm = spark._jvm
    assert jvm is not None  # set for as long as the session's JVM gateway lives
    path = jvm.org.apache.hadoop.fs.Path(uri)
    fs = path.getFileSystem(spark._jsc.hadoopConfiguration())
    return bool(fs.exists(path) and fs.delete(path, True))
