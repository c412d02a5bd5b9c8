"""The stream engine's log bounds: where each partition of a topic begins and ends (its log
start, the first offset still retained, and its end, the next offset to be written).

The engine owns one consumer for them and asks it at every micro-batch for its data-loss check
(``core.kafka_io.lost_records``: the log start moved past the offsets the stream had not read
yet). What else wants the ends of `events` the engine sees is told, not asked: an observer
(`observe_ends`; the metrics' freshness) gets each end read, and may ask for a fresh read
itself (the bounds are a ``Callable[[str], ...]``: a scrape of an idle stream). The check
works the same with no observer at all.

Shared by the query's thread and a scrape (one call at a time). Closed when the engine's query
stops, it opens again only when the engine starts another (`reopen`): a scrape of a stopped
stream never leaves a consumer open.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from core.kafka_io import LogBounds
from core.settings import Settings

EndsObserver = Callable[[Mapping[int, int], float], None]
"""Told the end of each partition of `events` (the next offset to be written) and when it was
read (Unix time)."""


class StreamLogBounds(LogBounds):
    """The engine's consumer of the log's bounds, telling its observers the ends of `events`."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(settings)
        self._observers: list[EndsObserver] = []
        self._lock = threading.Lock()
        self._closed = False

    def observe_ends(self, observer: EndsObserver) -> None:
        """From now on, `observer` is told the ends of `events` at every read."""
        self._observers.append(observer)

    def __call__(self, topic: str) -> dict[int, tuple[int, int]]:
        """(log start, log end) per partition of `topic`."""
        with self._lock:
            if self._closed:
                raise RuntimeError("the stream's log consumer is closed")
            bounds = super().__call__(topic)
        if topic == self.settings.events_topic and self._observers:
            ends = {p: high for p, (_, high) in bounds.items()}
            at = time.time()
            for observer in self._observers:
                observer(ends, at)
        return bounds

    def close(self) -> None:
        with self._lock:
            self._closed = True
            super().close()

    def reopen(self) -> None:
        """A new query of the engine: its micro-batches ask the bounds again."""
        with self._lock:
            self._closed = False
