"""The ``unique_users`` view: per 1-hour window, the number of distinct users with any event."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import VIEWS
from core.views.windows import WINDOW_START_MS, window_columns, with_window

SPEC = VIEWS["unique_users"]


def unique_users(events: DataFrame) -> DataFrame:
    """``window_start, window_end, users`` from valid, deduplicated events."""
    assert SPEC.window_ms is not None
    size = SPEC.window_ms
    return (
        with_window(events, size)
        .groupBy(WINDOW_START_MS)
        .agg(F.count_distinct("user_id").alias("users"))
        .select(*window_columns(size), "users")
        .select(*SPEC.columns)
    )
