"""The stream engine's Prometheus metrics: the speed layer (``architecture="lambda"``) and the
Kappa job (``architecture="kappa"``), served by `lk stream` on ``LK_METRICS_PORT``
(``core.metrics_server``; names and meaning in docs/METRICS.md).

What a micro-batch already knows is recorded as it goes: its stages' durations, the records it
brought in, late and quarantined counts, the commit, the net change of its keyed state rows.
What depends on the clock is computed when Prometheus scrapes (``_StreamCollector``): each
partition's watermark lag behind wall-clock time, and freshness, so that an idle or stalled
stream shows them growing. A micro-batch pays a few dictionary updates and histogram
observations (microseconds, beside its 0.3 s and more); a scrape reads snapshots and, when no
micro-batch asked for a while, the log's end (one round trip to Kafka).

Freshness: a record's timestamp is its `received_ts` (CONTRACT §1), set by the producer, not
when the record reached the log, so the metrics note when the engine first saw each end offset
of every partition of `events`.
They own no consumer: the engine's log bounds (``stream_engine.log_bounds``, which it asks at
every micro-batch for its lost-records check) tell `Freshness.observe` each end they read, and
a scrape after ``LOG_END_MAX_AGE_S`` without one asks them for a read (`ask_log_end`). The
oldest record readers do not see yet is the committed offset of a partition; it has been in
the log at least since the first end seen beyond it.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING

from prometheus_client import REGISTRY, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from core.event_clock import EventClocks

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

    from core.settings import Settings

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)
"""From a split of a few records (milliseconds) to a replay's 200k-record micro-batch (a minute)."""

STAGES = (
    "offsets",
    "spark_job",
    "inbox_write",
    "queue_wait",
    "split",
    "watermark",
    "accepted_log",
    "keyed_merge",
    "history",
    "store_commit",
    "total",
)
"""A micro-batch's stages. Spark's side, in the query's thread: ``offsets`` (the stream's
progress, the lost-records check, the checkpoint's offsets), ``spark_job`` (the one Spark job:
Kafka, parse, deduplication, to Arrow), ``inbox_write``, ``queue_wait`` (waiting for the merge
thread to take it: backpressure). The merge thread's: ``split``, ``watermark`` (the late split
per partition), ``accepted_log`` (Lambda: its accepted events, for the hand-off),
``keyed_merge`` (the logic version and cutoff, then the partials into keyed state on DuckDB),
``store_commit``. ``history``: instead of the merge, a replay's first micro-batch (the whole
log up to its end) computed and written by Spark's executors (``stream_engine.history``).
``total``: from Spark handing the micro-batch over to its commit."""

LOG_END_MAX_AGE_S = 10.0
"""A scrape asks the log's end itself when no micro-batch has for this long (an idle stream,
or one stalled: freshness must grow then too)."""

MICRO_BATCH_SECONDS = Histogram(
    "lk_stream_micro_batch_duration_seconds",
    "Wall time of a stream micro-batch's stages in the driver (stage), and from Spark handing "
    "it over to its commit in the serving store (stage=total).",
    ["architecture", "stage"],
    buckets=BUCKETS,
)
RECORDS_IN = Counter(
    "lk_stream_records_in",
    "Records the stream's micro-batches brought in and committed, per topic (events: valid and "
    "invalid, repeated event ids already dropped by the deduplication; profiles: every version "
    "and tombstone).",
    ["architecture", "topic"],
)
LATE_DROPPED = Counter(
    "lk_stream_late_dropped",
    "Events dropped as late: behind their own partition's watermark (CONTRACT §3).",
    ["architecture"],
)
QUARANTINED = Counter(
    "lk_stream_quarantined",
    "Invalid event records sent to the stream's quarantine.",
    ["architecture"],
)
COMMIT_SECONDS = Histogram(
    "lk_stream_commit_duration_seconds",
    "Time of a micro-batch's one transaction in the serving store (view rows, keyed state, "
    "audit rows, progress).",
    ["architecture"],
    buckets=BUCKETS,
)
LAST_COMMIT = Gauge(
    "lk_stream_last_commit_timestamp_seconds",
    "When the stream last committed a micro-batch to the serving store (Unix time).",
    ["architecture"],
)
HANDOFFS = Counter(
    "lk_stream_handoffs",
    "Hand-offs seen by the speed layer: the real-time views recomputed from a new batch "
    "version's cutoff (by this process or by the batch's publish step).",
    ["architecture"],
)


class Stopwatch:
    """Laps of a micro-batch's stages, in order."""

    __slots__ = ("_last", "laps")

    def __init__(self) -> None:
        self._last = time.perf_counter()
        self.laps: list[tuple[str, float]] = []

    def lap(self, stage: str) -> None:
        now = time.perf_counter()
        self.laps.append((stage, now - self._last))
        self._last = now


class Freshness:
    """Per partition of `events`: when each end offset was first seen, and the offsets committed.
    Observed by the query's thread and a scrape, committed by the merge thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._seen: dict[int, deque[tuple[int, float]]] = {}
        """Per partition, (end offset, first seen), increasing; pruned at each commit."""
        self._committed: dict[int, int] = {}
        self.last_observed: float | None = None

    def observe(self, ends: Mapping[int, int], at: float) -> None:
        """The log's end per partition (the next offset to be written), seen at `at`."""
        with self._lock:
            self.last_observed = at
            for partition, end in ends.items():
                seen = self._seen.setdefault(partition, deque())
                newest = seen[-1][0] if seen else self._committed.get(partition, 0)
                if end > newest:
                    seen.append((end, at))

    def commit(self, offsets: Mapping[int, int]) -> None:
        """The next offset to read per partition, as readers now see it."""
        with self._lock:
            for partition, offset in offsets.items():
                self._committed[partition] = offset
                seen = self._seen.get(partition)
                while seen and seen[0][0] <= offset:
                    seen.popleft()

    def seconds(self, now: float) -> float:
        """How long the oldest record readers do not see has been in the log; 0 when they see
        every end seen."""
        with self._lock:
            oldest = min((seen[0][1] for seen in self._seen.values() if seen), default=None)
        return 0.0 if oldest is None else max(0.0, now - oldest)


class StreamMetrics:
    """One stream engine's metrics, under its architecture's label; the engine started last
    in a process is the one a scrape reads (`watch`).

    `ask_log_end`: asks the engine's log bounds for a topic's (the ends reach `freshness`
    through the engine's wiring, ``StreamLogBounds.observe_ends``); None: a scrape never asks
    the log."""

    def __init__(
        self,
        architecture: str,
        settings: Settings,
        delay_ms: int,
        ask_log_end: Callable[[str], object] | None = None,
    ) -> None:
        self.architecture = architecture
        self.events_topic = settings.events_topic
        self.profiles_topic = settings.profiles_topic
        self.delay_ms = delay_ms
        self.freshness = Freshness()
        self._ask_log_end = ask_log_end
        self._stages = {s: MICRO_BATCH_SECONDS.labels(architecture, s) for s in STAGES}
        self._records = {
            t: RECORDS_IN.labels(architecture, t) for t in (self.events_topic, self.profiles_topic)
        }
        self._late = LATE_DROPPED.labels(architecture)
        self._quarantined = QUARANTINED.labels(architecture)
        self._commit = COMMIT_SECONDS.labels(architecture)
        # No last-commit series before the first commit: a 0 reads as "committed in 1970".
        self._handed_at: dict[int, float] = {}
        """Per micro-batch handed to the merge, when Spark's side began (for ``total``)."""
        self._clocks = EventClocks()
        """The event clocks as last committed (a copy: a scrape reads them from its thread)."""
        self._state_lock = threading.Lock()
        self._state_rows: dict[str, int] | None = None
        """Per view, the stream's keyed state rows in the store; None: not counted yet."""

    # -- a micro-batch ------------------------------------------------------------------------

    def handed(self, batch_id: int, started: float, watch: Stopwatch) -> None:
        """Spark's side of a micro-batch is done (`started`: its ``perf_counter``)."""
        self._handed_at[batch_id] = started
        for stage, seconds in watch.laps:
            self._stages[stage].observe(seconds)

    def committed(
        self,
        batch_id: int,
        watch: Stopwatch,
        *,
        records_in: Mapping[str, int],
        late: int,
        quarantined: int,
        state_rows: Mapping[str, int],
        clocks: EventClocks,
        offsets: Mapping[str, int],
    ) -> None:
        """A micro-batch is committed: readers see it (`offsets`: the stream's progress, per
        ``topic/partition``; `state_rows`: the net change of its keyed state rows per view).
        Call it under the stream's lock, so that a recount (`count_state`) sees every change
        counted here or none."""
        for stage, seconds in watch.laps:
            self._stages[stage].observe(seconds)
            if stage == "store_commit":
                self._commit.observe(seconds)
        started = self._handed_at.pop(batch_id, None)
        if started is not None:  # None: merged from the inbox at a start
            self._stages["total"].observe(time.perf_counter() - started)
        LAST_COMMIT.labels(self.architecture).set(time.time())
        for topic, count in records_in.items():
            if count:
                self._records[topic].inc(count)
        if late:
            self._late.inc(late)
        if quarantined:
            self._quarantined.inc(quarantined)
        self.resume(clocks, offsets)
        with self._state_lock:
            if self._state_rows is not None:
                for view, change in state_rows.items():
                    self._state_rows[view] = self._state_rows.get(view, 0) + change

    def resume(self, clocks: EventClocks, offsets: Mapping[str, int]) -> None:
        """Where the stream's commits stand: its event clocks and the offsets readers see."""
        self._clocks = EventClocks(dict(clocks.greatest))  # replaced whole: a scrape reads one
        prefix = f"{self.events_topic}/"
        self.freshness.commit(
            {int(k.removeprefix(prefix)): v for k, v in offsets.items() if k.startswith(prefix)}
        )

    def count_state(self, rows: Mapping[str, int]) -> None:
        """The stream's state rows as the store counted them, per stored state (a view's
        partial, or its ``<view>:totals``), under the stream's lock."""
        counts: dict[str, int] = {}
        for name, count in rows.items():
            view = name.split(":", 1)[0]
            counts[view] = counts.get(view, 0) + count
        with self._state_lock:
            self._state_rows = counts

    # -- read at a scrape ---------------------------------------------------------------------

    def watermarks_ms(self) -> dict[int, int]:
        """Per partition, its watermark: what is late there (`EventClocks.threshold`, epoch ms)."""
        clocks = self._clocks
        found = {p: clocks.threshold(p, self.delay_ms) for p in clocks.greatest}
        return {p: ms for p, ms in found.items() if ms is not None}

    def state_rows(self) -> dict[str, int] | None:
        with self._state_lock:
            return None if self._state_rows is None else dict(self._state_rows)

    def refresh_log_end(self, now: float) -> None:
        """Ask the log's end when no micro-batch has lately (best effort: a scrape answers)."""
        last = self.freshness.last_observed
        if self._ask_log_end is None or (last is not None and now - last < LOG_END_MAX_AGE_S):
            return
        try:
            self._ask_log_end(self.events_topic)
        except Exception:  # Kafka away, or the stream stopped: keep the ends last seen
            return


class _StreamCollector(Collector):
    """The gauges computed at scrape time, for each architecture's stream in this process."""

    def __init__(self) -> None:
        self.streams: dict[str, StreamMetrics] = {}

    def describe(self) -> Iterator[Metric]:
        return iter(self._families())  # no samples: registering must not ask Kafka

    def _families(self) -> tuple[GaugeMetricFamily, ...]:
        per_partition = ["architecture", "partition"]
        return (
            GaugeMetricFamily(
                "lk_stream_watermark_seconds",
                "Each partition's watermark (its greatest event time committed, less the "
                "delay; Unix time): its events before it are late.",
                labels=per_partition,
            ),
            GaugeMetricFamily(
                "lk_stream_watermark_lag_seconds",
                "Wall-clock time now less each partition's watermark: grows while a partition "
                "brings no newer event.",
                labels=per_partition,
            ),
            GaugeMetricFamily(
                "lk_stream_state_rows",
                "Rows of the stream's keyed state in the serving store per view (its partial "
                "aggregate per key and its totals per view row).",
                labels=["architecture", "view"],
            ),
            GaugeMetricFamily(
                "lk_stream_freshness_seconds",
                "How long the oldest record of `events` that readers do not see yet has been "
                "in the log, as far as this process saw the log's end; 0 when they see all of it.",
                labels=["architecture"],
            ),
        )

    def collect(self) -> Iterator[Metric]:
        watermark, lag, state_rows, freshness = self._families()
        now = time.time()
        for architecture, stream in list(self.streams.items()):
            stream.refresh_log_end(now)
            for partition, ms in sorted(stream.watermarks_ms().items()):
                watermark.add_metric([architecture, str(partition)], ms / 1000)
                lag.add_metric([architecture, str(partition)], now - ms / 1000)
            for view, rows in sorted((stream.state_rows() or {}).items()):
                state_rows.add_metric([architecture, view], rows)
            freshness.add_metric([architecture], stream.freshness.seconds(now))
        yield from (watermark, lag, state_rows, freshness)


_COLLECTOR = _StreamCollector()
REGISTRY.register(_COLLECTOR)


def watch(stream: StreamMetrics) -> None:
    """Scrapes read `stream` for its architecture from now on (a new Kappa version's job)."""
    _COLLECTOR.streams[stream.architecture] = stream


def handoff(architecture: str) -> None:
    HANDOFFS.labels(architecture).inc()
