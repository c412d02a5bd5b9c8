"""Whole-pipeline runs the CLI offers (`lk drain`, `lk demo`): the composition of the layers."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

Echo = Callable[[str], None]


class PipelineError(RuntimeError):
    pass


def drain_lambda(spark: SparkSession, settings: Settings, echo: Echo) -> None:
    """Archive the log, recompute the batch views past its last event, catch the speed layer
    up and hand off: afterwards the serving layer reflects everything in the log."""
    from batch_layer import archiver
    from batch_layer.job import BatchError
    from batch_layer.steps import run_batch
    from core.timefmt import iso
    from speed_layer.lambda_speed import SpeedLayer

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
        except BatchError as exc:
            if "holds no valid event" in str(exc):
                raise PipelineError(
                    "the log holds no valid event yet: `lk produce` some first"
                ) from exc
            raise
        counts = ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items())
        step(
            f"batch views v{result.version} up to {iso(result.cutoff_ms)}: {counts}; "
            f"{result.quarantined:,} invalid records quarantined"
        )
        SpeedLayer(spark, settings).drain()
        step("speed layer caught up; the new batch version is published")
    except BatchError as exc:
        raise PipelineError(str(exc)) from exc
