"""The ``search_ctr`` view: per query and 1-hour window of the search, clicked searches.

A search is clicked when at least one click names it (``search_id == search.event_id``) with an
``event_ts`` in the CLOSED interval ``[search event_ts, search event_ts + 30 min]``: a click
exactly 30 minutes later counts, one a millisecond later does not, nor one before the search.

Partial: per search id, the search (its query and time, once it has arrived) and the times of
the clicks naming it (which may arrive first); merged by taking the search and concatenating
the clicks. A search contributes one search, and one click if a click falls in its interval.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import CLICK_WINDOW_MS, VIEWS
from core.views.partials import PartialAggregate
from core.views.windows import WINDOW_START_MS, placed, window_columns, window_start_ms

SPEC = VIEWS["search_ctr"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms


def _merge_values() -> list:  # type: ignore[type-arg]
    return [
        F.max("query").alias("query"),  # one search per id: max picks it over the NULLs
        F.max("search_ts").alias("search_ts"),
        F.flatten(F.collect_list("clicks")).alias("clicks"),
    ]


def _partial(events: DataFrame, _profiles: DataFrame | None) -> DataFrame:
    searches = placed(events.where(F.col("type") == "search")).select(
        F.col("event_id").alias("search_id"),
        "query",
        F.col("event_ts").alias("search_ts"),
        F.array().cast("array<long>").alias("clicks"),
    )
    clicks = placed(events.where(F.col("type") == "click")).select(
        "search_id",
        F.lit(None).cast("string").alias("query"),
        F.lit(None).cast("long").alias("search_ts"),
        F.array("event_ts").alias("clicks"),
    )
    return searches.unionByName(clicks).groupBy("search_id").agg(*_merge_values())


def _contributions(partial: DataFrame) -> DataFrame:
    start = F.col("search_ts")
    in_window = F.exists("clicks", lambda c: (c >= start) & (c <= start + F.lit(CLICK_WINDOW_MS)))
    return partial.where(start.isNotNull()).select(
        "query",
        window_start_ms(start, SIZE).alias(WINDOW_START_MS),
        F.lit(1).cast("long").alias("searches"),
        in_window.cast("long").alias("clicks"),
    )


def _finish_totals(totals: DataFrame) -> DataFrame:
    return totals.select(
        "query",
        *window_columns(SIZE),
        "searches",
        "clicks",
        (F.col("clicks").cast("double") / F.col("searches").cast("double")).alias("ctr"),
    ).select(*SPEC.columns)


PARTIAL = PartialAggregate(
    view="search_ctr",
    key=("search_id",),
    schema="search_id string, query string, search_ts long, clicks array<long>",
    partial=_partial,
    merge_values=_merge_values,
    total_key=("query", WINDOW_START_MS),
    counters=("searches", "clicks"),
    contributions=_contributions,
    finish_totals=_finish_totals,
)


def search_ctr(events: DataFrame) -> DataFrame:
    """``query, window_start, window_end, searches, clicks, ctr`` from valid, unique events."""
    return PARTIAL.finish(PARTIAL.partial(events, None))
