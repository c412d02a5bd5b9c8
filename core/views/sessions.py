"""The ``sessions`` view: per user, maximal runs of events whose consecutive gaps are <= 30 min.

One logic for batch and streaming: ``merge_sessions`` merges time intervals ``[session_start,
session_end]`` of a user whose gap (next start - end so far) is at most ``SESSION_GAP_MS``,
summing their ``events``. A single event is the interval ``(ts, ts, 1)``, so ``sessions(events)``
is ``merge_sessions`` of the events; and since every session is a run with no gap over 30
minutes inside, merging known sessions with new events (or with other sessions) gives the
sessions of all their events together.

Spark's ``session_window`` is not used: it closes a session when the gap is >= the gap
duration, where the contract keeps a gap of exactly 30 minutes in one session.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from core.catalog import SESSION_GAP_MS, VIEWS
from core.views.partials import PartialAggregate, no_values
from core.views.windows import placed

SPEC = VIEWS["sessions"]
INTERVAL_COLUMNS = SPEC.columns
"""``user_id, session_start, session_end, events``: what ``merge_sessions`` takes and gives."""


def merge_sessions(intervals: DataFrame) -> DataFrame:
    """Merge each user's intervals whose gap is <= 30 min; ``events`` are summed.

    Input and output columns: ``INTERVAL_COLUMNS`` (timestamps at ms precision, events long).
    """
    by_user = Window.partitionBy("user_id").orderBy("_start", "_end")
    end_so_far = F.max("_end").over(
        by_user.rowsBetween(Window.unboundedPreceding, -1)
    )  # the latest end of the user's earlier intervals: nested ones do not shorten a session
    opens = F.when(
        end_so_far.isNull() | (F.col("_start") - end_so_far > F.lit(SESSION_GAP_MS)), 1
    ).otherwise(0)
    session_no = F.sum("_opens").over(
        by_user.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        intervals.select(
            "user_id",
            F.unix_millis("session_start").alias("_start"),
            F.unix_millis("session_end").alias("_end"),
            F.col("events").cast("long").alias("events"),
        )
        .withColumn("_opens", opens)
        .withColumn("_session", session_no)
        .groupBy("user_id", "_session")
        .agg(
            F.timestamp_millis(F.min("_start")).alias("session_start"),
            F.timestamp_millis(F.max("_end")).alias("session_end"),
            F.sum("events").cast("long").alias("events"),
        )
        .select(*SPEC.columns)
    )


def event_intervals(events: DataFrame) -> DataFrame:
    """Each event as the one-event interval ``(user_id, event_time, event_time, 1)``."""
    return placed(events).select(
        "user_id",
        F.col("event_time").alias("session_start"),
        F.col("event_time").alias("session_end"),
        F.lit(1).cast("long").alias("events"),
    )


def _partial(events: DataFrame, _profiles: DataFrame | None) -> DataFrame:
    return merge_sessions(event_intervals(events))


PARTIAL = PartialAggregate(
    view="sessions",
    key=("user_id",),
    schema="user_id string, session_start timestamp, session_end timestamp, events long",
    partial=_partial,
    merge_values=no_values,
    merge_rows=merge_sessions,
)
"""Partial: a user's sessions themselves (several rows per user), merged by the gap rule."""


def sessions(events: DataFrame) -> DataFrame:
    """``user_id, session_start, session_end, events`` from valid, deduplicated events."""
    return PARTIAL.finish(PARTIAL.partial(events, None))
