"""The reference oracle on hand-made logs; every expected value is worked out by hand.

Times are on 2026-11-01 (UTC). ``at(10, 1)`` is 10:01:00.000; its ISO form is written out
literally in the expectations, never computed by the code under test.
"""

import json
from pathlib import Path
from typing import Any

import pytest

from core.catalog import VIEW_KEYS, VIEW_NAMES, VIEWS
from core.events import Event, ProfileChange
from core.oracle import compute_views, load_jsonl_values, load_profiles_jsonl

DAY = 20_758 * 86_400_000  # 2026-11-01T00:00:00Z
MIN = 60_000


def at(hour: int, minute: int = 0, second: int = 0, ms: int = 0) -> int:
    return DAY + ((hour * 60 + minute) * 60 + second) * 1000 + ms


def utc(clock: str) -> str:
    """``utc("10:01")`` -> ``2026-11-01T10:01:00Z``; ``utc("10:01:02.003")`` keeps the fraction."""
    if clock.count(":") == 1:
        clock += ":00"
    return f"2026-11-01T{clock}Z"


def record(
    event_id: str,
    type_: str,
    user_id: str,
    ts: int,
    *,
    sent_ts: int | None = None,
    received_ts: int | None = None,
    **fields: Any,
) -> bytes:
    """A raw event value; by default the device clock is right and transit is instant, so
    ``event_ts == ts``. Pass ``sent_ts``/``received_ts`` to model skew and delay."""
    obj = {
        "event_id": event_id,
        "type": type_,
        "user_id": user_id,
        "device_ts": ts,
        "sent_ts": ts if sent_ts is None else sent_ts,
        "received_ts": ts if received_ts is None else received_ts,
        **fields,
    }
    return json.dumps(obj).encode()


def pv(event_id: str, user_id: str, ts: int, page: str = "/home", **kw: Any) -> bytes:
    return record(event_id, "page_view", user_id, ts, page=page, **kw)


def search(event_id: str, user_id: str, ts: int, query: str = "shoes", **kw: Any) -> bytes:
    return record(event_id, "search", user_id, ts, query=query, **kw)


def click(event_id: str, user_id: str, ts: int, search_id: str, **kw: Any) -> bytes:
    return record(event_id, "click", user_id, ts, page="/item", search_id=search_id, **kw)


def order(event_id: str, user_id: str, ts: int, amount_cents: int, **kw: Any) -> bytes:
    return record(event_id, "order", user_id, ts, amount_cents=amount_cents, **kw)


def view(name: str, values: list[bytes], profiles: list[ProfileChange] | None = None) -> Any:
    return compute_views(values, profiles or []).views[name]


# --- shape ------------------------------------------------------------------------------------


def test_empty_log_gives_empty_views_and_no_counts() -> None:
    result = compute_views([])
    assert result.views == {name: [] for name in VIEW_NAMES}
    assert (result.quarantined, result.duplicates, result.rejected_by_reason) == (0, 0, {})


def test_every_view_is_present_in_catalogue_order() -> None:
    assert VIEW_NAMES == (
        "page_views",
        "unique_users",
        "search_ctr",
        "revenue_by_segment",
        "sessions",
        "page_views_hopping",
        "segment_totals",
        "search_conversions",
    )
    assert tuple(compute_views([pv("e1", "u1", at(10))]).views) == VIEW_NAMES


def test_row_fields_are_keys_then_time_then_values_as_catalogued() -> None:
    values = [
        pv("p", "u1", at(10)),
        search("s", "u1", at(10)),
        order("o", "u1", at(10), 5),
    ]
    views = compute_views(values).views
    expected_columns = {
        "page_views": ["page", "window_start", "window_end", "count"],
        "unique_users": ["window_start", "window_end", "users"],
        "search_ctr": ["query", "window_start", "window_end", "searches", "clicks", "ctr"],
        "revenue_by_segment": ["segment", "window_start", "window_end", "revenue_cents"],
        "sessions": ["user_id", "session_start", "session_end", "events"],
        "page_views_hopping": ["page", "window_start", "window_end", "count"],
        "segment_totals": ["segment", "users", "revenue_cents"],
        "search_conversions": [
            "query",
            "window_start",
            "window_end",
            "searches",
            "clicked",
            "converted",
            "conversion_rate",
        ],
    }
    for name, columns in expected_columns.items():
        assert {tuple(row) for row in views[name]} == {tuple(columns)}
        assert list(VIEWS[name].columns) == columns
    assert VIEW_KEYS == {
        "page_views": ("page",),
        "unique_users": (),
        "search_ctr": ("query",),
        "revenue_by_segment": ("segment",),
        "sessions": ("user_id",),
        "page_views_hopping": ("page",),
        "segment_totals": ("segment",),
        "search_conversions": ("query",),
    }


# --- page_views -------------------------------------------------------------------------------


def test_page_views_count_per_page_and_minute_with_half_open_windows() -> None:
    values = [
        pv("e1", "u1", at(10, 0, 59, 999), page="/a"),  # last ms of [10:00, 10:01)
        pv("e2", "u2", at(10, 1), page="/a"),  # exactly 10:01:00.000 -> [10:01, 10:02)
        pv("e3", "u1", at(10, 1, 30), page="/a"),
        pv("e4", "u1", at(10, 0), page="/b"),
        click("c1", "u1", at(10, 0, 10), search_id="s0"),  # a click is not a page view
    ]
    assert view("page_views", values) == [
        {"page": "/a", "window_start": utc("10:00"), "window_end": utc("10:01"), "count": 1},
        {"page": "/a", "window_start": utc("10:01"), "window_end": utc("10:02"), "count": 2},
        {"page": "/b", "window_start": utc("10:00"), "window_end": utc("10:01"), "count": 1},
    ]


def test_clock_correction_moves_an_event_into_another_window() -> None:
    # Device clock 4.5 min behind and 1 min queued offline: device 09:58:30, sent 09:59:30
    # (device clock), received 10:04:00 (server) -> event_ts 09:58:30 + 4:30 = 10:03:00.
    # Neither the device minute (09:58) nor the receive minute (10:04) is the right one.
    values = [pv("e1", "u1", at(9, 58, 30), sent_ts=at(9, 59, 30), received_ts=at(10, 4))]
    assert view("page_views", values) == [
        {"page": "/home", "window_start": utc("10:03"), "window_end": utc("10:04"), "count": 1}
    ]


def test_clock_correction_moves_an_event_into_another_hour() -> None:
    # Device 2 min behind the server: device 10:59:00 = server 11:01:00.
    values = [
        pv("e1", "u1", at(10, 59), sent_ts=at(10, 59), received_ts=at(11, 1)),
        pv("e2", "u2", at(10, 30)),
    ]
    assert view("unique_users", values) == [
        {"window_start": utc("10:00"), "window_end": utc("11:00"), "users": 1},
        {"window_start": utc("11:00"), "window_end": utc("12:00"), "users": 1},
    ]


# --- duplicates and invalid records -----------------------------------------------------------


def test_duplicate_counts_once_and_the_first_in_log_order_wins() -> None:
    first = pv("e1", "u1", at(10, 0, 30), page="/a")
    # The retry reached the server 60 s later: event_ts 10:01:30, another window and page.
    retry = pv("e1", "u1", at(10, 0, 30), received_ts=at(10, 1, 30), page="/b")
    result = compute_views([first, retry, retry])
    assert result.duplicates == 2
    assert result.views["page_views"] == [
        {"page": "/a", "window_start": utc("10:00"), "window_end": utc("10:01"), "count": 1}
    ]
    assert result.views["sessions"] == [
        {
            "user_id": "u1",
            "session_start": utc("10:00:30"),
            "session_end": utc("10:00:30"),
            "events": 1,
        }
    ]


def test_duplicate_order_counts_revenue_once() -> None:
    values = [order("o1", "u1", at(10, 5), 700), order("o1", "u1", at(10, 5), 700)]
    assert view("revenue_by_segment", values) == [
        {
            "segment": "unknown",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "revenue_cents": 700,
        }
    ]


def test_invalid_records_are_counted_by_reason_and_excluded_from_every_view() -> None:
    bad_page_view = json.dumps(
        {"event_id": "x1", "type": "page_view", "user_id": "u2", "device_ts": at(10)}
        | {"sent_ts": at(10), "received_ts": at(10)}
    ).encode()
    values = [
        b"not json at all",
        bad_page_view,  # no page
        order("x2", "u3", at(10), -100),
        pv("e1", "u1", at(10, 0, 5)),
        pv("x3", "u4", at(10), device_ts=at(10, 0, 1)),  # device_ts after sent_ts
        b"\xff\xfe",
    ]
    result = compute_views(values)
    assert result.quarantined == 5
    assert result.rejected_by_reason == {
        "device_after_sent": 1,
        "missing_field:page": 1,
        "negative_amount": 1,
        "not_json": 2,
    }
    assert result.duplicates == 0
    assert result.views["unique_users"] == [
        {"window_start": utc("10:00"), "window_end": utc("11:00"), "users": 1}
    ]
    assert result.views["revenue_by_segment"] == []
    assert [row["user_id"] for row in result.views["sessions"]] == ["u1"]


def test_an_invalid_first_occurrence_does_not_make_the_valid_one_a_duplicate() -> None:
    invalid = pv("e1", "u1", at(10), device_ts=at(10, 5))  # device_ts > sent_ts
    valid = pv("e1", "u1", at(10, 2))
    result = compute_views([invalid, valid])
    assert (result.quarantined, result.duplicates) == (1, 0)
    assert result.views["page_views"] == [
        {"page": "/home", "window_start": utc("10:02"), "window_end": utc("10:03"), "count": 1}
    ]


def test_str_values_are_accepted_like_bytes() -> None:
    result = compute_views([pv("e1", "u1", at(10)).decode()])
    assert result.views["unique_users"][0]["users"] == 1


# --- unique_users -----------------------------------------------------------------------------


def test_unique_users_counts_distinct_users_with_any_event_per_hour() -> None:
    values = [
        pv("e1", "u1", at(10, 5)),
        search("e2", "u1", at(10, 50)),
        order("e3", "u2", at(10, 59, 59, 999), 1),
        click("e4", "u1", at(11), search_id="e2"),  # 11:00:00.000 is the next hour
    ]
    assert view("unique_users", values) == [
        {"window_start": utc("10:00"), "window_end": utc("11:00"), "users": 2},
        {"window_start": utc("11:00"), "window_end": utc("12:00"), "users": 1},
    ]


# --- search_ctr -------------------------------------------------------------------------------


def ctr_row(values: list[bytes]) -> dict[str, Any]:
    rows = view("search_ctr", values)
    assert len(rows) == 1
    return rows[0]


def test_click_exactly_30_minutes_after_the_search_counts() -> None:
    row = ctr_row([search("s1", "u1", at(10, 10)), click("c1", "u1", at(10, 40), "s1")])
    assert (row["searches"], row["clicks"], row["ctr"]) == (1, 1, 1.0)


def test_click_30_minutes_and_1_ms_after_the_search_does_not_count() -> None:
    row = ctr_row([search("s1", "u1", at(10, 10)), click("c1", "u1", at(10, 40, 0, 1), "s1")])
    assert (row["searches"], row["clicks"], row["ctr"]) == (1, 0, 0.0)


def test_click_at_the_same_instant_as_the_search_counts() -> None:
    row = ctr_row([search("s1", "u1", at(10, 10)), click("c1", "u1", at(10, 10), "s1")])
    assert row["clicks"] == 1


def test_click_before_the_search_does_not_count() -> None:
    row = ctr_row([search("s1", "u1", at(10, 10)), click("c1", "u1", at(10, 9, 59, 999), "s1")])
    assert row["clicks"] == 0


def test_two_clicks_on_one_search_count_once() -> None:
    values = [
        search("s1", "u1", at(10, 10)),
        click("c1", "u1", at(10, 11), "s1"),
        click("c2", "u1", at(10, 12), "s1"),
    ]
    row = ctr_row(values)
    assert (row["searches"], row["clicks"], row["ctr"]) == (1, 1, 1.0)


def test_click_on_another_search_or_on_a_non_search_does_not_count() -> None:
    values = [
        search("s1", "u1", at(10, 10)),
        pv("p1", "u1", at(10, 10)),
        click("c1", "u1", at(10, 11), "s-unknown"),
        click("c2", "u1", at(10, 11), "p1"),
    ]
    assert ctr_row(values)["clicks"] == 0


def test_click_corrected_into_the_interval_counts() -> None:
    # The click's device clock is 5 min ahead: device 10:43, sent 10:43, received 10:38.
    click_value = click("c1", "u1", at(10, 43), "s1", received_ts=at(10, 38))
    assert ctr_row([search("s1", "u1", at(10, 10)), click_value])["clicks"] == 1


def test_duplicate_search_keeps_the_first_event_ts_for_the_click_interval() -> None:
    # First copy at 10:00, retry received 20 min later (event_ts 10:20). The click at 10:40
    # is 40 min after the first copy: not clicked. (Had the retry won, it would count.)
    values = [
        search("s1", "u1", at(10)),
        search("s1", "u1", at(10), received_ts=at(10, 20)),
        click("c1", "u1", at(10, 40), "s1"),
    ]
    row = ctr_row(values)
    assert (row["searches"], row["clicks"]) == (1, 0)


def test_search_ctr_per_query_and_hour_of_the_search() -> None:
    values = [
        search("s1", "u1", at(10, 10), query="shoes"),  # clicked at 10:40 (edge)
        search("s2", "u2", at(10, 20), query="shoes"),  # clicked too late and too early
        search("s3", "u3", at(10, 30), query="shoes"),  # clicked twice
        search("s4", "u1", at(10, 59, 59, 999), query="hats"),  # clicked in the next hour
        search("s5", "u2", at(11), query="hats"),  # never clicked
        click("c1", "u1", at(10, 40), "s1"),
        click("c2", "u2", at(10, 50, 0, 1), "s2"),
        click("c3", "u2", at(10, 19, 59, 999), "s2"),
        click("c4", "u3", at(10, 31), "s3"),
        click("c5", "u3", at(10, 32), "s3"),
        click("c6", "u1", at(11, 5), "s4"),
    ]
    assert view("search_ctr", values) == [
        {
            "query": "hats",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "searches": 1,
            "clicks": 1,
            "ctr": 1.0,
        },
        {
            "query": "hats",
            "window_start": utc("11:00"),
            "window_end": utc("12:00"),
            "searches": 1,
            "clicks": 0,
            "ctr": 0.0,
        },
        {
            "query": "shoes",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "searches": 3,
            "clicks": 2,
            "ctr": pytest.approx(2 / 3),
        },
    ]


# --- revenue_by_segment -----------------------------------------------------------------------


def segments_of_orders(profiles: list[ProfileChange], order_times: list[int]) -> list[str]:
    """The segment each order (one per hour, so one row each) was attributed to."""
    values = [order(f"o{i}", "u1", ts, 100) for i, ts in enumerate(order_times)]
    rows = view("revenue_by_segment", values, profiles)
    assert len(rows) == len(order_times)
    by_window = {row["window_start"]: row["segment"] for row in rows}
    return [by_window[utc(f"{ts // 3_600_000 % 24:02d}:00")] for ts in order_times]


def test_order_before_any_profile_is_unknown() -> None:
    profiles = [ProfileChange("u1", "gold", at(10))]
    assert segments_of_orders(profiles, [at(9, 59, 59, 999)]) == ["unknown"]


def test_order_of_a_user_without_profile_is_unknown() -> None:
    profiles = [ProfileChange("u2", "gold", at(8))]
    assert segments_of_orders(profiles, [at(10)]) == ["unknown"]


def test_order_takes_the_segment_as_of_its_event_time() -> None:
    profiles = [
        ProfileChange("u1", "bronze", at(8)),
        ProfileChange("u1", "gold", at(10)),
    ]
    # 09:30 -> bronze; 10:00:00.000 (the update's own instant is included) -> gold
    assert segments_of_orders(profiles, [at(9, 30), at(10), at(11, 30)]) == [
        "bronze",
        "gold",
        "gold",
    ]


def test_order_after_a_tombstone_is_unknown_until_the_next_version() -> None:
    profiles = [
        ProfileChange("u1", "gold", at(8)),
        ProfileChange("u1", None, at(10)),
        ProfileChange("u1", "silver", at(12)),
    ]
    assert segments_of_orders(profiles, [at(9), at(10, 30), at(12, 30)]) == [
        "gold",
        "unknown",
        "silver",
    ]


def test_tie_on_updated_ts_goes_to_the_later_in_log_order() -> None:
    profiles = [ProfileChange("u1", "first", at(10)), ProfileChange("u1", "second", at(10))]
    assert segments_of_orders(profiles, [at(10, 30)]) == ["second"]
    tombstone_last = [ProfileChange("u1", "gold", at(10)), ProfileChange("u1", None, at(10))]
    assert segments_of_orders(tombstone_last, [at(10, 30)]) == ["unknown"]


def test_profile_time_not_log_order_decides_which_version_is_in_force() -> None:
    # The 08:00 version arrives last in the log, but the 09:00 version is newer.
    profiles = [ProfileChange("u1", "gold", at(9)), ProfileChange("u1", "bronze", at(8))]
    assert segments_of_orders(profiles, [at(8, 30), at(10)]) == ["bronze", "gold"]


def test_profile_join_uses_the_corrected_event_time_of_the_order() -> None:
    # Device 3 min behind: device 09:58, server 10:01 -> event_ts 10:01, after the update.
    value = order("o1", "u1", at(9, 58), 250, sent_ts=at(9, 58), received_ts=at(10, 1))
    rows = view("revenue_by_segment", [value], [ProfileChange("u1", "gold", at(10))])
    assert rows == [
        {
            "segment": "gold",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "revenue_cents": 250,
        }
    ]


def test_revenue_sums_per_segment_and_hour_of_the_order() -> None:
    profiles = [
        ProfileChange("u1", "gold", at(10)),
        ProfileChange("u3", "gold", at(8)),
        ProfileChange("u1", None, at(11)),
    ]
    values = [
        order("o1", "u1", at(9), 100),  # unknown (before u1's first version)
        order("o2", "u1", at(10), 200),  # gold
        order("o3", "u1", at(10, 30), 300),  # gold
        order("o4", "u3", at(10, 45), 5),  # gold
        order("o5", "u2", at(10, 5), 1000),  # unknown (no profile)
        order("o6", "u1", at(11, 15), 400),  # unknown (tombstone)
        order("o7", "u3", at(11, 20), 0),  # gold, zero amount still makes a row
        pv("p1", "u1", at(10)),  # not an order
    ]
    assert view("revenue_by_segment", values, profiles) == [
        {
            "segment": "gold",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "revenue_cents": 505,
        },
        {
            "segment": "gold",
            "window_start": utc("11:00"),
            "window_end": utc("12:00"),
            "revenue_cents": 0,
        },
        {
            "segment": "unknown",
            "window_start": utc("09:00"),
            "window_end": utc("10:00"),
            "revenue_cents": 100,
        },
        {
            "segment": "unknown",
            "window_start": utc("10:00"),
            "window_end": utc("11:00"),
            "revenue_cents": 1000,
        },
        {
            "segment": "unknown",
            "window_start": utc("11:00"),
            "window_end": utc("12:00"),
            "revenue_cents": 400,
        },
    ]


# --- sessions ---------------------------------------------------------------------------------


def session(user_id: str, start: str, end: str, events: int) -> dict[str, Any]:
    return {
        "user_id": user_id,
        "session_start": utc(start),
        "session_end": utc(end),
        "events": events,
    }


def test_gap_of_exactly_30_minutes_continues_the_session() -> None:
    values = [pv("e1", "u1", at(10)), pv("e2", "u1", at(10, 30))]
    assert view("sessions", values) == [session("u1", "10:00", "10:30", 2)]


def test_gap_of_30_minutes_and_1_ms_starts_a_new_session() -> None:
    values = [pv("e1", "u1", at(10)), pv("e2", "u1", at(10, 30, 0, 1))]
    assert view("sessions", values) == [
        session("u1", "10:00", "10:00", 1),
        session("u1", "10:30:00.001", "10:30:00.001", 1),
    ]


def test_session_is_a_maximal_run_and_may_last_longer_than_the_gap() -> None:
    values = [pv(f"e{i}", "u1", at(10) + i * 25 * MIN) for i in range(4)]  # 10:00 .. 11:15
    assert view("sessions", values) == [session("u1", "10:00", "11:15", 4)]


def test_sessions_order_events_by_event_time_not_log_order() -> None:
    values = [
        pv("e1", "u1", at(10, 20)),
        search("e2", "u1", at(10)),
        order("e3", "u1", at(11), 1),  # 40 min after 10:20: a new session
        click("e4", "u1", at(10, 10), "e2"),
    ]
    assert view("sessions", values) == [
        session("u1", "10:00", "10:20", 3),
        session("u1", "11:00", "11:00", 1),
    ]


def test_sessions_are_per_user_and_sorted_by_user_then_start() -> None:
    values = [
        pv("e1", "u2", at(12)),
        pv("e2", "u1", at(11)),
        pv("e3", "u2", at(10)),
        pv("e4", "u1", at(10, 59, 59, 999)),  # u1 and u2 interleave but never share a session
    ]
    assert view("sessions", values) == [
        session("u1", "10:59:59.999", "11:00", 2),
        session("u2", "10:00", "10:00", 1),
        session("u2", "12:00", "12:00", 1),
    ]


# --- keep filter ------------------------------------------------------------------------------


def test_keep_filters_after_dedup_and_counts_what_it_left_out() -> None:
    def not_before_ten(event: Event) -> bool:
        return event.event_ts >= at(10)

    values = [
        pv("e1", "u1", at(9, 59)),  # first copy: left out by the filter
        pv("e1", "u1", at(9, 59), received_ts=at(10, 5)),  # later retry is still a duplicate
        pv("e2", "u2", at(10, 1)),
    ]
    result = compute_views(values, keep=not_before_ten)
    assert (result.duplicates, result.not_kept) == (1, 1)
    assert result.views["page_views"] == [
        {"page": "/home", "window_start": utc("10:01"), "window_end": utc("10:02"), "count": 1}
    ]


# --- files ------------------------------------------------------------------------------------


def test_load_jsonl_values_keeps_raw_bytes_and_skips_blank_lines(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"a": 1}\r\n\nnot json\n   \n\xff\xfe\n{"b": 2}')
    assert load_jsonl_values(path) == [b'{"a": 1}', b"not json", b"\xff\xfe", b'{"b": 2}']


def test_load_profiles_jsonl_reads_versions_and_tombstones(tmp_path: Path) -> None:
    path = tmp_path / "profiles.jsonl"
    path.write_text(
        '{"user_id": "u1", "segment": "gold", "updated_ts": 5}\n'
        "\n"
        '{"user_id": "u1", "tombstone": true, "updated_ts": 9}\n'
    )
    assert load_profiles_jsonl(path) == [
        ProfileChange("u1", "gold", 5),
        ProfileChange("u1", None, 9),
    ]


def test_load_profiles_jsonl_names_the_bad_line(tmp_path: Path) -> None:
    path = tmp_path / "profiles.jsonl"
    path.write_text('{"user_id": "u1", "segment": "gold", "updated_ts": 5}\n\n{"user_id": 1}\n')
    with pytest.raises(ValueError, match="line 3"):
        load_profiles_jsonl(path)


# --- page_views_hopping -----------------------------------------------------------------------


def test_a_page_view_is_in_the_ten_windows_that_hold_it() -> None:
    rows = view("page_views_hopping", [pv("e1", "u1", at(10, 5, 30))])
    # windows starting 09:56 ... 10:05 hold 10:05:30; 09:55's ends at 10:05:00, before it
    starts = ["09:56", "09:57", "09:58", "09:59", "10:00", "10:01", "10:02", "10:03", "10:04"]
    ends = ["10:06", "10:07", "10:08", "10:09", "10:10", "10:11", "10:12", "10:13", "10:14"]
    assert [(row["window_start"], row["window_end"]) for row in rows] == [
        *((utc(start), utc(end)) for start, end in zip(starts, ends, strict=True)),
        (utc("10:05"), utc("10:15")),
    ]
    assert {row["count"] for row in rows} == {1}


def test_hopping_windows_are_half_open_and_overlap() -> None:
    values = [
        pv("a", "u1", at(10, 0)),  # windows starting 09:51 .. 10:00
        pv("b", "u1", at(10, 9, 59, 999)),  # 10:00 .. 10:09
        pv("c", "u1", at(10, 10)),  # 10:01 .. 10:10: not in 10:00's window
        search("s", "u1", at(10, 5)),  # not a page view
    ]
    counts = {row["window_start"]: row["count"] for row in view("page_views_hopping", values)}
    assert counts[utc("09:51")] == 1
    assert counts[utc("10:00")] == 2
    assert counts[utc("10:01")] == 2
    assert counts[utc("10:09")] == 2
    assert counts[utc("10:10")] == 1
    assert len(counts) == 20  # 09:51 .. 10:10


# --- segment_totals ---------------------------------------------------------------------------


def test_segment_totals_join_each_user_with_their_last_profile_record() -> None:
    values = [
        order("o1", "u1", at(9), 100),  # before u1's profile changed: still counts as gold
        order("o2", "u1", at(11), 50),
        pv("p1", "u2", at(10)),  # no order: a user with revenue 0
        order("o3", "u3", at(10), 7),  # no profile: unknown
        order("o4", "u4", at(10), 9),  # deleted: unknown
    ]
    profiles = [
        ProfileChange("u1", "bronze", at(8)),
        ProfileChange("u2", "gold", at(8)),
        ProfileChange("u4", "gold", at(8)),
        ProfileChange("u1", "gold", at(10)),
        ProfileChange("u4", None, at(9)),
        ProfileChange("u5", "gold", at(8)),  # no event: not counted
    ]
    assert view("segment_totals", values, profiles) == [
        {"segment": "gold", "users": 2, "revenue_cents": 150},
        {"segment": "unknown", "users": 2, "revenue_cents": 16},
    ]


def test_the_last_record_in_the_log_wins_whatever_its_updated_ts() -> None:
    profiles = [ProfileChange("u1", "gold", at(12)), ProfileChange("u1", "bronze", at(8))]
    assert view("segment_totals", [order("o", "u1", at(10), 5)], profiles) == [
        {"segment": "bronze", "users": 1, "revenue_cents": 5}
    ]
