"""The ``page_views`` view: per page and 1-minute window, the number of ``page_view`` events.

Partial: a counter per (page, window), merged by summing.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from core.catalog import VIEWS
from core.views.partials import PartialAggregate, sum_of
from core.views.windows import WINDOW_START_MS, window_columns, with_window

SPEC = VIEWS["page_views"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms


def _partial(events: ir.Table, _profiles: ir.Table) -> ir.Table:
    views = with_window(events.filter(events.type == "page_view"), SIZE)
    return views.group_by(["page", WINDOW_START_MS]).agg(count=views.count().cast("int64"))


def _finish_totals(totals: ir.Table) -> ir.Table:
    return totals.select(page=totals.page, **window_columns(totals, SIZE), count=totals["count"])


PARTIAL = PartialAggregate(
    view="page_views",
    key=("page", WINDOW_START_MS),
    schema=ibis.schema({"page": "string", WINDOW_START_MS: "int64", "count": "int64"}),
    partial=_partial,
    merge_values=sum_of("count"),
    total_key=("page", WINDOW_START_MS),
    counters=("count",),
    contributions=lambda partial: partial.select("page", WINDOW_START_MS, "count"),
    finish_totals=_finish_totals,
)
