"""What the batch steps and the quality gates did, read from the store at scrape time.

The batch steps run in processes or pods that end before Prometheus could scrape them; they
record what they did in the store (``core.store.step_runs``, ``view_versions``, ``dq_results``,
``stream_progress``), and the serving API, which is always up, exports it on its ``/metrics``:

- ``lk_batch_run_duration_seconds{step}``: each pipeline step's last run;
- ``lk_batch_view_rows{view}``: the rows of each view of the published Lambda batch version;
- ``lk_batch_last_success_timestamp_seconds``: when a Lambda batch version was last published;
- ``lk_quality_gate_success{layer,suite}`` (1 passed, 0 failed) and
  ``lk_quality_gate_failed_expectations{layer,suite}``: each suite's latest result;
- ``lk_kappa_version_watermark_seconds{version,status}``: the watermark of each Kappa version
  that serves (`published`) or is being replayed (`building`): reprocessing progress is the
  second catching up with the first.

One statement per scrape (``step_runs.BATCH_METRICS_SQL``), over the app's reader pool, before
the exposition is rendered; the collector then yields what that read. In multiprocess mode the
worker answering the scrape reads the store itself and adds these to the workers' files' sums
(``serving.metrics.ServingMetrics.render``). With the store down, the scrape answers without
them (absent, not stale).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping
from typing import Any, TypeVar

import psycopg
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector
from psycopg_pool import AsyncConnectionPool

from core.store import step_runs

log = logging.getLogger(__name__)

LabelValues = TypeVar("LabelValues", bound=tuple[str, ...])


class StoreMetrics(Collector):
    """The batch and quality gauges of the last ``refresh``."""

    def __init__(self) -> None:
        self.latest: step_runs.BatchMetrics | None = None

    async def refresh(self, pool: AsyncConnectionPool[Any] | None) -> None:
        """Read the store once (``None`` or an error: no values until the next scrape)."""
        self.latest = None
        if pool is None:
            return
        try:
            async with pool.connection() as conn:
                cursor = await conn.execute(step_runs.BATCH_METRICS_SQL)
                self.latest = step_runs.batch_metrics(await cursor.fetchall())
        except psycopg.Error as exc:  # the store down, or older than these tables
            log.debug("batch metrics not read: %s", exc)

    def describe(self) -> list[Any]:
        return []  # the names are fixed, the samples come from the store: nothing to check

    def collect(self) -> Iterator[GaugeMetricFamily]:
        found = self.latest
        if found is None:
            return
        yield _gauges(
            "lk_batch_run_duration_seconds",
            "Duration of each pipeline step's last run (lk step, an Airflow task).",
            ["step"],
            {(step,): seconds for step, seconds in found.step_seconds.items()},
        )
        yield _gauges(
            "lk_batch_view_rows",
            "Rows of each view in the published Lambda batch version.",
            ["view"],
            {(view,): count for view, count in found.view_rows.items()},
        )
        if found.last_published_s is not None:
            yield GaugeMetricFamily(
                "lk_batch_last_success_timestamp_seconds",
                "When a Lambda batch version was last published (epoch seconds).",
                value=found.last_published_s,
            )
        yield _gauges(
            "lk_quality_gate_success",
            "Latest result of each quality suite per layer: 1 passed, 0 failed.",
            ["layer", "suite"],
            found.gate_success,
        )
        yield _gauges(
            "lk_quality_gate_failed_expectations",
            "Failed expectations in the latest result of each quality suite per layer.",
            ["layer", "suite"],
            found.gate_failed,
        )
        yield _gauges(
            "lk_kappa_version_watermark_seconds",
            "Event-time watermark of each Kappa version, live (published) or being replayed "
            "(building), in epoch seconds.",
            ["version", "status"],
            found.kappa_watermark_s,
        )


def _gauges(
    name: str, documentation: str, labels: list[str], values: Mapping[LabelValues, float]
) -> GaugeMetricFamily:
    """One gauge family, a sample per label values, in their order."""
    family = GaugeMetricFamily(name, documentation, labels=labels)
    for key in sorted(values):
        family.add_metric(list(key), values[key])
    return family
