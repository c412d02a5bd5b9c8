"""Tumbling windows on ``event_ts``, the one way every view places an event in time.

Windows are half-open ``[start, start + size)`` in UTC, computed on the integer milliseconds of
``event_ts`` (``core.times.window_start``: ``ts - ts mod size``, floor modulo), so an event at
exactly a window's end belongs to the next window and no float ever touches a timestamp.
"""

from __future__ import annotations

import ibis.expr.types as ir

from core.times import MAX_TIMESTAMP_MS, MIN_TIMESTAMP_MS

WINDOW_START_MS = "_window_start_ms"
"""The temporary column holding a row's window start in epoch ms."""


def placed(events: ir.Table) -> ir.Table:
    """The events that have a place in time: ``event_ts`` within the years 1-9999 (NULL or out
    of range only when it overflowed; ``core.ingestion`` gives those no ``event_time``)."""
    return events.filter(events.event_ts.between(MIN_TIMESTAMP_MS, MAX_TIMESTAMP_MS))


def window_start_ms(ts_ms: ir.IntegerValue, size_ms: int) -> ir.IntegerValue:
    """Start (epoch ms) of the ``size_ms`` tumbling window holding ``ts_ms`` (floor modulo in
    both engines, whose ``%`` keeps the dividend's sign)."""
    return ts_ms - ((ts_ms % size_ms) + size_ms) % size_ms


def with_window(events: ir.Table, size_ms: int) -> ir.Table:
    """``events`` that have a place in time, plus ``WINDOW_START_MS`` of their ``event_ts``."""
    kept = placed(events)
    return kept.mutate(**{WINDOW_START_MS: window_start_ms(kept.event_ts, size_ms)})


def window_columns(table: ir.Table, size_ms: int) -> dict[str, ir.IntegerValue]:
    """``window_start`` and ``window_end`` (epoch ms; dressed as timestamps by the engine's
    adapter, ``core.views.query``) from ``WINDOW_START_MS``."""
    start = table[WINDOW_START_MS]
    return {"window_start": start, "window_end": start + size_ms}
