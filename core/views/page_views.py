"""The ``page_views`` view: per page and 1-minute window, the number of ``page_view`` events."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import VIEWS
from core.views.windows import WINDOW_START_MS, window_columns, with_window

SPEC = VIEWS["page_views"]


def page_views(events: DataFrame) -> DataFrame:
    """``page, window_start, window_end, count`` from valid, deduplicated events."""
    assert SPEC.window_ms is not None
    size = SPEC.window_ms
    return (
        with_window(events.where(F.col("type") == "page_view"), size)
        .groupBy("page", WINDOW_START_MS)
        .agg(F.count(F.lit(1)).alias("count"))
        .select("page", *window_columns(size), "count")
        .select(*SPEC.columns)
    )
