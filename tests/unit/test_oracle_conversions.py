"""The oracle's ``search_conversions`` and its matches on hand-made logs, worked out by hand.

The pattern (CONTRACT section 3): a search, a click on it (its ``search_id``) by any user within
[S, S + 30 min] (as ``search_ctr``), then an order by the searcher within [the earliest such
click, S + 60 min]. Times are on 2026-11-01 (UTC); ISO forms are written
out literally.
"""

from typing import Any

from core.events import Event, Rejected, parse_event
from core.oracle import (
    compute_views,
    late_event_ids,
    search_conversion_matches,
    search_conversions,
)
from tests.unit.test_oracle import at, click, order, pv, search, utc

MIN = 60_000


def counted(values: list[bytes]) -> list[Event]:
    """The valid first occurrences, in log order (what ``compute_views`` hands each view)."""
    seen: set[str] = set()
    events = []
    for value in values:
        parsed = parse_event(value)
        if not isinstance(parsed, Rejected) and parsed.event_id not in seen:
            seen.add(parsed.event_id)
            events.append(parsed)
    return events


def rows(values: list[bytes]) -> list[dict[str, Any]]:
    return search_conversions(counted(values))


def matches(values: list[bytes]) -> list[dict[str, Any]]:
    return search_conversion_matches(counted(values))


def one_row(values: list[bytes]) -> tuple[int, int, int]:
    (row,) = rows(values)
    return row["searches"], row["clicked"], row["converted"]


def matched(values: list[bytes]) -> list[tuple[str, str, str]]:
    return [(m["search_id"], m["click_id"], m["order_id"]) for m in matches(values)]


def test_a_whole_pattern_is_one_converted_search_and_one_match() -> None:
    values = [
        search("s1", "u1", at(10, 0)),
        click("c1", "u1", at(10, 5), "s1"),
        order("o1", "u1", at(10, 20), 500),
    ]
    assert rows(values) == [
        {
            "query": "shoes",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "searches": 1,
            "clicked": 1,
            "converted": 1,
            "conversion_rate": 1.0,
        }
    ]
    assert matches(values) == [
        {
            "query": "shoes",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "search_id": "s1",
            "user_id": "u1",
            "search_ts": utc("10:00"),
            "click_id": "c1",
            "click_ts": utc("10:05"),
            "order_id": "o1",
            "order_ts": utc("10:20"),
        }
    ]


def test_a_click_exactly_30_minutes_after_counts_and_one_ms_later_does_not() -> None:
    at_bound = [search("s1", "u1", at(10)), click("c1", "u1", at(10, 30), "s1")]
    assert one_row(at_bound) == (1, 1, 0)
    past = [search("s1", "u1", at(10)), click("c1", "u1", at(10, 30, ms=1), "s1")]
    assert one_row(past) == (1, 0, 0)
    # The click at the bound still opens the order's span: an order at +45 min converts.
    assert one_row([*at_bound, order("o1", "u1", at(10, 45), 1)]) == (1, 1, 1)


def test_an_order_exactly_60_minutes_after_the_search_counts_and_one_ms_later_does_not() -> None:
    pattern = [search("s1", "u1", at(10)), click("c1", "u1", at(10, 30), "s1")]
    assert one_row([*pattern, order("o1", "u1", at(11), 1)]) == (1, 1, 1)
    assert one_row([*pattern, order("o1", "u1", at(11, ms=1), 1)]) == (1, 1, 0)


def test_an_order_before_the_click_does_not_convert_but_one_at_its_very_ms_does() -> None:
    pattern = [search("s1", "u1", at(10)), click("c1", "u1", at(10, 10), "s1")]
    assert one_row([*pattern, order("o1", "u1", at(10, 9, 59, 999), 1)]) == (1, 1, 0)
    assert one_row([*pattern, order("o1", "u1", at(10, 10), 1)]) == (1, 1, 1)


def test_an_order_before_the_search_or_a_click_before_it_does_not_count() -> None:
    values = [
        order("o0", "u1", at(9, 59), 1),
        click("c0", "u1", at(9, 59), "s1"),  # names the search, before it
        search("s1", "u1", at(10)),
    ]
    assert one_row(values) == (1, 0, 0)


def test_with_two_clicks_the_earliest_in_the_span_is_the_match_and_opens_the_order_span() -> None:
    values = [
        search("s1", "u1", at(10)),
        click("c-late", "u1", at(10, 20), "s1"),  # earlier in the log, later in time
        click("c-early", "u1", at(10, 5), "s1"),
        order("o1", "u1", at(10, 10), 1),  # after the earliest click only
    ]
    assert one_row(values) == (1, 1, 1)
    assert matched(values) == [("s1", "c-early", "o1")]


def test_ties_in_event_time_go_to_the_earlier_in_the_log() -> None:
    values = [
        search("s1", "u1", at(10)),
        click("c-b", "u1", at(10, 5), "s1"),
        click("c-a", "u1", at(10, 5), "s1"),
        order("o-b", "u1", at(10, 30), 1),
        order("o-a", "u1", at(10, 30), 2),
        order("o-later", "u1", at(10, 40), 3),
    ]
    assert matched(values) == [("s1", "c-b", "o-b")]


def test_a_duplicate_counts_once_as_its_first_occurrence() -> None:
    first_outside = [
        search("s1", "u1", at(10)),
        search("s1", "u1", at(10)),  # a retry: one search
        click("c1", "u1", at(10, 5), "s1"),
        order("o1", "u1", at(11, 10), 1),  # past the bound
        order("o1", "u1", at(10, 20), 1),  # its retry, within: the first occurrence wins
    ]
    assert one_row(first_outside) == (1, 1, 0)
    first_inside = [
        search("s1", "u1", at(10)),
        click("c1", "u1", at(10, 5), "s1"),
        order("o1", "u1", at(10, 20), 1),
        order("o1", "u1", at(11, 10), 1),
    ]
    assert one_row(first_inside) == (1, 1, 1)
    assert matches(first_inside)[0]["order_ts"] == utc("10:20")


def test_a_late_order_is_dropped_and_the_search_is_not_converted() -> None:
    values = [
        search("s1", "u1", at(10)),
        click("c1", "u1", at(10, 5), "s1"),
        pv("p1", "u1", at(10, 40)),  # moves the partition's clock to 10:40
        order("o1", "u1", at(10, 20), 1),  # 20 min behind it: late for a 10-minute delay
    ]
    late = late_event_ids(((0, offset, v) for offset, v in enumerate(values)), 10 * MIN)
    assert late == {"o1"}
    result = compute_views(values, keep=lambda e: e.event_id not in late)
    assert result.matches == []
    # Not dropped, the same order converts.
    assert [m["order_id"] for m in compute_views(values).matches] == ["o1"]


def test_a_click_by_another_user_counts_and_the_searchers_order_after_it_converts() -> None:
    values = [
        search("s1", "u1", at(10)),
        click("c1", "u2", at(10, 5), "s1"),  # another user's click on u1's search
        order("o1", "u1", at(10, 20), 1),  # the searcher's order after it
    ]
    assert one_row(values) == (1, 1, 1)
    assert matches(values) == [
        {
            "query": "shoes",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "search_id": "s1",
            "user_id": "u1",  # the searcher's
            "search_ts": utc("10:00"),
            "click_id": "c1",
            "click_ts": utc("10:05"),
            "order_id": "o1",
            "order_ts": utc("10:20"),
        }
    ]
    # clicked agrees with search_ctr's clicks on the same log.
    (ctr_row,) = compute_views(values).views["search_ctr"]
    assert ctr_row["clicks"] == 1


def test_the_earliest_click_is_taken_whoever_clicked() -> None:
    values = [
        search("s1", "u1", at(10)),
        click("c-own", "u1", at(10, 15), "s1"),
        click("c-other", "u2", at(10, 5), "s1"),  # earlier in time, later in the log
        order("o1", "u1", at(10, 10), 1),  # after the other user's click only
    ]
    assert one_row(values) == (1, 1, 1)
    assert matched(values) == [("s1", "c-other", "o1")]


def test_a_click_by_another_user_past_30_minutes_does_not_count() -> None:
    values = [
        search("s1", "u1", at(10)),
        click("c1", "u2", at(10, 30, ms=1), "s1"),
        order("o1", "u1", at(10, 40), 1),
    ]
    assert one_row(values) == (1, 0, 0)


def test_only_the_searchers_order_converts_not_the_clickers_nor_anyone_elses() -> None:
    clickers_order = [
        search("s1", "u1", at(10)),
        click("c1", "u2", at(10, 5), "s1"),
        order("o1", "u2", at(10, 20), 1),  # by the clicker, not the searcher
    ]
    assert one_row(clickers_order) == (1, 1, 0)
    other_order = [
        search("s1", "u1", at(10)),
        click("c1", "u1", at(10, 5), "s1"),
        order("o1", "u3", at(10, 20), 1),
    ]
    assert one_row(other_order) == (1, 1, 0)
    assert matches(other_order) == []


def test_one_order_completes_every_search_it_follows() -> None:
    values = [
        search("s1", "u1", at(10)),
        search("s2", "u1", at(10, 1), query="boots"),
        click("c1", "u1", at(10, 2), "s1"),
        click("c2", "u1", at(10, 3), "s2"),
        order("o1", "u1", at(10, 4), 1),
    ]
    assert matched(values) == [("s2", "c2", "o1"), ("s1", "c1", "o1")]  # boots < shoes


def test_rows_per_query_and_hour_of_the_search_even_when_the_order_is_in_the_next_hour() -> None:
    values = [
        search("s1", "u1", at(10, 59)),
        click("c1", "u1", at(11, 0), "s1"),
        order("o1", "u1", at(11, 30), 1),
        search("s2", "u2", at(10, 10)),
        search("s3", "u3", at(11, 10), query="boots"),
    ]
    assert [
        (r["query"], r["window_start"], r["searches"], r["converted"]) for r in rows(values)
    ] == [
        ("boots", utc("11:00"), 1, 0),
        ("shoes", utc("10:00"), 2, 1),
    ]
    (row,) = [r for r in rows(values) if r["query"] == "shoes"]
    assert row["conversion_rate"] == 0.5
    assert [m["window_start"] for m in matches(values)] == [utc("10:00")]


def test_no_search_no_row() -> None:
    assert rows([click("c1", "u1", at(10), "s1"), order("o1", "u1", at(10), 1)]) == []
