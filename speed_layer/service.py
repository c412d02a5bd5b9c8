"""The Lambda speed layer as a long-running service (`lk stream --architecture lambda`).

Micro-batches every `trigger_seconds` and, between them, a hand-off to any batch version the
batch layer has marked ready. Setting `stopping` (the CLI does on SIGTERM or Ctrl-C) stops after
the micro-batch in flight; the checkpoint and the store's progress make the next start resume
where this one committed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.settings import Architecture, Settings
from speed_layer.lambda_speed import SpeedLayer
from stream_engine import metrics

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Echo = Callable[[str], None]


class SpeedLayerError(RuntimeError):
    """The speed layer's query failed."""


def run(
    spark: SparkSession,
    settings: Settings,
    stopping: threading.Event,
    *,
    trigger_seconds: float = 2.0,
    poll_s: float = 1.0,
    echo: Echo = print,
) -> None:
    """Run the speed layer until `stopping` is set; raises on a failed query. A ready batch
    version is looked for every `poll_s`: readers wait for the hand-off about half of it, and
    a look is one connection and two keyed reads."""
    speed = SpeedLayer(spark, settings)
    query = speed.engine.start(available_now=False, trigger_seconds=trigger_seconds)
    echo(f"speed layer running ({query.name}); stop with SIGTERM")
    seen: int | None = None
    first = True
    try:
        while not stopping.is_set() and query.isActive:
            handed = speed.handoff()
            # A hand-off by this loop, or by the batch's publish step in its own process.
            if handed is not None or (not first and speed.published != seen):
                _handed_off(speed, settings)
            seen, first = speed.published, False
            stopping.wait(poll_s)
    finally:
        query.stop()
    if (failure := speed.engine.finish(query)) is not None:
        raise SpeedLayerError(f"speed layer failed: {failure}")


def _handed_off(speed: SpeedLayer, settings: Settings) -> None:
    """Count a hand-off; it replaced the stream's state, which the metrics count again."""
    metrics.handoff(Architecture.LAMBDA.value)
    if settings.metrics_port is not None:
        speed.engine.count_state()
