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
    from batch_layer.cutoff import drain_cutoff
    from batch_layer.job import BatchError, max_event_ts, read_master_events
    from batch_layer.steps import run_batch
    from core.master_dataset import MasterDataset
    from core.timefmt import iso
    from speed_layer.lambda_speed import SpeedLayer

    started = time.monotonic()

    def step(label: str) -> None:
        echo(f"  {label} ({time.monotonic() - started:.1f}s)")

    try:
        archiver.drain(spark, settings)
        step("archived the log into the master dataset")
        latest = max_event_ts(read_master_events(spark, MasterDataset.from_settings(settings)))
        if latest is None:
            raise PipelineError("the log holds no valid event yet: `lk produce` some first")
        result = run_batch(spark, settings, cutoff_ms=drain_cutoff(latest))
        counts = ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items())
        step(f"batch views v{result.version} up to {iso(result.cutoff_ms)}: {counts}")
        SpeedLayer(spark, settings).drain()
        step("speed layer caught up; the new batch version is published")
    except BatchError as exc:
        raise PipelineError(str(exc)) from exc
