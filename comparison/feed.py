"""A live source: a generated workload produced to the log line by line, at a steady rate.

One long-lived producer (librdkafka, with `lk produce`'s configuration and record rule: key
`user_id`, timestamp `received_ts`) is handed each line when its turn comes, as a real source
sends its events; its linger batches the few lines a couple of tens of milliseconds hold. After
a stall (a busy machine, a pause of the thread) the feed sends at most `CATCH_UP_S` of its
schedule at once and lets the rest slip: it never sends a burst of everything it owes.

Each record the broker acknowledges leaves a `Mark`: when its line was handed to the producer
(the run's clock) and where it landed (``topic/partition``, offset). Freshness is measured from
it to the moment a stream's committed offsets pass it; `produced_lines`, the lines handed over
so far, is what the oracle of a sample is computed over.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any, Final

# `lk produce`'s producer settings and its line → record rule (CONTRACT §4), so the feed's
# records are the ones `lk produce` would write, on the same partitions.
from core.kafka_io import line_producer, record_for
from core.settings import Settings

CATCH_UP_S: Final = 0.1
"""The most of its schedule the feed sends at once after falling behind; the rest slips."""
FLUSH_TIMEOUT_S: Final = 120.0


@dataclass(frozen=True, slots=True)
class Mark:
    """A record produced: when its line was handed to the producer (seconds on the run's
    clock) and where it landed in the `events` topic."""

    produced_at_s: float
    partition: str
    """``topic/partition``, as the streams' progress names it."""
    offset: int


class SteadyFeed:
    """Produces `lines` to the `events` topic at `rate_per_s`, in a thread of its own."""

    def __init__(
        self, settings: Settings, lines: list[bytes], rate_per_s: float, clock: Clock
    ) -> None:
        self.settings = settings
        self.lines = lines
        self.rate_per_s = rate_per_s
        self.clock = clock
        self.produced_lines = 0
        self.marks: list[Mark] = []
        """Appended in acknowledgement order, which keeps each partition's offset order."""
        self.started_s: float | None = None
        self.ended_s: float | None = None
        """When the first line was handed over, and when the last one was acknowledged."""
        self.slipped_s = 0.0
        """How far the schedule slipped behind the rate: stalls the feed did not catch up."""
        self.error: Exception | None = None
        self._failures: list[str] = []
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
        topic = self.settings.events_topic
        interval = 1.0 / self.rate_per_s
        try:
            producer = line_producer(self.settings)
            due = self.clock.now()
            if self.started_s is None:
                self.started_s = due
            while self.produced_lines < end:
                now = self.clock.now()
                if due > now:  # the wait for the next line's turn serves acknowledgements
                    producer.poll(due - now)
                    continue
                if now - due > CATCH_UP_S:
                    self.slipped_s += now - due - CATCH_UP_S
                    due = now - CATCH_UP_S
                self._send(producer, topic, self.lines[self.produced_lines])
                self.produced_lines += 1
                due += interval
            if producer.flush(FLUSH_TIMEOUT_S):
                raise RuntimeError(f"records to {topic} not acknowledged in {FLUSH_TIMEOUT_S} s")
            if self._failures:
                failed = len(self._failures)
                raise RuntimeError(f"{failed} records to {topic} failed: {self._failures[0]}")
            self.ended_s = self.clock.now()
        except Exception as exc:  # the run reports it; a feed must not die silently
            self.error = exc

    def _send(self, producer: Any, topic: str, line: bytes) -> None:
        key, value, timestamp, _parsed = record_for(line.rstrip(b"\r\n"), "received_ts")
        produced_at = self.clock.now()

        def acknowledged(err: Any, msg: Any) -> None:
            if err is not None:
                self._failures.append(str(err))
                return
            self.marks.append(Mark(produced_at, f"{topic}/{msg.partition()}", msg.offset()))

        while True:
            try:
                producer.produce(topic, value, key, on_delivery=acknowledged, timestamp=timestamp)
                return
            except BufferError:  # the local queue is full: let acknowledgements drain
                producer.poll(0.05)


class Clock:
    """Seconds since the comparison started: one clock for every figure."""

    def __init__(self) -> None:
        self.started = time.monotonic()

    def now(self) -> float:
        return time.monotonic() - self.started
