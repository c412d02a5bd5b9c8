"""The accepted log on MinIO: the events a stream accepted and the profile versions it read
(Lambda's speed layer keeps one; the Kappa job needs none).

Nothing in a micro-batch reads it: it is there for the hand-off, when a new batch cutoff (or
logic version) makes the speed layer recompute its real-time views from the events after the
cutoff. Each micro-batch writes one Parquet file per topic, straight from the Arrow table the
engine holds (no Spark job), named by the checkpoint's id and the batch id: a micro-batch
replayed after a crash writes the same object again, so nothing is appended twice (an S3
object is replaced whole, never seen half written). A hand-off trims the files whose events all
lie before the new cutoff. (Keyed state lives in the serving store: ``core.store.state``.)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

if TYPE_CHECKING:
    from pyarrow import fs

EVENTS = "events"
PROFILES = "profiles"


@dataclass(frozen=True)
class AcceptedLog:
    filesystem: fs.S3FileSystem
    root: str
    """``<bucket>/state/<stream>/accepted``: a folder per topic."""

    def _folder(self, topic: str) -> str:
        return f"{self.root}/{topic}"

    def append(self, table: pa.Table, topic: str, batch_id: int, checkpoint_id: str) -> None:
        """Write a micro-batch's rows once per batch of checkpoint `checkpoint_id` (batch ids
        count within one checkpoint: a new checkpoint's batch 0 is not the old one's)."""
        path = f"{self._folder(topic)}/{checkpoint_id}-{batch_id:012d}.parquet"
        pq.write_table(table, path, filesystem=self.filesystem, compression="zstd")

    def _files(self, topic: str) -> list[str]:
        from pyarrow import fs

        selector = fs.FileSelector(self._folder(topic), allow_not_found=True)
        infos = self.filesystem.get_file_info(selector)
        return sorted(i.path for i in infos if i.type == fs.FileType.File)

    def read(self, topic: str, schema: pa.Schema, since_ms: int | None = None) -> pa.Table:
        """The topic's rows (of events: those with ``event_ts >= since_ms``), as `schema`."""
        import pyarrow.dataset as ds

        files = self._files(topic)
        if not files:
            return schema.empty_table()
        dataset = ds.dataset(files, schema=schema, format="parquet", filesystem=self.filesystem)
        where = None if since_ms is None else pc.field("event_ts") >= since_ms
        return dataset.to_table(filter=where)

    def trim(self, before_ms: int) -> int:
        """Delete the event files whose events all lie before `before_ms`; returns how many."""
        deleted = 0
        for path in self._files(EVENTS):
            with self.filesystem.open_input_file(path) as f:
                stats = pq.ParquetFile(f).metadata
            latest = _max_event_ts(stats)
            if latest is not None and latest < before_ms:
                self.filesystem.delete_file(path)
                deleted += 1
        return deleted


def _max_event_ts(metadata: pq.FileMetaData) -> int | None:
    """The greatest ``event_ts`` of a file from its row groups' statistics; None if unknown
    (an empty file, or statistics missing: such a file is kept)."""
    column = metadata.schema.names.index("event_ts")
    latest = None
    for i in range(metadata.num_row_groups):
        stats = metadata.row_group(i).column(column).statistics
        if stats is None or not stats.has_min_max:
            return None
        latest = stats.max if latest is None else max(latest, stats.max)
    return latest
