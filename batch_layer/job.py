"""The batch layer: recompute the five batch views from the whole master dataset up to a cutoff.

    from batch_layer.job import run_batch
    run_batch(spark, settings, cutoff_ms=None)   # scheduled: the cutoff the archive allows

The views come from the shared view logic (`core.views`), the same functions the speed layer
and the Kappa job use. The result is written as a new version of the batch views in the serving
store and marked `ready`; it becomes visible when the alias moves to it (the hand-off, see
`speed_layer.handoff`), so a reader never sees half a batch or a mix of two.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from batch_layer.cutoff import scheduled_cutoff
from batch_layer.master_dataset import MasterDataset
from core.catalog import CLICK_WINDOW_MS, VIEWS
from core.frames import empty_profiles
from core.settings import Settings
from core.store import versions
from core.store.connection import connect
from core.store.schema import batch_table, create_all
from core.store.streams import to_timestamp
from core.views import compute_all, compute_view, parsing

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


def batch_views(events: DataFrame, profiles: DataFrame, cutoff_ms: int) -> dict[str, DataFrame]:
    """The batch views for event time before the cutoff.

    Deduplication runs over the whole history (first occurrence in log order wins). Views are
    computed on events up to the cutoff plus the click window, so that a search just before
    the cutoff still sees its clicks, and then keep only windows that start before the cutoff.
    Sessions use only events before the cutoff: a session still open there is continued by the
    speed layer, which merges it with what follows.
    """
    from pyspark.sql import functions as F

    deduped = parsing.first_in_log(events)
    window_input = deduped.where(F.col("event_ts") < cutoff_ms + CLICK_WINDOW_MS)
    session_input = deduped.where(F.col("event_ts") < cutoff_ms)
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
) -> BatchResult:
    """Recompute, write and mark ready a new batch version; returns it (not yet published)."""
    master = MasterDataset.from_settings(settings)
    events = read_master_events(spark, master)
    if cutoff_ms is None:
        latest = max_event_ts(events)
        if latest is None:
            raise BatchError("the master dataset holds no event yet")
        cutoff_ms = scheduled_cutoff(latest, settings.watermark_delay_minutes * 60_000)
    views = batch_views(events, read_master_profiles(spark, master), cutoff_ms)
    with connect(settings) as conn:
        create_all(conn)
        version = versions.begin_version(
            conn, LAMBDA, cutoff=_utc(cutoff_ms), logic_version=logic_version
        )
        try:
            counts = write_version(settings, views, version)
        except Exception:
            versions.mark(conn, LAMBDA, version, "failed")
            raise
        versions.mark(conn, LAMBDA, version, "ready", row_counts=counts)
    return BatchResult(version, cutoff_ms, counts)
