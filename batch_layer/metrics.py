"""The archiver's Prometheus metrics, served by `lk archive` on ``LK_METRICS_PORT``
(``core.metrics_server``; names and meaning in docs/METRICS.md).

The archiver counts nothing in Spark (a count would be a second pass over the micro-batch), so
its records are the offsets each micro-batch advanced, which it reads from its checkpoint and
records in the store anyway. Each of its two queries (`events`, `profiles`) has its own series.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from prometheus_client import Counter, Gauge, Histogram

BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0)
"""A trickle's micro-batch (about 1.5 s of fixed cost) to a backlog's 2M records (a minute)."""

MICRO_BATCH_SECONDS = Histogram(
    "lk_archiver_micro_batch_duration_seconds",
    "Wall time of an archiver micro-batch: Kafka to the master dataset's Delta table, then its "
    "offsets in the store.",
    ["topic"],
    buckets=BUCKETS,
)
RECORDS = Counter(
    "lk_archiver_records",
    "Records appended to the master dataset: the offsets the archiver's micro-batches advanced "
    "(on the compacted `profiles`, the offsets compaction removed count too).",
    ["topic"],
)
LAST_COMMIT = Gauge(
    "lk_archiver_last_commit_timestamp_seconds",
    "When the archiver last recorded a micro-batch's offsets in the store (Unix time).",
    ["topic"],
)


def advanced(before: Mapping[str, int], after: Mapping[str, int]) -> int:
    """Offsets moved from `before` to `after` (per ``topic/partition``); a partition first
    read counts from offset 0, where the log of a new deployment starts."""
    return sum(max(0, end - before.get(key, 0)) for key, end in after.items())


def archived(
    topic: str, started: float, before: Mapping[str, int], after: Mapping[str, int]
) -> None:
    """A micro-batch of `topic` committed (`started`: its ``perf_counter`` at the start)."""
    MICRO_BATCH_SECONDS.labels(topic).observe(time.perf_counter() - started)
    RECORDS.labels(topic).inc(advanced(before, after))
    LAST_COMMIT.labels(topic).set(time.time())
