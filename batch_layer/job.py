"""The batch layer's computation: the five batch views from the whole master dataset up to a
cutoff, written as a new version.

The views come from the shared view logic (`core.views`), the same partial aggregates the
speed layer and the Kappa job use. The run around it (gates, `ready`, the hand-off) is
`batch_layer.steps`, whose `run_batch` runs it in one call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from core.catalog import CLICK_WINDOW_MS, VIEWS
from core.frames import empty_profiles
from core.master_dataset import MasterDataset
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
