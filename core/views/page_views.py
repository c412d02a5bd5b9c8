"""The ``page_views`` view: per page and 1-minute window, the number of ``page_view`` events.

Partial: a counter per (page, window), merged by summing.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import VIEWS
from core.views.partials import PartialAggregate, sum_of
from core.views.windows import WINDOW_START_MS, window_columns, with_window

SPEC = VIEWS["page_views"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms


def _partial(events: DataFrame, _profiles: DataFrame | None) -> DataFrame:
    return (
        with_window(events.where(F.col("type") == "page_view"), SIZE)
        .groupBy("page", WINDOW_START_MS)
        .agg(F.count(F.lit(1)).alias("count"))
    )


def _finish_totals(totals: DataFrame) -> DataFrame:
    return totals.select("page", *window_columns(SIZE), "count").select(*SPEC.columns)


PARTIAL = PartialAggregate(
    view="page_views",
    key=("page", WINDOW_START_MS),
    schema=f"page string, {WINDOW_START_MS} long, count long",
    partial=_partial,
    merge_values=sum_of("count"),
    total_key=("page", WINDOW_START_MS),
    counters=("count",),
    contributions=lambda partial: partial.select("page", WINDOW_START_MS, "count"),
    finish_totals=_finish_totals,
)


def page_views(events: DataFrame) -> DataFrame:
    """``page, window_start, window_end, count`` from valid, deduplicated events."""
    return PARTIAL.finish(PARTIAL.partial(events, None))
