"""The ``revenue_by_segment`` view: per segment (as of the order) and 1-hour window, revenue.

The segment of an order is an as-of join on event time: of the user's profile versions and
tombstones with ``updated_ts <= order event_ts``, the greatest ``updated_ts`` wins, the later in
the log (greater (partition, offset)) on a tie. No such version, or a tombstone, gives
``core.catalog.UNKNOWN_SEGMENT``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import UNKNOWN_SEGMENT, VIEWS
from core.views.windows import WINDOW_START_MS, window_columns, with_window

SPEC = VIEWS["revenue_by_segment"]


def revenue_by_segment(events: DataFrame, profiles: DataFrame) -> DataFrame:
    """``segment, window_start, window_end, revenue_cents`` from valid, deduplicated events and
    profile versions (``core.views.parsing.parse_profiles``: user_id, segment, updated_ts,
    partition, offset)."""
    assert SPEC.window_ms is not None
    size = SPEC.window_ms
    orders = with_window(events.where(F.col("type") == "order"), size).select(
        "event_id", "user_id", "event_ts", "amount_cents", WINDOW_START_MS
    )
    versions = profiles.select(
        F.col("user_id").alias("_profile_user"),
        F.col("updated_ts").alias("_updated_ts"),
        # Compared field by field: the greatest updated_ts, then the later in the log.
        F.struct(
            F.col("updated_ts").alias("ts"),
            F.col("partition").alias("partition"),
            F.col("offset").alias("offset"),
            F.col("segment").alias("segment"),
        ).alias("_version"),
    )
    as_of = (F.col("_profile_user") == F.col("user_id")) & (
        F.col("_updated_ts") <= F.col("event_ts")
    )
    per_order = (
        orders.join(versions, as_of, "left")
        .groupBy("event_id", "amount_cents", WINDOW_START_MS)
        .agg(F.max("_version").alias("_in_force"))
        .withColumn("segment", F.coalesce(F.col("_in_force.segment"), F.lit(UNKNOWN_SEGMENT)))
    )
    return (
        per_order.groupBy("segment", WINDOW_START_MS)
        .agg(F.sum("amount_cents").cast("long").alias("revenue_cents"))
        .select("segment", *window_columns(size), "revenue_cents")
        .select(*SPEC.columns)
    )
