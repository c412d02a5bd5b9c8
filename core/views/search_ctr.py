"""The ``search_ctr`` view: per query and 1-hour window of the search, clicked searches.

A search is clicked when at least one click names it (``search_id == search.event_id``) with an
``event_ts`` in the CLOSED interval ``[search event_ts, search event_ts + 30 min]``: a click
exactly 30 minutes later counts, one a millisecond later does not, nor one before the search.

Partial: per search id, the search (its query and time, once it has arrived) and the times of
the clicks naming it (which may arrive first); merged by taking the search and concatenating
the clicks. A search contributes one search, and one click if a click falls in its interval.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from core.catalog import CLICK_WINDOW_MS, VIEWS
from core.views.partials import PartialAggregate
from core.views.windows import WINDOW_START_MS, placed, window_columns, window_start_ms

SPEC = VIEWS["search_ctr"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms


def _merge_values(both: ir.Table) -> dict[str, ir.Value]:
    return {
        "query": both.query.max(),  # one search per id: max picks it over the NULLs
        "search_ts": both.search_ts.max(),
        "clicks": both.clicks.collect().flatten(),
    }


def _partial(events: ir.Table, _profiles: ir.Table) -> ir.Table:
    searches = placed(events.filter(events.type == "search"))
    searches = searches.select(
        search_id=searches.event_id,
        query=searches.query,
        search_ts=searches.event_ts,
        clicks=ibis.literal([], type="array<int64>"),
    )
    clicks = placed(events.filter(events.type == "click"))
    clicks = clicks.select(
        search_id=clicks.search_id,
        query=ibis.null("string"),
        search_ts=ibis.null("int64"),
        clicks=ibis.array([clicks.event_ts]),
    )
    both = searches.union(clicks)
    return both.group_by("search_id").agg(**_merge_values(both))


def _contributions(partial: ir.Table) -> ir.Table:
    searches = partial.filter(partial.search_ts.notnull())
    start = searches.search_ts
    in_window = searches.clicks.filter(lambda c: (c >= start) & (c <= start + CLICK_WINDOW_MS))
    return searches.select(
        query=searches.query,
        **{WINDOW_START_MS: window_start_ms(start, SIZE)},
        searches=ibis.literal(1, "int64"),
        clicks=(in_window.length() > 0).cast("int64"),
    )


def _finish_totals(totals: ir.Table) -> ir.Table:
    return totals.select(
        query=totals.query,
        **window_columns(totals, SIZE),
        searches=totals.searches,
        clicks=totals.clicks,
        ctr=totals.clicks.cast("float64") / totals.searches.cast("float64"),
    )


PARTIAL = PartialAggregate(
    view="search_ctr",
    key=("search_id",),
    schema=ibis.schema(
        {"search_id": "string", "query": "string", "search_ts": "int64", "clicks": "array<int64>"}
    ),
    partial=_partial,
    merge_values=_merge_values,
    total_key=("query", WINDOW_START_MS),
    counters=("searches", "clicks"),
    contributions=_contributions,
    finish_totals=_finish_totals,
)
