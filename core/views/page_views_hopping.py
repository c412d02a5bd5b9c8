"""The ``page_views_hopping`` view: per page, 10-minute windows starting every minute, the
number of ``page_view`` events (a hopping window, for smoothing).

Partial: ``page_views``'s own, a counter per (page, minute), here the windows' *panes*, merged
by summing. Each pane contributes its count to the ten windows that hold it, those
starting in the ten minutes up to it, so the state holds one row per pane and the windows'
sums are finished from them: a late event updates one pane and ten windows, and no window is
stored ten times over.
"""

from __future__ import annotations

from dataclasses import replace

import ibis
import ibis.expr.types as ir

from core.catalog import VIEWS
from core.views.page_views import PARTIAL as PAGE_VIEWS
from core.views.page_views import SIZE as MINUTE_PANE
from core.views.windows import WINDOW_START_MS, window_columns

SPEC = VIEWS["page_views_hopping"]
assert SPEC.window_ms is not None and SPEC.hop_ms is not None
SIZE, HOP = SPEC.window_ms, SPEC.hop_ms
PANES = SIZE // HOP
"""Windows holding each pane."""
assert PANES * HOP == SIZE, "a window is a whole number of hops"
assert HOP == MINUTE_PANE, "the panes are page_views' windows"

_PANE = "_pane"


def _contributions(partial: ir.Table) -> ir.Table:
    """The pane starting at minute m lies in the windows starting at m, m - 1 min, ...,
    m - 9 min: window ``[s, s + 10 min)`` holds ``[m, m + 1 min)`` exactly when
    ``m - 10 min < s <= m``."""
    fanned = partial.mutate(**{_PANE: ibis.literal(list(range(PANES)), "array<int64>").unnest()})
    return fanned.select(
        page=fanned.page,
        **{WINDOW_START_MS: fanned[WINDOW_START_MS] - fanned[_PANE] * HOP},
        count=fanned["count"],
    )


def _finish_totals(totals: ir.Table) -> ir.Table:
    return totals.select(page=totals.page, **window_columns(totals, SIZE), count=totals["count"])


PARTIAL = replace(
    PAGE_VIEWS,
    view="page_views_hopping",
    contributions=_contributions,
    finish_totals=_finish_totals,
)
