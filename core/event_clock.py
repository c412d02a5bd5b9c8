"""The event-time clock of a stream: one per partition of `events` (CONTRACT §3, late data).

Each partition keeps the greatest ``event_ts`` of the valid first occurrences read from it, as
Kafka Streams keeps stream time per partition. An event is behind the watermark when its
``event_ts`` is more than the delay before its own partition's clock, as the clock stood after
the earlier micro-batches; a partition read ahead of another (a burst, a backfill produced
while the stream runs, a replay) never makes the other's events late. The stream's watermark,
`meta.speed_watermark`, is the least of the partitions' watermarks: every window ending before
it is complete in every partition that has delivered an event.

Exact and deterministic: the clocks move only with the events read, never with processing time.
The stream engine applies the rule to a micro-batch at once (``stream_engine.engine``); the
workload generator and the oracle (``core.oracle.late_event_ids``) apply it record by record.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field


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

    def watermark(self, delay_ms: int) -> int | None:
        """The stream's watermark: the least partition's clock less the delay."""
        return min(self.greatest.values()) - delay_ms if self.greatest else None

    def latest(self) -> int | None:
        """The greatest event time read from any partition."""
        return max(self.greatest.values()) if self.greatest else None
