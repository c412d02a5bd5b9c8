"""The inbox: micro-batches Spark has read and deduplicated that the serving store has not
committed yet, on MinIO inside the query's checkpoint folder.

The stream engine pipelines its micro-batches: Spark's job for batch N+1 (Kafka, the parse, the
deduplication) runs while the driver merges batch N into keyed state and commits it. So a
micro-batch's function hands its records over and returns, and Spark commits the batch in its
checkpoint (offsets, deduplication state) before the serving store has it. In between, the
records are only here: the function writes them before it returns, the merge deletes them
after the store's commit. A restart merges what it finds here after the store's last batch
before anything else: Spark will not read those records again, and its deduplication state
already holds their events.

One Arrow IPC object per batch, with the offsets the batch reads up to and the checkpoint's
id in its schema's metadata. An S3 object is replaced whole, never seen half written, and one
written again for the same batch (Spark ran it again after a crash) holds the same records.
Deleting the checkpoint folder deletes the inbox with it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyarrow import fs

    from core.checkpoints import Offsets

_END = b"lk.end_offsets"
_CHECKPOINT = b"lk.checkpoint_id"
_COMPRESSION = "lz4"  # a few hundred MB/s: small beside the Spark job, a third of the bytes


@dataclass(frozen=True)
class PendingBatch:
    """A micro-batch handed from Spark to the merge: its records and where it reads up to."""

    batch_id: int
    records: pa.Table
    end: Offsets
    """The next offset to read per ``topic/partition`` once this batch is committed."""


def inbox_root(checkpoint: str) -> str:
    """The inbox's folder (``<bucket>/<path>``) inside an object-store checkpoint."""
    _scheme, found, rest = checkpoint.partition("://")
    if not found:
        raise ValueError(f"{checkpoint}: the inbox needs a checkpoint on the object store")
    return f"{rest.rstrip('/')}/inbox"


@dataclass(frozen=True)
class Inbox:
    filesystem: fs.FileSystem
    root: str
    """``<bucket>/<stream>/inbox``, inside the query's checkpoint folder (``inbox_root``)."""

    def _path(self, batch_id: int) -> str:
        return f"{self.root}/{batch_id:012d}.arrow"

    def put(self, batch: PendingBatch, checkpoint_id: str) -> None:
        metadata = {_END: json.dumps(batch.end).encode(), _CHECKPOINT: checkpoint_id.encode()}
        table = batch.records.replace_schema_metadata(metadata)
        options = pa.ipc.IpcWriteOptions(compression=_COMPRESSION)
        with (
            self.filesystem.open_output_stream(self._path(batch.batch_id)) as sink,
            pa.ipc.new_file(sink, table.schema, options=options) as writer,
        ):
            writer.write_table(table)

    def get(self, batch_id: int) -> tuple[PendingBatch, str]:
        """The batch and the id of the checkpoint it was written under."""
        with self.filesystem.open_input_file(self._path(batch_id)) as source:
            table = pa.ipc.open_file(source).read_all()
        metadata = table.schema.metadata or {}
        end = {tp: int(offset) for tp, offset in json.loads(metadata[_END]).items()}
        return (
            PendingBatch(batch_id, table.replace_schema_metadata(None), end),
            metadata[_CHECKPOINT].decode(),
        )

    def batch_ids(self) -> list[int]:
        from pyarrow import fs

        selector = fs.FileSelector(self.root, allow_not_found=True)
        infos = self.filesystem.get_file_info(selector)
        names = (i.base_name for i in infos if i.type == fs.FileType.File)
        return sorted(int(n.removesuffix(".arrow")) for n in names if n.endswith(".arrow"))

    def remove(self, batch_id: int) -> None:
        from pyarrow import fs

        path = self._path(batch_id)
        if self.filesystem.get_file_info(path).type != fs.FileType.NotFound:
            self.filesystem.delete_file(path)
