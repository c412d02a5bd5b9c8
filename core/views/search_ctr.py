"""The ``search_ctr`` view: per query and 1-hour window of the search, clicked searches.

A search is clicked when at least one click names it (``search_id == search.event_id``) with an
``event_ts`` in the CLOSED interval ``[search event_ts, search event_ts + 30 min]``: a click
exactly 30 minutes later counts, one a millisecond later does not, nor one before the search.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import CLICK_WINDOW_MS, VIEWS
from core.views.windows import WINDOW_START_MS, placed, window_columns, with_window

SPEC = VIEWS["search_ctr"]


def search_ctr(events: DataFrame) -> DataFrame:
    """``query, window_start, window_end, searches, clicks, ctr`` from valid, unique events."""
    assert SPEC.window_ms is not None
    size = SPEC.window_ms
    searches = with_window(events.where(F.col("type") == "search"), size).select(
        F.col("event_id").alias("_search_id"),
        F.col("event_ts").alias("_search_ts"),
        "query",
        WINDOW_START_MS,
    )
    clicks = placed(events.where(F.col("type") == "click")).select(
        F.col("search_id").alias("_clicked_id"), F.col("event_ts").alias("_click_ts")
    )
    in_window = (
        (F.col("_clicked_id") == F.col("_search_id"))
        & (F.col("_click_ts") >= F.col("_search_ts"))
        & (F.col("_click_ts") <= F.col("_search_ts") + F.lit(CLICK_WINDOW_MS))
    )
    per_search = (
        searches.join(clicks, in_window, "left")
        .groupBy("_search_id", "query", WINDOW_START_MS)
        .agg((F.count("_click_ts") > 0).alias("_clicked"))
    )
    return (
        per_search.groupBy("query", WINDOW_START_MS)
        .agg(
            F.count(F.lit(1)).alias("searches"),
            F.count_if(F.col("_clicked")).alias("clicks"),
        )
        .select(
            "query",
            *window_columns(size),
            "searches",
            "clicks",
            (F.col("clicks").cast("double") / F.col("searches").cast("double")).alias("ctr"),
        )
        .select(*SPEC.columns)
    )
