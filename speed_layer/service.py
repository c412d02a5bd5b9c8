"""The stream job as a long-running service: the Lambda speed layer or the Kappa job.

    lk stream --architecture lambda|kappa [--available-now]
    python -m speed_layer --architecture lambda|kappa [--available-now]

Lambda: micro-batches every `trigger_seconds` and, between them, a hand-off to any batch
version the batch layer has marked ready. Kappa: the active version's job, which gives way to a
new version when a reprocess moves the alias. SIGTERM or Ctrl-C stops after the micro-batch in
flight; the checkpoint and the store's progress make the next start resume where this one
committed.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.settings import Settings
from core.spark import build_spark_session

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Echo = Callable[[str], None]


def _stop_on_signals() -> threading.Event:
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    return stopping


def run(
    settings: Settings,
    architecture: str,
    *,
    available_now: bool = False,
    trigger_seconds: float = 2.0,
    poll_s: float = 5.0,
    echo: Echo = print,
) -> None:
    """Run the stream job of `architecture` until stopped (or, with `available_now`, until it
    has processed what the log holds now). Raises on a failed query."""
    spark = build_spark_session(settings, f"lk-stream-{architecture}")
    try:
        if architecture == "kappa":
            _run_kappa(spark, settings, available_now, trigger_seconds, poll_s, echo)
        else:
            _run_lambda(spark, settings, available_now, trigger_seconds, poll_s, echo)
    finally:
        spark.stop()


def _run_lambda(
    spark: SparkSession,
    settings: Settings,
    available_now: bool,
    trigger_seconds: float,
    poll_s: float,
    echo: Echo,
) -> None:
    from speed_layer.lambda_speed import SpeedLayer

    speed = SpeedLayer(spark, settings)
    if available_now:
        speed.drain()
        return
    stopping = _stop_on_signals()
    query = speed.engine.start(available_now=False, trigger_seconds=trigger_seconds)
    echo(f"speed layer running ({query.name}); stop with SIGTERM")
    try:
        while not stopping.is_set() and query.isActive:
            speed.handoff()
            stopping.wait(poll_s)
    finally:
        query.stop()
    if query.exception() is not None:
        raise RuntimeError(f"speed layer failed: {query.exception()}")


def _run_kappa(
    spark: SparkSession,
    settings: Settings,
    available_now: bool,
    trigger_seconds: float,
    poll_s: float,
    echo: Echo,
) -> None:
    from speed_layer.kappa import KappaViews

    views = KappaViews(spark, settings)
    if available_now:
        views.drain()
        return
    views.follow(_stop_on_signals(), trigger_seconds, poll_s, echo)
