"""Whole-pipeline runs the CLI offers (`lk drain`): the composition of the layers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from batch_layer.cutoff import NoValidEventError
from batch_layer.errors import BatchError
from core.settings import Settings
from core.times import iso

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Echo = Callable[[str], None]


class PipelineError(RuntimeError):
    pass


def drain_lambda(spark: SparkSession, settings: Settings, echo: Echo) -> None:
    """Archive the log, recompute the batch views past its last event, catch the speed layer
    up and hand off: afterwards the serving layer reflects everything in the log."""
    from batch_layer import archiver  # deferred: pyspark
    from batch_layer.pipeline import run_batch  # deferred: pyspark
    from speed_layer.lambda_speed import SpeedLayer  # deferred: pyspark

    started = time.monotonic()

    def step(label: str) -> None:
        echo(f"  {label} ({time.monotonic() - started:.1f}s)")

    try:
        archiver.drain(spark, settings)
        step("archived the log into the master dataset")
        # The cutoff comes from the batch's own parse of the master dataset (the hour after
        # its last valid event): the master dataset holds raw records, parsed once per run.
        try:
            result = run_batch(spark, settings, drain=True)
        except NoValidEventError as exc:
            raise PipelineError(
                "the log holds no valid event yet: `lk produce` some first"
            ) from exc
        counts = ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items())
        step(
            f"batch views v{result.version} up to {iso(result.cutoff_ms)}: {counts}; "
            f"{result.quarantined:,} invalid records quarantined"
        )
        SpeedLayer(spark, settings).drain()
        step("speed layer caught up; the new batch version is published")
    except BatchError as exc:
        raise PipelineError(str(exc)) from exc


def publish_batch(settings: Settings, version: int) -> int:
    """Mark batch ``version`` ready (the batch layer) and hand off to it now (the speed layer);
    returns the version readers see.

    Until this step the previous version keeps serving. A newer version already published
    wins (this one is then never shown). No Spark: the hand-off recomputes on DuckDB."""
    from batch_layer.pipeline import mark_ready, published_version  # deferred: pyspark
    from speed_layer.lambda_speed import SpeedLayer  # deferred: pyarrow, duckdb

    mark_ready(settings, version)
    SpeedLayer(None, settings).handoff()
    current = published_version(settings)
    if current is None:
        raise BatchError(f"batch version {version} was not published")
    return current.version
