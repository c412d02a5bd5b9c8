"""The ``unique_users`` view: per 1-hour window, the number of distinct users with any event.

Partial: the set of (window, user) facts, merged by union; each fact contributes one user.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from core.catalog import VIEWS
from core.views.partials import PartialAggregate, no_values
from core.views.windows import WINDOW_START_MS, window_columns, with_window

SPEC = VIEWS["unique_users"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms


def _partial(events: ir.Table, _profiles: ir.Table) -> ir.Table:
    return with_window(events, SIZE).select(WINDOW_START_MS, "user_id").distinct()


def _finish_totals(totals: ir.Table) -> ir.Table:
    return totals.select(**window_columns(totals, SIZE), users=totals.users)


PARTIAL = PartialAggregate(
    view="unique_users",
    key=(WINDOW_START_MS, "user_id"),
    schema=ibis.schema({WINDOW_START_MS: "int64", "user_id": "string"}),
    partial=_partial,
    merge_values=no_values,
    total_key=(WINDOW_START_MS,),
    counters=("users",),
    contributions=lambda partial: partial.select(WINDOW_START_MS, users=ibis.literal(1, "int64")),
    finish_totals=_finish_totals,
)
