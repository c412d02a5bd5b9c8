"""What each logic version changes, as a filter on valid events before the views.

The views themselves stay the one shared logic; a logic version only decides which events they
see, so every path (batch, speed, Kappa) applies a version the same way: as a query on either
engine (``logic_query``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import ibis.expr.datatypes as dt
import ibis.expr.types as ir

import core.views.tables as tables
from core.catalog import UNTRUSTED_CLOCK_MS, check_logic_version
from core.views.query import Query

LogicFilter = Callable[[ir.Table], ir.Table]


def _clock_offset(events: ir.Table) -> ir.NumericValue:
    """|received_ts - sent_ts|, exact: in decimal, as two longs' difference may not fit one."""
    exact = dt.Decimal(21, 0)
    return (events.received_ts.cast(exact) - events.sent_ts.cast(exact)).abs()


def _trusted_clocks(events: ir.Table) -> ir.Table:
    return events.filter(_clock_offset(events) < UNTRUSTED_CLOCK_MS)


def _untrusted_clocks(events: ir.Table) -> ir.Table:
    # The bug of logic version `bug`: version 2's comparison reversed.
    return events.filter(_clock_offset(events) >= UNTRUSTED_CLOCK_MS)


_FILTERS: dict[str, LogicFilter | None] = {
    "1": None,
    "2": _trusted_clocks,
    "bug": _untrusted_clocks,
}


def logic_filter(logic_version: str) -> LogicFilter | None:
    """The filter of `logic_version` on valid events; None when it keeps them all."""
    return _FILTERS[check_logic_version(logic_version)]


@cache
def logic_query(logic_version: str) -> Query | None:
    """``in_events`` -> the events `logic_version` keeps; None when it keeps them all."""
    chosen = logic_filter(logic_version)
    if chosen is None:
        return None
    return Query(f"logic {logic_version}", chosen(tables.events()).select(*tables.EVENTS.names))
