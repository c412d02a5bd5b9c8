"""The event-time clock of a stream: one per partition of `events` (CONTRACT §3, late data).

Each partition keeps the greatest ``event_ts`` of the valid first occurrences read from it, as
Kafka Streams keeps stream time per partition. An event is behind the watermark when its
``event_ts`` is more than the delay before the greatest ``event_ts`` of the valid first
occurrences that precede it in its own partition, judged **record by record in offset order**:
in earlier micro-batches and earlier in its own. So the late set is a function of the log
alone, never of how it is cut into micro-batches (a busy machine's larger ones, a replay's) or
of load; a partition read ahead of another (a burst, a backfill produced while the stream
runs, a replay) never makes the other's events late. The stream's watermark,
`meta.speed_watermark`, is the least of the partitions' watermarks: every window ending before
it is complete in every partition that has delivered an event.

Exact and deterministic: the clocks move only with the events read, never with processing time.
The rule in three forms, one per engine that applies it: ``EventClocks.is_late`` and
``advance``, record by record (the workload generator, the oracle's
``core.oracle.late_event_ids``); ``split_late`` over a micro-batch as Arrow (the stream
engine); ``late_column`` as a Spark window over a whole partition's history (the Kappa replay).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql import Column


@dataclass
class EventClocks:
    """Per partition of `events`, the greatest event time read so far (epoch ms)."""

    greatest: dict[int, int] = field(default_factory=dict)

    @classmethod
    def parse(cls, stored: Mapping[str, int] | None) -> EventClocks:
        """The clocks as the store keeps them (``{"<partition>": ms}``)."""
        return cls({int(p): int(ms) for p, ms in (stored or {}).items()})

    def stored(self) -> dict[str, int]:
        return {str(p): ms for p, ms in sorted(self.greatest.items())}

    def threshold(self, partition: int, delay_ms: int) -> int | None:
        """Event times before this are late in `partition` (None: nothing read there yet)."""
        clock = self.greatest.get(partition)
        return None if clock is None else clock - delay_ms

    def is_late(self, partition: int, event_ts: int, delay_ms: int) -> bool:
        threshold = self.threshold(partition, delay_ms)
        return threshold is not None and event_ts < threshold

    def advance(self, partition: int, event_ts: int) -> None:
        clock = self.greatest.get(partition)
        if clock is None or event_ts > clock:
            self.greatest[partition] = event_ts

    def thresholds(self, delay_ms: int, partitions: Iterable[int] = ()) -> dict[int, int | None]:
        """Per partition read so far and per one of `partitions` (every partition the stream
        reads), ``threshold``: what bounds a pattern's state. A partition with no clock yet may
        still deliver anything: None, which holds back what waits for every partition."""
        every = sorted({*partitions, *self.greatest})
        return {p: self.threshold(p, delay_ms) for p in every}

    def watermark(self, delay_ms: int) -> int | None:
        """The stream's watermark: the least partition's clock less the delay."""
        return min(self.greatest.values()) - delay_ms if self.greatest else None

    def latest(self) -> int | None:
        """The greatest event time read from any partition."""
        return max(self.greatest.values()) if self.greatest else None


def least_watermark(watermarks: Mapping[int, int | None] | None) -> int | None:
    """The least of every partition's ``EventClocks.thresholds``: what a state bounded by all
    of them may drop (search_conversions: a click comes on its clicker's partition). None
    while a partition has none (nothing read there yet), or with no partition."""
    marks = list((watermarks or {}).values())
    if not marks or any(mark is None for mark in marks):
        return None
    return min(mark for mark in marks if mark is not None)


_MIN = np.iinfo(np.int64).min


def split_late(events: pa.Table, clocks: EventClocks, delay_ms: int) -> pa.Array:
    """Which of a micro-batch's valid first occurrences are late (a boolean per row, in the
    table's order), each judged against its partition's clock as the records before it left
    it: the earlier micro-batches (`clocks`) and the rows before it in this one, by offset.
    `clocks` then advance with this batch's events."""
    n = events.num_rows
    late = np.zeros(n, dtype=bool)
    if n == 0:
        return pa.array(late)
    partition = events.column("partition").to_numpy()
    event_ts = events.column("event_ts").to_numpy()
    order = np.lexsort((events.column("offset").to_numpy(), partition))
    ordered = partition[order]
    bounds = np.flatnonzero(np.diff(ordered)) + 1
    for rows in np.split(order, bounds):  # one partition's rows, in offset order
        p = int(partition[rows[0]])
        ts = event_ts[rows]
        running = np.maximum.accumulate(ts)
        clock = clocks.greatest.get(p)
        before = np.empty_like(running)  # the greatest event time of the records before each
        before[0] = _MIN if clock is None else clock
        before[1:] = running[:-1] if clock is None else np.maximum(running[:-1], clock)
        known = before != _MIN  # the partition's first event ever has no clock to be behind
        # `ts < before - delay`, with no overflow near the 64-bit range's ends: where ts is
        # behind, the difference is exact as an unsigned 64-bit number.
        gap = before.view(np.uint64) - ts.view(np.uint64)
        late[rows] = known & (ts < before) & (gap > delay_ms)
        clocks.advance(p, int(running[-1]))
    return pa.array(late)


def late_column(delay_ms: int) -> Column:
    """Spark's form of the rule over deduplicated valid events (columns `partition`, `offset`,
    `event_ts`): true where the event is late, against the greatest `event_ts` before it in
    its partition's history (a window per partition in offset order, which Spark sorts and
    spills as it needs). A replay from offset 0 has no clock before its first record."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F  # deferred: pyspark

    before = (
        Window.partitionBy("partition").orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    )
    # Null before a partition's first event, and where the threshold would overflow (nothing
    # can be behind it): not late.
    threshold = F.try_subtract(F.max("event_ts").over(before), F.lit(delay_ms))
    return F.coalesce(F.col("event_ts") < threshold, F.lit(False))
