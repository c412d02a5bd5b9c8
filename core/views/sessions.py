"""The ``sessions`` view: per user, maximal runs of events whose consecutive gaps are <= 30 min.

One logic for batch and streaming: ``merge_sessions`` merges time intervals ``[session_start,
session_end]`` (epoch ms) of a user whose gap (next start - end so far) is at most
``SESSION_GAP_MS``, summing their ``events``. A single event is the interval ``(ts, ts, 1)``, so
the sessions of some events are ``merge_sessions`` of the events; and since every session is a
run with no gap over 30 minutes inside, merging known sessions with new events (or with other
sessions) gives the sessions of all their events together.

Spark's ``session_window`` is not used: it closes a session when the gap is >= the gap
duration, where the contract keeps a gap of exactly 30 minutes in one session.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from core.catalog import SESSION_GAP_MS, VIEWS
from core.views.partials import PartialAggregate, no_values
from core.views.windows import placed

SPEC = VIEWS["sessions"]
INTERVALS = ibis.schema(
    {"user_id": "string", "session_start": "int64", "session_end": "int64", "events": "int64"}
)
"""What ``merge_sessions`` takes and gives: ``SPEC.columns``, the times in epoch ms."""


def merge_sessions(intervals: ir.Table) -> ir.Table:
    """Merge each user's intervals whose gap is <= 30 min; ``events`` are summed."""
    order = ["session_start", "session_end"]
    earlier = ibis.window(group_by="user_id", order_by=order, rows=(None, -1))
    so_far = ibis.window(group_by="user_id", order_by=order, rows=(None, 0))
    # The latest end of the user's earlier intervals: nested ones do not shorten a session.
    ends = intervals.mutate(_end_so_far=intervals.session_end.max().over(earlier))
    opens = ends.mutate(
        _opens=ibis.ifelse(
            ends._end_so_far.isnull() | (ends.session_start - ends._end_so_far > SESSION_GAP_MS),
            1,
            0,
        )
    )
    numbered = opens.mutate(_session=opens._opens.sum().over(so_far))
    return (
        numbered.group_by(["user_id", "_session"])
        .agg(
            session_start=numbered.session_start.min(),
            session_end=numbered.session_end.max(),
            events=numbered.events.sum().cast("int64"),
        )
        .select(*SPEC.columns)
    )


def reach(first_ms: int, last_ms: int) -> tuple[int, int]:
    """The stored sessions that events from `first_ms` to `last_ms` (event time) can change:
    those ending at or after the first less a gap and starting at or before the last plus a
    gap, as ``(end from, start until)``. Any other session stays as it is, since an event
    further than a gap from it cannot join it (and cannot bridge it to another): so a
    micro-batch reads and rewrites a user's sessions near its events, never the user's whole
    history, and a batch session ending a gap or more before the cutoff is final."""
    return first_ms - SESSION_GAP_MS, last_ms + SESSION_GAP_MS


def event_intervals(events: ir.Table) -> ir.Table:
    """Each event as the one-event interval ``(user_id, event_ts, event_ts, 1)``."""
    kept = placed(events)
    return kept.select(
        user_id=kept.user_id,
        session_start=kept.event_ts,
        session_end=kept.event_ts,
        events=ibis.literal(1, "int64"),
    )


def _partial(events: ir.Table, _profiles: ir.Table) -> ir.Table:
    return merge_sessions(event_intervals(events))


PARTIAL = PartialAggregate(
    view="sessions",
    key=("user_id",),
    schema=INTERVALS,
    partial=_partial,
    merge_values=no_values,
    merge_rows=merge_sessions,
)
"""Partial: a user's sessions themselves (several rows per user), merged by the gap rule."""
