"""The reference oracle's pattern view: ``search_conversions`` and its complex events, computed
the obvious way from the deduplicated events in log order (``core.oracle`` calls it; CONTRACT
section 3). Shares nothing with the view logic of ``core.views`` but the catalogue's bounds.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from core.catalog import CLICK_WINDOW_MS, PATTERN_WINDOW_MS
from core.events import Event
from core.times import HOUR_MS, iso, window_start

Row = dict[str, Any]


def window_row(start: int, size_ms: int) -> Row:
    """A window's two fields as the API spells them."""
    return {"window_start": iso(start), "window_end": iso(start + size_ms)}


@dataclass(frozen=True)
class _Fact:
    """An event of the pattern with its place in the log (ties: the earlier in the log)."""

    event: Event
    log_index: int

    @property
    def order_key(self) -> tuple[int, int]:
        return (self.event.event_ts, self.log_index)


def _conversions(events: Iterable[Event]) -> list[tuple[Event, _Fact | None, _Fact | None]]:
    """Each search with the click and the order of its match (None: none), in log order.

    CONTRACT section 3: a click naming the search (``search_id``), by any user (as
    ``search_ctr`` counts it), within [S, S + 30 min]; the earliest of them (ties: log order);
    then the earliest order by the searcher (the search's ``user_id``) within [that click,
    S + 60 min]. The earliest click leaves the widest span for an order, so "some click and an
    order after it" is this."""
    searches: list[Event] = []
    clicks: defaultdict[str, list[_Fact]] = defaultdict(list)
    orders: defaultdict[str, list[_Fact]] = defaultdict(list)
    for index, e in enumerate(events):
        if e.type == "search":
            searches.append(e)
        elif e.type == "click":
            assert e.search_id is not None
            clicks[e.search_id].append(_Fact(e, index))
        elif e.type == "order":
            orders[e.user_id].append(_Fact(e, index))

    matched: list[tuple[Event, _Fact | None, _Fact | None]] = []
    for s in searches:
        start = s.event_ts
        in_span = [
            c for c in clicks[s.event_id] if start <= c.event.event_ts <= start + CLICK_WINDOW_MS
        ]
        click = min(in_span, key=lambda f: f.order_key, default=None)
        order = None
        if click is not None:
            after = [
                o
                for o in orders[s.user_id]
                if click.event.event_ts <= o.event.event_ts <= start + PATTERN_WINDOW_MS
            ]
            order = min(after, key=lambda f: f.order_key, default=None)
        matched.append((s, click, order))
    return matched


def search_conversions(events: Iterable[Event]) -> list[Row]:
    """Per query and 1-hour window of the search: searches, searches clicked (by any user,
    within 30 min, as ``search_ctr``), searches converted (then an order by the searcher within
    60 min of the search, at or after the earliest click), and converted / searches."""
    size = HOUR_MS
    totals: defaultdict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0, 0])
    for s, click, order in _conversions(events):
        assert s.query is not None
        total = totals[(s.query, window_start(s.event_ts, size))]
        total[0] += 1
        total[1] += int(click is not None)
        total[2] += int(order is not None)
    return [
        {
            "query": query,
            **window_row(start, size),
            "searches": searches,
            "clicked": clicked,
            "converted": converted,
            "conversion_rate": converted / searches,
        }
        for (query, start), (searches, clicked, converted) in sorted(totals.items())
    ]


def search_conversion_matches(events: Iterable[Event]) -> list[Row]:
    """The complex events of ``search_conversions``: one per converted search, sorted by
    query, window and search id (``core.catalog.MATCH_COLUMNS``)."""
    size = HOUR_MS
    rows: list[tuple[tuple[str, int, str], Row]] = []
    for s, click, order in _conversions(events):
        if click is None or order is None:
            continue
        assert s.query is not None
        start = window_start(s.event_ts, size)
        rows.append(
            (
                (s.query, start, s.event_id),
                {
                    "query": s.query,
                    **window_row(start, size),
                    "search_id": s.event_id,
                    "user_id": s.user_id,
                    "search_ts": iso(s.event_ts),
                    "click_id": click.event.event_id,
                    "click_ts": iso(click.event.event_ts),
                    "order_id": order.event.event_id,
                    "order_ts": iso(order.event.event_ts),
                },
            )
        )
    return [row for _, row in sorted(rows, key=lambda keyed: keyed[0])]
