"""Prometheus metrics of the serving API, exposed at `GET /metrics` (prometheus_client).

- `lk_serving_request_duration_seconds{view, architecture, code}`: a histogram per view of
  the time to answer `GET /v1/views/{view}` (200, 304, 409, 503, ...).
- `lk_serving_answers_total{source}`: answers of `GET /v1/views/{view}` with rows, by where
  their body came from: `store` (rows read and encoded) or `cache` (the same tag's, unread).
- `lk_serving_pool_connections{state}` (`open`, `idle`, `in_use`, `max`) and
  `lk_serving_pool_requests_waiting`: the store connection pools, summed over workers;
  `lk_serving_pool_errors_total{kind}`: failed connection attempts, connections found broken,
  requests that got no connection in time.
- What the API last read, per architecture: `lk_serving_view_version`,
  `lk_serving_batch_cutoff_seconds`, and of the real-time stream `lk_serving_stream_*`
  (watermark, last micro-batch id, time of its last commit, late-dropped events) and
  `lk_serving_quarantined`. `time() - lk_serving_stream_committed_seconds` is how stale the
  stream the readers see is.
- What the batch steps and quality gates did, read from the store at each scrape
  (`serving.store_metrics`): `lk_batch_*`, `lk_quality_gate_*`,
  `lk_kappa_version_watermark_seconds`.

Several workers (`lk serve --workers`): prometheus_client's multiprocess mode. `lk serve` gives
the workers a fresh `PROMETHEUS_MULTIPROC_DIR`; each worker writes its values there and any
worker's `/metrics` adds them all up (pool gauges: the live workers' sum; what the API read:
the most recent value written by any worker). Without it (one process, the tests) the values
live in the app's own registry.
"""

from __future__ import annotations

import os
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
)

from core.store.reads import State
from serving.store_metrics import StoreMetrics

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
CONTENT_TYPE = CONTENT_TYPE_LATEST

# Milliseconds matter here: the aims are p99 <= 5, 10 and 50 ms.
_LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.0075, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)

# psycopg_pool statistics (`pool.pop_stats()`) counted as errors, by our name for them.
_POOL_ERRORS = {
    "connect_failed": "connections_errors",
    "connection_lost": "connections_lost",
    "request_failed": "requests_errors",
}


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_ENV) or None


def _seconds(ms: int | None) -> float:
    return float("nan") if ms is None else ms / 1000


class ServingMetrics:
    """The metrics of one app, in a registry of its own (two apps in one process never clash)."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        registry = self.registry
        self.requests = Histogram(
            "lk_serving_request_duration_seconds",
            "Time to answer GET /v1/views/{view}, by view, architecture and status code.",
            ["view", "architecture", "code"],
            buckets=_LATENCY_BUCKETS,
            registry=registry,
        )
        self.answers = Counter(
            "lk_serving_answers",
            "Answers with rows, by where their body came from: store (read) or cache (unread).",
            ["source"],
            registry=registry,
        )
        self.pool_connections = Gauge(
            "lk_serving_pool_connections",
            "Store connections of the readers' pools: open, idle, in_use, and the max allowed.",
            ["state"],
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.pool_waiting = Gauge(
            "lk_serving_pool_requests_waiting",
            "Requests waiting for a store connection.",
            multiprocess_mode="livesum",
            registry=registry,
        )
        self.pool_errors = Counter(
            "lk_serving_pool_errors",
            "Failed connection attempts, connections found broken, requests without a "
            "connection in time.",
            ["kind"],
            registry=registry,
        )
        latest: Any = {"multiprocess_mode": "mostrecent", "registry": registry}
        self.version = Gauge(
            "lk_serving_view_version", "Version the alias pointed at.", ["architecture"], **latest
        )
        self.cutoff = Gauge(
            "lk_serving_batch_cutoff_seconds",
            "Lambda's batch cutoff (epoch seconds).",
            ["architecture"],
            **latest,
        )
        self.watermark = Gauge(
            "lk_serving_stream_watermark_seconds",
            "Event-time watermark of the real-time stream (epoch seconds).",
            ["architecture"],
            **latest,
        )
        self.batch_id = Gauge(
            "lk_serving_stream_last_batch_id",
            "Last micro-batch the real-time stream committed.",
            ["architecture"],
            **latest,
        )
        self.committed = Gauge(
            "lk_serving_stream_committed_seconds",
            "When the real-time stream last committed (epoch seconds).",
            ["architecture"],
            **latest,
        )
        self.late_dropped = Gauge(
            "lk_serving_stream_late_dropped",
            "Events behind the watermark that the real-time stream dropped.",
            ["architecture"],
            **latest,
        )
        self.quarantined = Gauge(
            "lk_serving_quarantined",
            "Invalid records set aside.",
            ["architecture"],
            **latest,
        )
        self._last_state: dict[str, State] = {}
        # Read from the store at each scrape (`refresh`), not kept per worker.
        self.store = StoreMetrics()
        registry.register(self.store)

    def observe_request(self, view: str, architecture: str, code: int, seconds: float) -> None:
        self.requests.labels(view, architecture, str(code)).observe(seconds)

    def observe_state(self, state: State) -> None:
        """What a request read: the alias and the stream progress its answer came from."""
        arch = state.architecture
        if self._last_state.get(arch) == state:  # most requests: nothing moved since
            return
        self._last_state[arch] = state
        self.version.labels(arch).set(float("nan") if state.version is None else state.version)
        self.cutoff.labels(arch).set(_seconds(state.cutoff_ms))
        speed = state.speed
        self.watermark.labels(arch).set(_seconds(None if speed is None else speed.watermark_ms))
        self.batch_id.labels(arch).set(float("nan") if speed is None else speed.last_batch_id)
        self.committed.labels(arch).set(
            float("nan") if speed is None else speed.updated_at_us / 1e6
        )
        self.late_dropped.labels(arch).set(0 if speed is None else speed.late_dropped)
        self.quarantined.labels(arch).set(state.quarantined)

    def observe_pool(self, stats: dict[str, int]) -> None:
        """From `pool.pop_stats()`: the gauges as they are, the error counts since last time."""
        size, idle = stats.get("pool_size", 0), stats.get("pool_available", 0)
        self.pool_connections.labels("open").set(size)
        self.pool_connections.labels("idle").set(idle)
        self.pool_connections.labels("in_use").set(max(0, size - idle))
        self.pool_connections.labels("max").set(stats.get("pool_max", 0))
        self.pool_waiting.set(stats.get("requests_waiting", 0))
        for kind, key in _POOL_ERRORS.items():
            if stats.get(key):
                self.pool_errors.labels(kind).inc(stats[key])

    def render(self) -> bytes:
        """The exposition text: this app's values, or every worker's in multiprocess mode."""
        if multiprocess_dir() is None:
            return generate_latest(self.registry)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
        registry.register(self.store)  # this worker's read of the store, not a file's
        return generate_latest(registry)


def worker_exited() -> None:
    """Drop this worker's live gauges (multiprocess mode), so sums count live workers only."""
    if multiprocess_dir() is not None:
        multiprocess.mark_process_dead(os.getpid())
