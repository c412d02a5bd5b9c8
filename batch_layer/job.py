"""The batch layer: recompute the five batch views from the whole master dataset up to a cutoff.

    from batch_layer.job import run_batch
    run_batch(spark, settings, cutoff_ms=None)   # scheduled: the cutoff the archive allows

The views come from the shared view logic (`core.views`), the same functions the speed layer
and the Kappa job use. `run_batch` runs the steps of `batch_layer.steps` (the `lambda_batch`
DAG runs them as tasks): the raw gate on the master dataset's new partitions, the new version
written (status `building`), the gate on its views, then `ready`. It becomes visible when the
alias moves to it (the hand-off, see `speed_layer.lambda_speed`), so a reader never sees half a
batch, a mix of two, or a batch that failed a gate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from batch_layer.master_dataset import MasterDataset
from core.catalog import CLICK_WINDOW_MS, VIEWS
from core.frames import empty_profiles
from core.settings import Settings
from core.store.schema import batch_table
from core.store.streams import to_timestamp
from core.views import VIEW_INPUT_COLUMNS, compute_all, compute_view, parsing

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

LAMBDA = "lambda"


class BatchError(RuntimeError):
    pass


@dataclass(frozen=True)
class BatchResult:
    version: int
    cutoff_ms: int
    row_counts: dict[str, int]


def _utc(ms: int) -> datetime:
    return to_timestamp(ms)


def read_master_events(spark: SparkSession, master: MasterDataset) -> DataFrame:
    from delta.tables import DeltaTable

    if not DeltaTable.isDeltaTable(spark, master.events):
        raise BatchError(f"the master dataset is empty ({master.events}): archive the log first")
    return spark.read.format("delta").load(master.events)


def read_master_profiles(spark: SparkSession, master: MasterDataset) -> DataFrame:
    from delta.tables import DeltaTable

    if DeltaTable.isDeltaTable(spark, master.profiles):
        return spark.read.format("delta").load(master.profiles)
    return empty_profiles(spark)


def max_event_ts(events: DataFrame) -> int | None:
    from pyspark.sql import functions as F

    row = events.agg(F.max("event_ts").alias("m")).first()
    return None if row is None or row["m"] is None else int(row["m"])


def deduplicated(events: DataFrame) -> DataFrame:
    """Every event of the master dataset once (the first in log order), with only the columns
    the views read: the raw record stays behind, so the whole-history shuffle stays small."""
    return parsing.first_in_log(events.select(*VIEW_INPUT_COLUMNS))


def batch_views(
    events: DataFrame,
    profiles: DataFrame,
    cutoff_ms: int,
    keep: Callable[[DataFrame], DataFrame] | None = None,
) -> dict[str, DataFrame]:
    """The batch views for event time before the cutoff, from `deduplicated` events.

    Deduplication runs over the whole history, before this (the caller caches it once for the
    five views). Views are computed on events up to the cutoff plus the click window, so that a
    search just before the cutoff still sees its clicks, and then keep only windows that start
    before the cutoff. Sessions use only events before the cutoff: a session still open there
    is continued by the speed layer, which merges it with what follows.
    """
    from pyspark.sql import functions as F

    if keep is not None:  # a logic version's filter, after dedup as in the oracle
        events = keep(events)
    window_input = events.where(F.col("event_ts") < cutoff_ms + CLICK_WINDOW_MS)
    session_input = events.where(F.col("event_ts") < cutoff_ms)
    views = compute_all(window_input, profiles)
    cutoff = F.lit(_utc(cutoff_ms))
    result = {}
    for name, frame in views.items():
        if VIEWS[name].window_ms is None:
            continue
        result[name] = frame.where(F.col("window_start") < cutoff)
    result["sessions"] = compute_view("sessions", session_input, profiles)
    return result


def write_version(settings: Settings, views: dict[str, DataFrame], version: int) -> dict[str, int]:
    from pyspark.sql import functions as F

    counts = {}
    properties = {
        "user": settings.postgres_user,
        "password": settings.postgres_password,
        "driver": "org.postgresql.Driver",
        "batchsize": "10000",
    }
    for name, frame in views.items():
        rows = frame.select(F.lit(version).alias("version"), *VIEWS[name].columns).persist()
        try:
            counts[name] = rows.count()
            rows.write.jdbc(
                settings.postgres_jdbc_url, batch_table(name), mode="append", properties=properties
            )
        finally:
            rows.unpersist()
    return counts


def run_batch(
    spark: SparkSession,
    settings: Settings,
    *,
    cutoff_ms: int | None = None,
    logic_version: str | None = None,
    run_name: str | None = None,
) -> BatchResult:
    """Gate the new raw partitions, write a new batch version, gate its views and mark it
    ready; returns it (not yet published: the speed layer's hand-off does that).

    A failing gate raises `BatchError` (with the suite's one-line reasons): nothing is marked
    ready, and the published version keeps serving.
    """
    from batch_layer import steps
    from core.quality import QualityGateError

    run = run_name or f"batch-{datetime.now(UTC):%Y%m%dT%H%M%SZ}"
    try:
        steps.validate_raw(spark, settings, run)
        result = steps.compute(spark, settings, cutoff_ms, logic_version)
        steps.validate_views(spark, settings, result.version, run)
    except QualityGateError as exc:
        raise BatchError(f"nothing published: {exc}") from exc
    steps.mark_ready(settings, result.version)
    return result
