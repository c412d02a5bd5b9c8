"""What a Structured Streaming checkpoint says about its query: its identity and its offsets.

A micro-batch's function (`foreachBatch`) sees its rows and its batch id, not where in the log
they came from nor which checkpoint numbered them. Both are in the checkpoint, written by Spark
before the batch runs:

- `<checkpoint>/metadata`: `{"id": "<uuid>"}`, the query's id, kept across restarts from that
  checkpoint and new when the checkpoint is lost or replaced. Idempotency keys carry it, so a
  new checkpoint's batch 0 is never mistaken for the old checkpoint's batch 0 (already done).
- `<checkpoint>/offsets/<batch id>`: a version line, the batch's metadata, then one line per
  source: the offsets the batch reads up to (`{"topic": {"partition": offset}}`). Batch N-1's
  line is where batch N starts.

Read through Hadoop's FileSystem, so the object store's credentials are the session's own.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Offsets = dict[str, int]
"""The next offset to read, per ``topic/partition``."""


class CheckpointError(RuntimeError):
    """A checkpoint cannot be read, or does not belong to the progress recorded beside it."""


def _jvm(spark: SparkSession) -> Any:
    jvm = spark._jvm
    assert jvm is not None, "a classic Spark session: its driver's JVM"
    return jvm


def _hadoop_path(spark: SparkSession, uri: str) -> tuple[Any, Any]:
    """`uri` as a Hadoop path, and its file system (with the session's credentials)."""
    path = _jvm(spark).org.apache.hadoop.fs.Path(uri)
    return path, path.getFileSystem(spark._jsc.hadoopConfiguration())  # type: ignore[attr-defined]


def _read_text(spark: SparkSession, uri: str) -> str | None:
    path, fs = _hadoop_path(spark, uri)
    if not fs.exists(path):
        return None
    stream = fs.open(path)
    try:
        data = _jvm(spark).org.apache.commons.io.IOUtils.toByteArray(stream)
    finally:
        stream.close()
    return bytes(data).decode("utf-8")


def checkpoint_id(spark: SparkSession, checkpoint: str) -> str:
    """The id of the query that owns `checkpoint` (Spark writes it before the first batch)."""
    text = _read_text(spark, f"{checkpoint}/metadata")
    if text is None:
        raise CheckpointError(f"{checkpoint} has no metadata: its query has not started")
    return str(json.loads(text.splitlines()[0])["id"])


def batch_offsets(spark: SparkSession, checkpoint: str, batch_id: int) -> Offsets:
    """Where batch `batch_id` reads up to, per ``topic/partition`` of every Kafka source
    (empty when the checkpoint has no such batch)."""
    text = _read_text(spark, f"{checkpoint}/offsets/{batch_id}")
    return {} if text is None else parse_offset_log(text)


def last_committed(spark: SparkSession, checkpoint: str) -> int | None:
    """The greatest batch id in `checkpoint`'s commit log (`<checkpoint>/commits/<batch id>`,
    written when a batch's sink returned): None when no batch is committed."""
    path, fs = _hadoop_path(spark, f"{checkpoint}/commits")
    if not fs.exists(path):
        return None
    names = (status.getPath().getName() for status in fs.listStatus(path))
    return max((int(name) for name in names if name.isdigit()), default=None)


def parse_offset_log(text: str) -> Offsets:
    """The Kafka offsets of an offset log entry (lines: version, metadata, one per source)."""
    offsets: Offsets = {}
    for line in text.splitlines()[2:]:
        if not line.startswith("{"):
            continue  # a source without offsets of its own ("-")
        source: Mapping[str, Any] = json.loads(line)
        for topic, partitions in source.items():
            if isinstance(partitions, Mapping):
                for partition, offset in partitions.items():
                    offsets[f"{topic}/{partition}"] = int(offset)
    return offsets


def behind(ours: Mapping[str, int], theirs: Mapping[str, int]) -> dict[str, tuple[int, int]]:
    """The ``topic/partition``s where `ours` has not reached `theirs`: (ours, theirs)."""
    return {
        tp: (ours.get(tp, 0), offset)
        for tp, offset in sorted(theirs.items())
        if ours.get(tp, 0) < offset
    }
