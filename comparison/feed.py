"""A live source: a generated workload produced to the log at a steady rate, not all at once.

The events file is cut into chunks of consecutive lines, one chunk per tick. After each chunk
the feed notes when it started and where the log ended, which is what freshness is measured
from (produced → visible), and how many lines the log holds so far, which is what the oracle
of a sample is computed over.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

from core.kafka_io import log_end, produce_file
from core.settings import Settings

TICK_S = 1.0
"""How often a chunk is produced: the rate's granularity, and freshness's resolution."""


@dataclass(frozen=True, slots=True)
class Mark:
    """A chunk produced: when it started (seconds on the run's clock) and where it left the
    `events` partitions (``topic/partition`` → end offset)."""

    produced_at_s: float
    events_end: dict[str, int]


class SteadyFeed:
    """Produces `lines` to the `events` topic at `rate_per_s`, in a thread of its own."""

    def __init__(
        self,
        settings: Settings,
        lines: list[bytes],
        rate_per_s: float,
        folder: Path,
        clock: Clock,
    ) -> None:
        self.settings = settings
        self.lines = lines
        self.per_tick = max(1, round(rate_per_s * TICK_S))
        self.folder = folder
        self.clock = clock
        self.produced_lines = 0
        self.marks: list[Mark] = []
        self.error: Exception | None = None
        self._thread: threading.Thread | None = None

    def start(self, upto: int | None = None) -> None:
        """Produce the lines not produced yet, up to line `upto` (all by default)."""
        end = len(self.lines) if upto is None else min(upto, len(self.lines))
        self._thread = threading.Thread(target=self._produce, args=(end,), daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def join(self) -> None:
        if self._thread is not None:
            self._thread.join()
        if self.error is not None:
            raise self.error

    def _produce(self, end: int) -> None:
        chunk = self.folder / "chunk.jsonl"
        topic = self.settings.events_topic
        try:
            while self.produced_lines < end:
                tick = self.clock.now()
                upto = min(end, self.produced_lines + self.per_tick)
                chunk.write_bytes(b"".join(self.lines[self.produced_lines : upto]))
                produce_file(self.settings, chunk, topic)
                self.produced_lines = upto
                ends = {tp: n for tp, n in log_end(self.settings).items() if tp.startswith(topic)}
                self.marks.append(Mark(tick, ends))
                time.sleep(max(0.0, tick + TICK_S - self.clock.now()))
        except Exception as exc:  # the run reports it; a feed must not die silently
            self.error = exc


class Clock:
    """Seconds since the comparison started: one clock for every figure."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.started
