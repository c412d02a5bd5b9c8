"""Spark's own account of the streaming queries a bench step runs, and a time budget for them.

`QueryWatcher` polls the session's active queries from a thread of its own and keeps every
micro-batch's progress (input rows, trigger duration) by query name, also for queries the layers
start and stop inside a call the bench cannot see into (`archiver.drain`, `Reprocess.run`).
With a budget, it stops every active query once the budget is spent: the call then fails, and
the progress kept so far still gives a measured rate over the micro-batches that finished.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _started_at(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp.replace("Z", "+00:00")).timestamp()


class QueryWatcher:
    def __init__(
        self,
        spark: SparkSession,
        interval_s: float = 2.0,
        budget_s: float | None = None,
        on_expiry: Callable[[], object] | None = None,
    ) -> None:
        self.spark = spark
        self.interval_s = interval_s
        self.budget_s = budget_s
        self.on_expiry = on_expiry  # e.g. interrupt a micro-batch busy in Python
        self.expired = False
        self.batches: dict[tuple[str, int], dict[str, Any]] = {}
        self._queries: dict[str, Any] = {}  # by run id: a stopped query still holds its progress
        self._stopping_runs: set[str] = set()
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="query-watcher", daemon=True)
        self._started = time.monotonic()

    def __enter__(self) -> QueryWatcher:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self._thread.join(timeout=30)
        self.collect()

    def _run(self) -> None:
        while not self._stopping.wait(self.interval_s):
            self.collect()
            spent = time.monotonic() - self._started
            if self.budget_s is not None and spent > self.budget_s:
                self._expire(spent - self.budget_s)

    def _expire(self, overdue_s: float) -> None:
        """Stop every active query (once spent, whatever the step starts next too); if one
        is still running 30 s on, its micro-batch is busy in Python: `on_expiry` then."""
        self.expired = True
        active = self.spark.streams.active
        for query in active:
            run_id = str(query.runId)
            if run_id not in self._stopping_runs:
                # stop() waits for the micro-batch in flight: not on this thread, which must
                # keep collecting.
                self._stopping_runs.add(run_id)
                threading.Thread(target=query.stop, daemon=True).start()
        if active and overdue_s > 30 and self.on_expiry is not None:
            self.on_expiry()

    def collect(self) -> None:
        for query in self.spark.streams.active:
            self._queries[str(query.runId)] = query
        for query in list(self._queries.values()):
            for p in query.recentProgress:
                durations = p["durationMs"]
                name, batch_id = str(p["name"]), int(p["batchId"])
                batch = {
                    "query": name,
                    "batch_id": batch_id,
                    "started_at": _started_at(str(p["timestamp"])),
                    "input_rows": int(p["numInputRows"] or 0),
                    "trigger_ms": int(durations.get("triggerExecution", 0)),
                    "add_batch_ms": int(durations.get("addBatch", 0)),
                }
                with self._lock:
                    self.batches[(name, batch_id)] = batch

    def of(self, name_prefix: str = "") -> list[dict[str, Any]]:
        """The micro-batches of the queries whose name starts with `name_prefix`, in order."""
        with self._lock:
            found = [b for (q, _), b in self.batches.items() if q.startswith(name_prefix)]
        return sorted(found, key=lambda b: (b["query"], b["batch_id"]))

    @staticmethod
    def rate(batches: list[dict[str, Any]]) -> dict[str, Any]:
        """Input rows over the span from the first trigger's start to the last one's end."""
        worked = [b for b in batches if b["input_rows"]]
        if not worked:
            return {"input_rows": 0, "span_s": 0.0, "rows_per_s": 0}
        start = min(b["started_at"] for b in worked)
        end = max(b["started_at"] + b["trigger_ms"] / 1000 for b in worked)
        rows = sum(b["input_rows"] for b in worked)
        span = max(end - start, 1e-9)
        return {
            "input_rows": rows,
            "micro_batches": len(worked),
            "span_s": round(span, 1),
            "rows_per_s": round(rows / span),
        }

    @staticmethod
    def printable(batches: list[dict[str, Any]]) -> list[str]:
        return [
            f"    {b['query']} #{b['batch_id']}: {b['input_rows']:,} records in "
            f"{b['trigger_ms'] / 1000:.1f}s"
            for b in batches
            if b["input_rows"]
        ]
