"""The distance of a served view from the oracle (core.comparison) on every view, the two of
issue 42 included: `segment_totals` has no time fields and is matched on its segment alone. The
oracle itself shows the compaction figure's claim: the as-of join needs every profile version,
the table-table join only each user's last record, which compaction keeps. And the sampler's
rows off per view (the late figure's) cover all eight views."""

from __future__ import annotations

import json
from typing import Any, cast

import pytest

from comparison.feed import Clock, SteadyFeed
from comparison.figures import AS_OF_JOIN, PROFILE_JOINS, TABLE_TABLE_JOIN
from comparison.sampler import Sampler
from core.catalog import VIEW_NAMES, VIEWS
from core.comparison import keyed, view_distance
from core.events import ProfileChange
from core.oracle import compute_views
from core.settings import Settings

DAY = 20_758 * 86_400_000  # 2026-11-01T00:00:00Z


def at(hour: int, minute: int = 0) -> int:
    return DAY + (hour * 60 + minute) * 60_000


def event(event_id: str, type_: str, user_id: str, ts: int, **fields: Any) -> bytes:
    return json.dumps(
        {
            "event_id": event_id,
            "type": type_,
            "user_id": user_id,
            "device_ts": ts,
            "sent_ts": ts,
            "received_ts": ts,
            **fields,
        }
    ).encode()


def pv(event_id: str, user_id: str, ts: int, page: str = "/home") -> bytes:
    return event(event_id, "page_view", user_id, ts, page=page)


def order(event_id: str, user_id: str, ts: int, amount_cents: int) -> bytes:
    return event(event_id, "order", user_id, ts, amount_cents=amount_cents)


EVENTS = [
    pv("p1", "u1", at(9, 5), "/a"),
    pv("p2", "u2", at(9, 7), "/b"),
    event("s1", "search", "u1", at(9, 10), query="shoes", search_id="q1"),
    order("o1", "u1", at(9, 30), 100),  # u1 was bronze then: gold only as of 10:00
    order("o2", "u1", at(11), 50),
    order("o3", "u2", at(10), 7),
    order("o4", "u3", at(10), 9),  # no profile: unknown
]
HISTORY = [
    ProfileChange("u1", "bronze", at(8)),
    ProfileChange("u2", "silver", at(8)),
    ProfileChange("u1", "gold", at(10)),
]
COMPACTED = [HISTORY[1], HISTORY[2]]
"""What compaction keeps of `HISTORY`: each user's last record."""


def test_the_segment_totals_are_matched_on_their_segment_alone() -> None:
    spec = VIEWS[TABLE_TABLE_JOIN]
    assert spec.time_fields == ()
    rows = [
        {"segment": "gold", "users": 2, "revenue_cents": 150},
        {"segment": "unknown", "users": 1, "revenue_cents": 9},
    ]
    assert keyed(spec, rows) == {("gold",): (2, 150), ("unknown",): (1, 9)}
    served = [
        {"segment": "gold", "users": 2, "revenue_cents": 151},  # differing
        {"segment": "silver", "users": 1, "revenue_cents": 7},  # extra
    ]  # unknown: missing
    distance = view_distance(TABLE_TABLE_JOIN, served, rows)
    assert (distance.served, distance.expected) == (2, 2)
    assert (distance.missing, distance.extra, distance.differing) == (1, 1, 1)
    assert distance.describe() == "3 off (1 missing, 1 extra, 1 differing)"
    assert view_distance(TABLE_TABLE_JOIN, list(reversed(rows)), rows).exact


@pytest.mark.parametrize("view", VIEW_NAMES)
def test_every_view_is_exact_against_itself_and_off_without_a_row(view: str) -> None:
    rows = compute_views(EVENTS, HISTORY).views[view]
    assert rows, view  # the workload gives every view a row
    assert view_distance(view, rows, rows).exact
    short = view_distance(view, rows[1:], rows)
    assert (short.missing, short.off) == (1, 1), view


def test_after_compaction_only_the_as_of_join_differs_from_the_full_history() -> None:
    full = compute_views(EVENTS, HISTORY).views
    compacted = compute_views(EVENTS, COMPACTED).views
    off = {view: view_distance(view, compacted[view], full[view]).off for view in PROFILE_JOINS}
    # Order o1 (9:30): bronze with the history; without it u1's only record is from 10:00,
    # so unknown: the 9:00 window's bronze row is missing and its unknown row extra.
    assert off == {AS_OF_JOIN: 2, TABLE_TABLE_JOIN: 0}
    assert compacted[TABLE_TABLE_JOIN] == full[TABLE_TABLE_JOIN]


def test_the_sampler_counts_rows_off_in_every_view_the_new_ones_included(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    feed = SteadyFeed(cast(Settings, None), EVENTS, 1.0, Clock())
    feed.produced_lines = len(EVENTS)
    sampler = Sampler(cast(Settings, None), Clock(), feed, HISTORY, every_s=1.0)
    expected = compute_views(EVENTS, HISTORY).views
    answers = {view: ([dict(r) for r in rows], None) for view, rows in expected.items()}
    answers[TABLE_TABLE_JOIN] = ([], None)  # a served view without its rows
    answers["page_views_hopping"] = (expected["page_views_hopping"][2:], None)
    monkeypatch.setattr("comparison.sampler.served", lambda settings, architecture: answers)
    off = sampler.views_off("kappa")
    assert tuple(off) == VIEW_NAMES
    assert off == {
        **dict.fromkeys(VIEW_NAMES, 0),
        TABLE_TABLE_JOIN: len(expected[TABLE_TABLE_JOIN]),
        "page_views_hopping": 2,
    }
    assert sampler.rows_off("kappa") == sum(off.values())
