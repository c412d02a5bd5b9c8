"""The ``unique_users`` view: per 1-hour window, the number of distinct users with any event.

Partial: the set of (window, user) facts, merged by union; each fact contributes one user.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import VIEWS
from core.views.partials import PartialAggregate, no_values
from core.views.windows import WINDOW_START_MS, window_columns, with_window

SPEC = VIEWS["unique_users"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms


def _partial(events: DataFrame, _profiles: DataFrame | None) -> DataFrame:
    return with_window(events, SIZE).select(WINDOW_START_MS, "user_id").distinct()


def _finish_totals(totals: DataFrame) -> DataFrame:
    return totals.select(*window_columns(SIZE), "users").select(*SPEC.columns)


PARTIAL = PartialAggregate(
    view="unique_users",
    key=(WINDOW_START_MS, "user_id"),
    schema=f"{WINDOW_START_MS} long, user_id string",
    partial=_partial,
    merge_values=no_values,
    total_key=(WINDOW_START_MS,),
    counters=("users",),
    contributions=lambda partial: partial.select(WINDOW_START_MS, F.lit(1).alias("users")),
    finish_totals=_finish_totals,
)


def unique_users(events: DataFrame) -> DataFrame:
    """``window_start, window_end, users`` from valid, deduplicated events."""
    return PARTIAL.finish(PARTIAL.partial(events, None))
