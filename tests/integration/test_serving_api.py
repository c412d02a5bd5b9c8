"""The serving API on the real Postgres of the test stack, with hand-made rows in the store.

Every test here works in a private database of the stack's Postgres (created for this module,
dropped at its end), so the aliases and streams it writes (`lambda`, `lambda-speed`,
`kappa-v1`, ...) never meet those of the pipeline tests, which use the `serving` database.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

from core.catalog import VIEWS
from core.settings import Architecture, Settings
from core.store.connection import connect
from core.store.schema import batch_table, create_all, realtime_table
from core.times import HOUR_MS, MINUTE_MS, iso, parse_iso, to_timestamp
from serving.main import create_app
from tests.conftest import ROOT, run_lk
from tests.integration.helpers import own_database

Row = dict[str, Any]

# --- a private database, and hand-made rows ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def serving_settings(stack: Settings) -> Iterator[Settings]:
    """The stack's settings, pointing at a database of this module's own."""
    with own_database(stack, "lk_serving_test") as settings:
        yield settings


def _store_tables() -> list[str]:
    tables = ["view_alias", "view_versions", "stream_progress"]
    for view in VIEWS:
        tables += [batch_table(view), realtime_table(view)]
    return tables


def _truncate(conn: psycopg.Connection) -> None:
    conn.execute(
        sql.SQL("truncate {}").format(sql.SQL(", ").join(map(sql.Identifier, _store_tables())))
    )


@pytest.fixture
def store(serving_settings: Settings) -> Iterator[psycopg.Connection]:
    """An empty store (tables created, no rows) before and after each test."""
    with connect(serving_settings) as conn:
        create_all(conn)
        _truncate(conn)
        try:
            yield conn
        finally:
            _truncate(conn)


@pytest.fixture
def client(serving_settings: Settings, store: psycopg.Connection) -> Iterator[TestClient]:
    with TestClient(create_app(serving_settings)) as test_client:
        yield test_client


def _db_row(view: str, row: Row) -> tuple[Any, ...]:
    spec = VIEWS[view]
    return tuple(
        to_timestamp(parse_iso(row[c])) if c in spec.time_fields else row[c] for c in spec.columns
    )


def _insert(
    conn: psycopg.Connection, table: str, tag: str, tag_value: Any, view: str, rows: list[Row]
) -> None:
    columns = [tag, *VIEWS[view].columns]
    statement = sql.SQL("insert into {} ({}) values ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns)),
    )
    with conn.cursor() as cur:
        cur.executemany(statement, [(tag_value, *_db_row(view, row)) for row in rows])


def insert_batch(conn: psycopg.Connection, view: str, version: int, rows: list[Row]) -> None:
    _insert(conn, batch_table(view), "version", version, view, rows)


def insert_rt(conn: psycopg.Connection, view: str, stream: str, rows: list[Row]) -> None:
    _insert(conn, realtime_table(view), "stream", stream, view, rows)


def set_alias(
    conn: psycopg.Connection, architecture: str, version: int, cutoff: str | None = None
) -> None:
    conn.execute(
        "insert into view_alias (architecture, version, cutoff) values (%s, %s, %s) "
        "on conflict (architecture) do update set version = excluded.version, "
        "cutoff = excluded.cutoff, switched_at = now()",
        (architecture, version, None if cutoff is None else to_timestamp(parse_iso(cutoff))),
    )


def set_progress(
    conn: psycopg.Connection,
    stream: str,
    *,
    watermark: str | None = None,
    late_dropped: int = 0,
    quarantined: int = 0,
) -> None:
    conn.execute(
        "insert into stream_progress (stream, last_batch_id, watermark, late_dropped, "
        "quarantined) values (%s, 7, %s, %s, %s)",
        (
            stream,
            None if watermark is None else to_timestamp(parse_iso(watermark)),
            late_dropped,
            quarantined,
        ),
    )


def at(hhmm: str) -> str:
    """ISO instant of `HH:MM` (or `HH:MM:SS.fff`) on the test day."""
    return f"2026-11-01T{hhmm if hhmm.count(':') == 2 else hhmm + ':00'}Z"


def pv(page: str, start: str, count: int) -> Row:
    begin = parse_iso(at(start))
    return {
        "page": page,
        "window_start": iso(begin),
        "window_end": iso(begin + MINUTE_MS),
        "count": count,
    }


def uu(start: str, users: int) -> Row:
    begin = parse_iso(at(start))
    return {"window_start": iso(begin), "window_end": iso(begin + HOUR_MS), "users": users}


def ctr(query: str, start: str, searches: int, clicks: int) -> Row:
    begin = parse_iso(at(start))
    return {
        "query": query,
        "window_start": iso(begin),
        "window_end": iso(begin + HOUR_MS),
        "searches": searches,
        "clicks": clicks,
        "ctr": clicks / searches,
    }


def session(user: str, start: str, end: str, events: int) -> Row:
    return {"user_id": user, "session_start": at(start), "session_end": at(end), "events": events}


def get(client: TestClient, view: str, **params: str) -> dict[str, Any]:
    response = client.get(f"/v1/views/{view}", params=params)
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    assert body["view"] == view
    return body


# --- health and refused requests --------------------------------------------------------------


def test_health_and_refusals_need_no_store(stack: Settings) -> None:
    # Postgres is nowhere: /health and the checks of a request still answer, and a request
    # that needs the store gets 503 with the reason (the lifespan is not run on purpose).
    nowhere = stack.model_copy(update={"postgres_port": _free_port()})
    test_client = TestClient(create_app(nowhere))
    assert test_client.get("/health").json() == {"status": "ok"}
    assert test_client.get("/health").status_code == 200
    assert test_client.get("/v1/views/nope").status_code == 404
    assert test_client.get("/v1/views/page_views", params={"start": "x"}).status_code == 422
    response = test_client.get("/v1/views/page_views")
    assert response.status_code == 503
    assert "serving store is unavailable" in response.json()["detail"]


def test_health_is_ok(client: TestClient) -> None:
    response = client.get("/health")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


def test_unknown_view_is_404_with_a_reason(client: TestClient) -> None:
    response = client.get("/v1/views/page_view")
    assert response.status_code == 404
    assert "unknown view 'page_view'" in response.json()["detail"]


@pytest.mark.parametrize(
    ("view", "params", "reason"),
    [
        ("page_views", {"start": "yesterday"}, "start: not an ISO 8601 UTC timestamp"),
        ("page_views", {"end": "2026-11-01T10:00:00+02:00"}, "end: not an ISO 8601 UTC"),
        ("page_views", {"start": "2026-11-01T10:00:00"}, "start: not an ISO 8601 UTC"),
        ("page_views", {"start": "2026-11-01T10:00:00.0001Z"}, "finer than a millisecond"),
        ("page_views", {"start": "2026-13-01T10:00:00Z"}, "start:"),
        (
            "page_views",
            {"start": "2026-11-01T11:00:00Z", "end": "2026-11-01T10:00:00Z"},
            "is after end",
        ),
        ("search_ctr", {"page": "/home"}, "'page' is not a key of search_ctr"),
        ("unique_users", {"user_id": "u1"}, "'user_id' is not a key of unique_users"),
        ("page_views", {"architecture": "both"}, "architecture must be one of lambda, kappa"),
        ("page_views", {"architecture": "LAMBDA"}, "architecture must be one of"),
        ("page_views", {"offset": "10"}, "unknown query parameter 'offset'"),
        ("sessions", {"user_id": ""}, "user_id must not be empty"),
        # The current state has no window to filter on.
        ("segment_totals", {"start": "2026-11-01T10:00:00Z"}, "'start' does not apply to"),
        ("segment_totals", {"end": "2026-11-01T10:00:00Z"}, "segment_totals: it has no window"),
        ("segment_totals", {"page": "/home"}, "'page' is not a key of segment_totals"),
    ],
)
def test_bad_filter_is_422_with_the_reason(
    client: TestClient, view: str, params: dict[str, str], reason: str
) -> None:
    response = client.get(f"/v1/views/{view}", params=params)
    assert response.status_code == 422, response.text
    detail = response.json()["detail"]
    assert isinstance(detail, str) and reason in detail, detail


def test_a_repeated_filter_is_422(client: TestClient) -> None:
    response = client.get("/v1/views/page_views?page=/a&page=/b")
    assert response.status_code == 422
    assert "'page' is given more than once" in response.json()["detail"]


def test_a_fresh_store_answers_empty_rows(client: TestClient) -> None:
    for view in VIEWS:
        for architecture in ("lambda", "kappa"):
            body = get(client, view, architecture=architecture)
            assert body["rows"] == []
            assert body["meta"]["architecture"] == architecture
            assert body["meta"]["view_version"] is None
            assert body["meta"]["batch_cutoff"] is None
            assert body["meta"]["speed_watermark"] is None
            assert (body["meta"]["quarantined"], body["meta"]["late_dropped"]) == (0, 0)


# --- the Lambda merge ---------------------------------------------------------------------


def test_lambda_merge_hands_off_at_the_cutoff_without_double_counting(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    insert_batch(
        store,
        "page_views",
        1,
        [pv("/a", "09:59", 1), pv("/a", "10:00", 50), pv("/a", "10:30", 51)],
    )
    insert_batch(store, "page_views", 2, [pv("/a", "09:58", 60)])  # not the alias version
    insert_rt(
        store,
        "page_views",
        "lambda-speed",
        [pv("/a", "09:58", 70), pv("/a", "09:59", 71), pv("/a", "10:00", 2), pv("/b", "11:00", 3)],
    )
    insert_rt(store, "page_views", "kappa-v1", [pv("/a", "10:01", 80)])  # another stream

    assert get(client, "page_views")["rows"] == [
        pv("/a", "09:59", 1),
        pv("/a", "10:00", 2),
        pv("/b", "11:00", 3),
    ]

    # Hourly views hand off the same way; ctr comes back as the float it is.
    insert_batch(store, "unique_users", 1, [uu("09:00", 5), uu("10:00", 99)])
    insert_rt(store, "unique_users", "lambda-speed", [uu("09:00", 77), uu("10:00", 7)])
    assert get(client, "unique_users")["rows"] == [uu("09:00", 5), uu("10:00", 7)]
    insert_batch(store, "search_ctr", 1, [ctr("shoes", "09:00", 3, 1)])
    insert_rt(store, "search_ctr", "lambda-speed", [ctr("shoes", "10:00", 7, 0)])
    rows = get(client, "search_ctr")["rows"]
    assert rows == [ctr("shoes", "09:00", 3, 1), ctr("shoes", "10:00", 7, 0)]
    assert rows[0]["ctr"] == 1 / 3 and isinstance(rows[1]["ctr"], float)
    assert list(rows[0]) == ["query", "window_start", "window_end", "searches", "clicks", "ctr"]


def hop(page: str, start: str, count: int) -> Row:
    begin = parse_iso(at(start))
    return {
        "page": page,
        "window_start": iso(begin),
        "window_end": iso(begin + 10 * MINUTE_MS),
        "count": count,
    }


def test_lambda_sums_both_sides_of_a_hopping_window_that_straddles_the_cutoff(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    # The batch counted the events before 10:00, the speed layer those from 10:00 on: the
    # windows starting 09:51 to 09:59 hold both.
    insert_batch(store, "page_views_hopping", 1, [hop("/a", "09:50", 4), hop("/a", "09:55", 3)])
    insert_rt(
        store,
        "page_views_hopping",
        "lambda-speed",
        [hop("/a", "09:50", 90), hop("/a", "09:55", 2), hop("/a", "10:00", 2)],
    )
    body = get(client, "page_views_hopping")
    assert body["rows"] == [hop("/a", "09:50", 4), hop("/a", "09:55", 5), hop("/a", "10:00", 2)]
    rows = get(client, "page_views_hopping", start=at("09:55"), limit="1")["rows"]
    assert rows == [hop("/a", "09:55", 5)]


def test_lambda_serves_the_current_state_from_the_speed_layer_alone(
    client: TestClient, store: psycopg.Connection
) -> None:
    """The speed layer merged the batch's partials per user at the hand-off: its rows are the
    whole view, and the batch's rows (as of the cutoff) are not added to them."""
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    totals = [
        {"segment": "gold", "users": 2, "revenue_cents": 150},
        {"segment": "unknown", "users": 1, "revenue_cents": 0},
    ]
    insert_batch(store, "segment_totals", 1, [{"segment": "gold", "users": 1, "revenue_cents": 99}])
    insert_rt(store, "segment_totals", "lambda-speed", totals)
    assert get(client, "segment_totals")["rows"] == totals
    assert get(client, "segment_totals", segment="gold")["rows"] == totals[:1]


def test_lambda_without_an_alias_serves_every_real_time_row_and_no_batch_row(
    client: TestClient, store: psycopg.Connection
) -> None:
    insert_batch(store, "revenue_by_segment", 1, [_rev("gold", "08:00", 1000)])
    insert_rt(
        store,
        "revenue_by_segment",
        "lambda-speed",
        [_rev("gold", "09:00", 250), _rev("unknown", "08:00", 5)],
    )
    body = get(client, "revenue_by_segment")
    assert body["rows"] == [_rev("gold", "09:00", 250), _rev("unknown", "08:00", 5)]
    assert body["meta"]["view_version"] is None and body["meta"]["batch_cutoff"] is None
    # An alias without a cutoff gives the batch nothing to cover either.
    set_alias(store, "lambda", 1, cutoff=None)
    body = get(client, "revenue_by_segment")
    assert body["rows"] == [_rev("gold", "09:00", 250), _rev("unknown", "08:00", 5)]
    assert body["meta"]["view_version"] == 1 and body["meta"]["batch_cutoff"] is None


def _rev(segment: str, start: str, cents: int) -> Row:
    begin = parse_iso(at(start))
    return {
        "segment": segment,
        "window_start": iso(begin),
        "window_end": iso(begin + HOUR_MS),
        "revenue_cents": cents,
    }


def test_lambda_sessions_drop_batch_sessions_a_real_time_session_of_the_user_covers(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    insert_batch(
        store,
        "sessions",
        1,
        [
            session("u1", "09:00", "09:50", 5),  # continued past the cutoff: covered
            session("u2", "08:00", "08:10", 2),  # not covered (another user's rt session)
            session("u3", "09:40", "09:55", 3),  # rt session starts later: not covered
            session("u5", "09:00", "09:40", 4),  # rt session ends earlier: not covered
            session("u6", "09:10", "09:20", 1),  # exactly equal bounds: covered
        ],
    )
    insert_batch(store, "sessions", 2, [session("u7", "09:00", "09:01", 2)])  # not the alias
    insert_rt(
        store,
        "sessions",
        "lambda-speed",
        [
            session("u1", "09:00", "10:40", 9),
            session("u2", "10:05", "10:06", 1),
            session("u3", "09:45", "10:30", 4),
            session("u4", "07:00", "12:00", 30),
            session("u5", "09:00", "09:30", 6),
            session("u6", "09:10", "09:20", 1),
        ],
    )
    insert_rt(store, "sessions", "kappa-v1", [session("u2", "07:00", "12:00", 40)])

    assert get(client, "sessions")["rows"] == [
        session("u1", "09:00", "10:40", 9),
        session("u2", "08:00", "08:10", 2),
        session("u2", "10:05", "10:06", 1),
        session("u3", "09:40", "09:55", 3),
        session("u3", "09:45", "10:30", 4),
        session("u4", "07:00", "12:00", 30),
        session("u5", "09:00", "09:30", 6),
        session("u5", "09:00", "09:40", 4),
        session("u6", "09:10", "09:20", 1),
    ]
    assert get(client, "sessions", user_id="u2", start=at("09:00"))["rows"] == [
        session("u2", "10:05", "10:06", 1)
    ]


# --- filters and order ---------------------------------------------------------------------


def test_filters_by_key_and_by_window_start_across_the_cutoff(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    insert_batch(
        store, "page_views", 1, [pv("/a", "09:58", 1), pv("/a", "09:59", 2), pv("/b", "09:59", 3)]
    )
    insert_rt(
        store,
        "page_views",
        "lambda-speed",
        [pv("/a", "10:00", 4), pv("/a", "10:01", 5), pv("/b", "10:00", 6)],
    )

    def rows(**params: str) -> list[Row]:
        return get(client, "page_views", **params)["rows"]

    assert rows(page="/a") == [
        pv("/a", m, n) for m, n in [("09:58", 1), ("09:59", 2), ("10:00", 4), ("10:01", 5)]
    ]
    # start <= window_start < end, across the hand-off
    assert rows(page="/a", start=at("09:59"), end=at("10:01")) == [
        pv("/a", "09:59", 2),
        pv("/a", "10:00", 4),
    ]
    assert rows(start=at("10:00")) == [
        pv("/a", "10:00", 4),
        pv("/a", "10:01", 5),
        pv("/b", "10:00", 6),
    ]
    assert rows(end="2026-11-01T09:59:00.000+00:00") == [pv("/a", "09:58", 1)]
    assert rows(start=at("09:59:00.001")) == [
        pv("/a", "10:00", 4),
        pv("/a", "10:01", 5),
        pv("/b", "10:00", 6),
    ]
    assert rows(start=at("10:00"), end=at("10:00")) == []
    assert rows(page="/nowhere") == []
    assert rows(page="/a", architecture="kappa") == []


def test_rows_are_sorted_by_key_in_code_point_order_then_window(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    pages = ["/b", "/a", "/B", "/é", "/a-", "/Z", "/ä", "/aa"]
    batch = [pv(page, start, i) for i, page in enumerate(pages) for start in ("09:30", "09:01")]
    speed = [
        pv(page, start, 100 + i) for i, page in enumerate(pages) for start in ("10:30", "10:00")
    ]
    insert_batch(store, "page_views", 1, batch)
    insert_rt(store, "page_views", "lambda-speed", speed)

    rows = get(client, "page_views")["rows"]
    expected = sorted(batch + speed, key=lambda r: (r["page"], parse_iso(r["window_start"])))
    assert rows == expected
    assert [r["page"] for r in rows[:2]] == ["/B", "/B"]  # upper case first, as Python sorts
    assert rows[-1]["page"] == "/é"


def test_timestamps_keep_their_milliseconds(client: TestClient, store: psycopg.Connection) -> None:
    # A session's bounds are event times: any millisecond, and float-unfriendly values.
    starts = ["23:59:59.999", "00:00:00.001", "12:34:56.789", "08:00:00.300"]
    rows = [session(f"u{i}", s, s, 1) for i, s in enumerate(starts)]
    insert_rt(store, "sessions", "lambda-speed", rows)
    assert get(client, "sessions")["rows"] == rows
    assert rows[1]["session_start"] == "2026-11-01T00:00:00.001Z"


# --- meta ------------------------------------------------------------------------------------


def set_batch_quarantined(conn: psycopg.Connection, version: int, quarantined: int) -> None:
    conn.execute(
        "insert into view_versions (architecture, version, status, quarantined) "
        "values ('lambda', %s, 'published', %s)",
        (version, quarantined),
    )


def test_lambda_meta(client: TestClient, store: psycopg.Connection) -> None:
    set_alias(store, "lambda", 3, cutoff=at("10:00"))
    set_batch_quarantined(store, 2, 70)  # an older version's count is not the published one's
    set_batch_quarantined(store, 3, 7)
    set_progress(store, "lambda-speed", watermark=at("10:49:59.123"), late_dropped=4, quarantined=5)
    set_progress(store, "kappa-v3", watermark=at("12:00"), late_dropped=5, quarantined=8)
    assert get(client, "unique_users")["meta"] == {
        "architecture": "lambda",
        "view_version": 3,
        "batch_cutoff": "2026-11-01T10:00:00Z",
        "speed_watermark": "2026-11-01T10:49:59.123Z",
        "quarantined": 7,  # the batch's count: the speed layer has read less of the log
        "late_dropped": 4,
        "stream": "lambda-speed",
        "next_cursor": None,
    }


def test_lambda_quarantined_is_the_speed_layers_when_it_has_read_further(
    client: TestClient, store: psycopg.Connection
) -> None:
    # Both count the log's invalid records from its start: the larger has read further.
    set_progress(store, "lambda-speed", quarantined=99)
    assert get(client, "page_views")["meta"]["quarantined"] == 99  # no batch published yet
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    set_batch_quarantined(store, 1, 40)
    assert get(client, "page_views")["meta"]["quarantined"] == 99


def test_kappa_reads_only_the_stream_of_its_alias_version(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "kappa", 2, cutoff=at("10:00"))  # a cutoff means nothing to Kappa
    set_alias(store, "lambda", 2, cutoff=at("10:00"))
    insert_batch(store, "page_views", 2, [pv("/a", "09:00", 1)])
    insert_rt(store, "page_views", "lambda-speed", [pv("/a", "10:00", 2)])
    insert_rt(store, "page_views", "kappa-v1", [pv("/a", "09:00", 11), pv("/a", "10:00", 12)])
    insert_rt(store, "page_views", "kappa-v2", [pv("/a", "09:00", 21), pv("/c", "10:00", 22)])
    insert_rt(store, "page_views", "kappa-v20", [pv("/a", "09:00", 201)])
    set_progress(store, "kappa-v2", watermark=at("10:50"), late_dropped=3, quarantined=9)
    set_progress(store, "kappa-v1", watermark=at("11:50"), late_dropped=30, quarantined=90)
    set_batch_quarantined(store, 2, 900)

    body = get(client, "page_views", architecture="kappa")
    assert body["rows"] == [pv("/a", "09:00", 21), pv("/c", "10:00", 22)]
    assert body["meta"] == {
        "architecture": "kappa",
        "view_version": 2,
        "batch_cutoff": None,
        "speed_watermark": "2026-11-01T10:50:00Z",
        "quarantined": 9,
        "late_dropped": 3,
        "stream": "kappa-v2",
        "next_cursor": None,
    }


@pytest.mark.parametrize(
    ("deployment", "expected"),
    [(Architecture.LAMBDA, "lambda"), (Architecture.KAPPA, "kappa"), (Architecture.BOTH, "lambda")],
)
def test_the_default_architecture_is_the_deployments(
    serving_settings: Settings, store: psycopg.Connection, deployment: Architecture, expected: str
) -> None:
    settings = serving_settings.model_copy(update={"architecture": deployment})
    with TestClient(create_app(settings)) as test_client:
        assert get(test_client, "page_views")["meta"]["architecture"] == expected
        other = "kappa" if expected == "lambda" else "lambda"
        assert get(test_client, "page_views", architecture=other)["meta"]["architecture"] == other


# --- alias switches -------------------------------------------------------------------------

# Two complete Lambda versions whose cutoffs differ, and one real-time stream. Each row's count
# tells where it comes from (1xxx: batch v1, 2xxx: batch v2, 3xxx: real time), so a reader that
# mixed the two versions (the batch of one with the cutoff of the other) would show a row too
# many or too few, and a wrong count.
_HOURS = ["08:00", "09:00", "10:00", "11:00"]
_LAMBDA_CUTOFFS = {1: at("10:00"), 2: at("11:00")}


def _lambda_versions(store: psycopg.Connection) -> dict[int, list[Row]]:
    for version in (1, 2):
        insert_batch(
            store,
            "page_views",
            version,
            [pv("/p", h, version * 1000 + i) for i, h in enumerate(_HOURS)],
        )
    insert_rt(
        store, "page_views", "lambda-speed", [pv("/p", h, 3000 + i) for i, h in enumerate(_HOURS)]
    )
    return {
        1: [
            pv("/p", "08:00", 1000),
            pv("/p", "09:00", 1001),
            pv("/p", "10:00", 3002),
            pv("/p", "11:00", 3003),
        ],
        2: [
            pv("/p", "08:00", 2000),
            pv("/p", "09:00", 2001),
            pv("/p", "10:00", 2002),
            pv("/p", "11:00", 3003),
        ],
    }


def _kappa_versions(store: psycopg.Connection) -> dict[int, list[Row]]:
    answers = {
        1: [pv("/p", h, 1000 + i) for i, h in enumerate(_HOURS)],
        2: [pv("/p", h, 2000 + i) for i, h in enumerate(_HOURS[1:])] + [pv("/q", "08:00", 2100)],
    }
    for version, rows in answers.items():
        insert_rt(store, "page_views", f"kappa-v{version}", rows)
    return answers


def _switch(conn: psycopg.Connection, architecture: str, version: int) -> None:
    cutoff = _LAMBDA_CUTOFFS[version] if architecture == "lambda" else None
    with conn.transaction():
        set_alias(conn, architecture, version, cutoff)


@pytest.mark.parametrize("architecture", ["lambda", "kappa"])
def test_an_alias_switch_changes_the_whole_answer_between_two_requests(
    client: TestClient, store: psycopg.Connection, architecture: str
) -> None:
    versions = _lambda_versions(store) if architecture == "lambda" else _kappa_versions(store)
    for version in (1, 2, 1):
        _switch(store, architecture, version)
        body = get(client, "page_views", architecture=architecture)
        assert body["rows"] == versions[version]
        assert body["meta"]["view_version"] == version
        if architecture == "lambda":
            assert body["meta"]["batch_cutoff"] == _LAMBDA_CUTOFFS[version]


@pytest.mark.parametrize("architecture", ["lambda", "kappa"])
def test_a_reader_racing_alias_switches_sees_one_whole_version_each_time(
    client: TestClient,
    store: psycopg.Connection,
    serving_settings: Settings,
    architecture: str,
) -> None:
    versions = _lambda_versions(store) if architecture == "lambda" else _kappa_versions(store)
    _switch(store, architecture, 1)
    stop = threading.Event()
    switches = 0

    def switcher() -> None:
        nonlocal switches
        with connect(serving_settings) as conn:
            while not stop.is_set():
                _switch(conn, architecture, 2 if switches % 2 == 0 else 1)
                switches += 1

    thread = threading.Thread(target=switcher, daemon=True)
    thread.start()
    seen: dict[int, int] = {1: 0, 2: 0}
    try:
        deadline = time.monotonic() + 60
        while (min(seen.values()) < 20 or sum(seen.values()) < 100) and time.monotonic() < deadline:
            body = get(client, "page_views", architecture=architecture)
            version = body["meta"]["view_version"]
            assert body["rows"] == versions[version], (version, body["rows"])
            if architecture == "lambda":
                assert body["meta"]["batch_cutoff"] == _LAMBDA_CUTOFFS[version]
            seen[version] += 1
    finally:
        stop.set()
        thread.join(timeout=30)
    assert min(seen.values()) >= 20, seen  # both versions were really read, many times
    assert switches >= 40, switches  # and the alias really moved back and forth meanwhile


# --- `lk serve` -----------------------------------------------------------------------------


def test_lk_serve_help() -> None:
    result = run_lk("serve", "--help")
    assert result.returncode == 0, result.stderr
    assert "--architecture [lambda|kappa|both]" in result.stdout
    assert "--port" in result.stdout and "--host" in result.stdout


def test_lk_serve_runs_the_api_until_stopped_by_pid(
    stack_env: dict[str, str],
    serving_settings: Settings,
    store: psycopg.Connection,
    tmp_path: Path,
) -> None:
    set_alias(store, "kappa", 1)
    insert_rt(store, "page_views", "kappa-v1", [pv("/a", "09:00", 4), pv("/b", "09:00", 5)])
    port = _free_port()
    env = {**os.environ, **stack_env, "LK_POSTGRES_DB": serving_settings.postgres_db}
    log = tmp_path / "serve.log"
    lk = Path(sys.executable).with_name("lk")
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(lk), "serve", "--architecture", "kappa", "--port", str(port)],
            cwd=ROOT,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            try:
                health = httpx.get(f"{base}/health", timeout=2)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        assert health.status_code == 200 and health.json() == {"status": "ok"}
        body = httpx.get(f"{base}/v1/views/page_views", params={"page": "/b"}, timeout=10).json()
        assert body["rows"] == [pv("/b", "09:00", 5)]
        assert body["meta"]["architecture"] == "kappa" and body["meta"]["view_version"] == 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
            raise
    assert code == 0, log.read_text()
    assert f"on http://127.0.0.1:{port}" in log.read_text()
    assert "serving stopped (SIGTERM)" in log.read_text()


def test_lk_serve_workers_share_the_port_and_sum_their_metrics(
    stack_env: dict[str, str],
    serving_settings: Settings,
    store: psycopg.Connection,
    tmp_path: Path,
) -> None:
    set_alias(store, "kappa", 1)
    insert_rt(store, "page_views", "kappa-v1", [pv("/a", "09:00", 4)])
    port = _free_port()
    env = {**os.environ, **stack_env, "LK_POSTGRES_DB": serving_settings.postgres_db}
    log = tmp_path / "serve.log"
    lk = Path(sys.executable).with_name("lk")
    command = [str(lk), "serve", "--architecture", "kappa", "--port", str(port), "--workers", "2"]
    with log.open("w") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 90
        while True:  # both workers up: each opened its pool (2 connections at least)
            assert server.poll() is None, log.read_text()
            try:
                values = _samples(httpx.get(f"{base}/metrics", timeout=2).text)
                if values.get(("lk_serving_pool_connections", _labels({"state": "max"}))) == 16:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.3)
        with httpx.Client(base_url=base, timeout=10) as http:
            for _ in range(40):  # new connections: the kernel spreads them over the workers
                body = http.get("/v1/views/page_views", headers={"Connection": "close"}).json()
                assert body["rows"] == [pv("/a", "09:00", 4)]
            values = _samples(http.get("/metrics").text)
        labels = _labels({"architecture": "kappa", "code": "200", "view": "page_views"})
        assert values[("lk_serving_request_duration_seconds_count", labels)] == 40
        assert values[("lk_serving_view_version", _labels({"architecture": "kappa"}))] == 1
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            code = server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)
            raise
    assert code == 0, log.read_text()
    text = log.read_text()
    assert "with 2 workers" in text and "serving stopped (SIGTERM)" in text


def test_lk_serve_fails_in_one_line_without_a_store(stack_env: dict[str, str]) -> None:
    env = {**stack_env, "LK_POSTGRES_PORT": str(_free_port())}
    result = run_lk("serve", "--port", str(_free_port()), env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith("lk: error: cannot reach the serving store")
    assert len(result.stderr.strip().splitlines()) == 1


def test_lk_serve_fails_in_one_line_on_a_busy_port(
    stack_env: dict[str, str], serving_settings: Settings
) -> None:
    env = {**stack_env, "LK_POSTGRES_DB": serving_settings.postgres_db}
    with socket.socket() as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        port = squatter.getsockname()[1]
        result = run_lk("serve", "--port", str(port), env=env, timeout=60)
    assert result.returncode == 1
    assert result.stderr.startswith(f"lk: error: cannot listen on 127.0.0.1:{port}")
    assert len(result.stderr.strip().splitlines()) == 1


# --- pages ----------------------------------------------------------------------------------


def walk(client: TestClient, view: str, limit: int, **params: str) -> list[dict[str, Any]]:
    """Every page of a view, following `meta.next_cursor` until it is null."""
    bodies = [get(client, view, limit=str(limit), **params)]
    while (cursor := bodies[-1]["meta"]["next_cursor"]) is not None:
        assert isinstance(cursor, str) and cursor
        bodies.append(get(client, view, limit=str(limit), cursor=cursor, **params))
        assert len(bodies) < 1000, "the pages never end"
    return bodies


def _many_pages(store: psycopg.Connection) -> None:
    """Lambda (batch v1 before 10:00, speed after) and Kappa v1 rows whose keys sort differently
    in code-point order than in most collations, and sessions of a user that start together."""
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    set_alias(store, "kappa", 1)
    pages = ["/b", "/a", "/B", "/é", "/a-", "/Z", "/ä", "/aa", "/a a"]
    minutes = ["09:57", "09:58", "09:59", "10:00", "10:01"]
    rows = [pv(page, m, 10 * i + j) for i, page in enumerate(pages) for j, m in enumerate(minutes)]
    insert_batch(store, "page_views", 1, [r for r in rows if r["window_start"] < at("10:00")])
    insert_rt(
        store, "page_views", "lambda-speed", [r for r in rows if r["window_start"] >= at("10:00")]
    )
    insert_rt(store, "page_views", "kappa-v1", rows)
    sessions = [
        session(user, start, end, n)
        for n, (user, start, end) in enumerate(
            [
                ("u1", "09:00", "09:10"),
                ("u1", "09:00", "09:40"),
                ("U1", "08:00", "08:05"),
                ("u2", "07:00", "07:01"),
                ("ü", "06:00", "06:30"),
                ("u1", "11:00", "11:00"),
            ],
            start=1,
        )
    ]
    insert_batch(store, "sessions", 1, sessions[1:2])  # u1 09:00-09:40, not covered
    insert_rt(store, "sessions", "lambda-speed", sessions[:1] + sessions[2:])
    insert_rt(store, "sessions", "kappa-v1", sessions[1:])  # one start per user and stream


@pytest.mark.parametrize("architecture", ["lambda", "kappa"])
@pytest.mark.parametrize("view", ["page_views", "sessions"])
@pytest.mark.parametrize("limit", [1, 2, 7, 1000])
def test_pages_walk_a_whole_view_and_equal_the_unpaginated_answer(
    client: TestClient,
    store: psycopg.Connection,
    serving_settings: Settings,
    architecture: str,
    view: str,
    limit: int,
) -> None:
    _many_pages(store)
    # The unpaginated answer: the whole view in one read (what the quality checks read).
    from serving.filters import parse_view_query
    from serving.repository import read_view

    whole, meta = read_view(store, parse_view_query(view, [], architecture))  # type: ignore[arg-type]
    assert len(whole) > 2 * 2

    bodies = walk(client, view, limit, architecture=architecture)
    assert [row for body in bodies for row in body["rows"]] == whole
    assert all(len(body["rows"]) == limit for body in bodies[:-1])
    assert 1 <= len(bodies[-1]["rows"]) <= limit
    assert len(bodies) == -(-len(whole) // limit)  # no empty last page
    for body in bodies:  # every page carries the same meta but for its cursor
        assert {**body["meta"], "next_cursor": None} == meta.model_dump()
    # Filters apply to every page.
    key, value = ("page", "/a") if view == "page_views" else ("user_id", "u1")
    filtered = [row for row in whole if row[key] == value]
    paged = walk(client, view, 1, architecture=architecture, **{key: value})
    assert [row for body in paged for row in body["rows"]] == filtered


def test_a_view_smaller_than_the_limit_answers_in_one_page(
    client: TestClient, store: psycopg.Connection
) -> None:
    _many_pages(store)
    body = get(client, "page_views")
    assert len(body["rows"]) == 45 and body["meta"]["next_cursor"] is None
    assert get(client, "page_views", limit="45")["meta"]["next_cursor"] is None
    assert get(client, "page_views", limit="44")["meta"]["next_cursor"] is not None


def test_the_default_limit_and_the_maximum_come_from_the_settings(
    serving_settings: Settings, store: psycopg.Connection
) -> None:
    _many_pages(store)
    settings = serving_settings.model_copy(
        update={"serve_page_limit": 10, "serve_page_limit_max": 20}
    )
    with TestClient(create_app(settings)) as test_client:
        body = get(test_client, "page_views")
        assert len(body["rows"]) == 10 and body["meta"]["next_cursor"] is not None
        assert len(get(test_client, "page_views", limit="20")["rows"]) == 20
        response = test_client.get("/v1/views/page_views", params={"limit": "21"})
        assert response.status_code == 422
        assert "limit must be a whole number from 1 to 20" in response.json()["detail"]


@pytest.mark.parametrize(
    ("params", "reason"),
    [
        ({"limit": "0"}, "limit must be a whole number from 1 to 10,000, not '0'"),
        ({"limit": "10001"}, "limit must be a whole number from 1 to 10,000"),
        ({"limit": "-1"}, "limit must be a whole number"),
        ({"limit": "ten"}, "limit must be a whole number"),
        ({"limit": "1.5"}, "limit must be a whole number"),
        ({"cursor": "not-a-cursor"}, "cursor: not a cursor this API issued"),
        ({"cursor": "WzEsbnVsbF0"}, "cursor: not a cursor this API issued"),  # [1,null]
    ],
)
def test_a_bad_limit_or_cursor_is_422_with_the_reason(
    client: TestClient, params: dict[str, str], reason: str
) -> None:
    response = client.get("/v1/views/page_views", params=params)
    assert response.status_code == 422, response.text
    assert reason in response.json()["detail"]


def test_a_cursor_of_another_query_is_422(client: TestClient, store: psycopg.Connection) -> None:
    _many_pages(store)
    cursor = get(client, "page_views", limit="2")["meta"]["next_cursor"]
    for view, params in [
        ("page_views", {"page": "/a"}),
        ("page_views", {"architecture": "kappa"}),
        ("page_views", {"start": at("09:00")}),
        ("sessions", {}),
    ]:
        response = client.get(f"/v1/views/{view}", params={**params, "cursor": cursor})
        assert response.status_code == 422, (view, params, response.text)
        assert "cursor: it belongs to another query" in response.json()["detail"]
    # The same query with another limit is the same query.
    assert get(client, "page_views", limit="5", cursor=cursor)["rows"]


@pytest.mark.parametrize("architecture", ["lambda", "kappa"])
def test_a_cursor_taken_before_an_alias_switch_gets_409(
    client: TestClient, store: psycopg.Connection, architecture: str
) -> None:
    versions = _lambda_versions(store) if architecture == "lambda" else _kappa_versions(store)
    _switch(store, architecture, 1)
    first = get(client, "page_views", architecture=architecture, limit="2")
    assert first["rows"] == versions[1][:2]
    cursor = first["meta"]["next_cursor"]
    assert (
        get(client, "page_views", architecture=architecture, limit="2", cursor=cursor)["rows"]
        == versions[1][2:4]
    )

    _switch(store, architecture, 2)
    response = client.get(
        "/v1/views/page_views", params={"architecture": architecture, "cursor": cursor}
    )
    assert response.status_code == 409, response.text
    detail = response.json()["detail"]
    assert "moved from version 1 to 2" in detail and "start again without a cursor" in detail
    assert "etag" not in response.headers

    # Back to version 1: still another switch, the cursor's pages could have changed meanwhile.
    _switch(store, architecture, 1)
    response = client.get(
        "/v1/views/page_views", params={"architecture": architecture, "cursor": cursor}
    )
    assert response.status_code == 409, response.text
    assert "moved again, to version 1" in response.json()["detail"]

    # A fresh walk reads the version now served, whole.
    bodies = walk(client, "page_views", 2, architecture=architecture)
    assert [row for body in bodies for row in body["rows"]] == versions[1]


def test_a_cursor_from_before_a_first_publication_gets_409(
    client: TestClient, store: psycopg.Connection
) -> None:
    # Lambda before its first batch serves the speed layer's rows alone; the first alias is a
    # switch too.
    insert_rt(store, "page_views", "lambda-speed", [pv("/a", m, 1) for m in ("10:00", "10:01")])
    cursor = get(client, "page_views", limit="1")["meta"]["next_cursor"]
    assert cursor is not None
    set_alias(store, "lambda", 1, cutoff=at("09:00"))
    response = client.get("/v1/views/page_views", params={"limit": "1", "cursor": cursor})
    assert response.status_code == 409
    assert "moved from version None to 1" in response.json()["detail"]


# --- version tags (ETag) and revalidation ---------------------------------------------------


def _commit(
    conn: psycopg.Connection, stream: str, batch_id: int, rows: list[Row], **progress: Any
) -> None:
    """What a stream's micro-batch does: its changed rows and its progress, one transaction."""
    from core.store import realtime

    upsert = realtime.Upsert("page_views", rows=[_db_row("page_views", r) for r in rows])
    state = realtime.StreamProgress(stream, **progress)
    assert realtime.commit_batch(conn, state, batch_id, [upsert])


def _tag(client: TestClient, architecture: str = "lambda", **params: str) -> str:
    response = client.get("/v1/views/page_views", params={"architecture": architecture, **params})
    assert response.status_code == 200, response.text
    assert response.headers["cache-control"] == "no-cache"
    tag = response.headers["etag"]
    assert tag.startswith('"') and tag.endswith('"') and len(tag) > 10
    return tag


def test_an_etag_changes_exactly_when_the_answer_can_change(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    set_alias(store, "kappa", 1)
    insert_batch(store, "page_views", 1, [pv("/a", "09:00", 1)])
    _commit(store, "lambda-speed", 0, [pv("/a", "10:00", 2)], watermark_ms=parse_iso(at("10:05")))
    _commit(store, "kappa-v1", 0, [pv("/a", "09:00", 3)])
    set_batch_quarantined(store, 1, 5)

    lambda_tag, kappa_tag = _tag(client), _tag(client, "kappa")
    # Nothing moved: the same tags, however often asked.
    assert _tag(client) == lambda_tag and _tag(client, "kappa") == kappa_tag
    # Another query of the same state has a tag of its own.
    assert _tag(client, page="/a") != lambda_tag
    assert _tag(client, limit="1") != lambda_tag

    # A micro-batch of the speed layer: Lambda's answer can change, Kappa's cannot.
    _commit(store, "lambda-speed", 1, [pv("/a", "10:00", 4)], watermark_ms=parse_iso(at("10:06")))
    assert _tag(client) != lambda_tag
    assert _tag(client, "kappa") == kappa_tag
    lambda_tag = _tag(client)
    # Even a micro-batch that changed no row moves the stream's progress (watermark, counts).
    _commit(store, "lambda-speed", 2, [], watermark_ms=parse_iso(at("10:06")))
    assert _tag(client) != lambda_tag
    lambda_tag = _tag(client)

    # The published batch's quarantine count is in Lambda's meta.
    store.execute(
        "update view_versions set quarantined = 6 where architecture = 'lambda' and version = 1"
    )
    assert _tag(client) != lambda_tag
    lambda_tag = _tag(client)

    # Kappa's micro-batch moves Kappa's tag only; a stream no alias names moves none.
    _commit(store, "kappa-v1", 1, [pv("/a", "09:00", 5)])
    assert _tag(client, "kappa") != kappa_tag and _tag(client) == lambda_tag
    kappa_tag = _tag(client, "kappa")
    _commit(store, "kappa-v2", 0, [pv("/a", "09:00", 6)])
    assert _tag(client, "kappa") == kappa_tag and _tag(client) == lambda_tag

    # An alias switch (a hand-off, a reprocess) moves the tag, even back to a version.
    set_alias(store, "kappa", 2)
    assert _tag(client, "kappa") != kappa_tag
    set_alias(store, "kappa", 1)
    assert _tag(client, "kappa") != kappa_tag
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    assert _tag(client) != lambda_tag


def test_if_none_match_gets_304_without_rows(client: TestClient, store: psycopg.Connection) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    insert_batch(store, "page_views", 1, [pv("/a", "09:00", 1)])
    _commit(store, "lambda-speed", 0, [pv("/a", "10:00", 2)])
    first = client.get("/v1/views/page_views")
    tag = first.headers["etag"]
    for header in [tag, f"W/{tag}", f'"other", {tag}', "*"]:
        response = client.get("/v1/views/page_views", headers={"If-None-Match": header})
        assert response.status_code == 304, header
        assert response.content == b""
        assert response.headers["etag"] == tag
        assert response.headers["cache-control"] == "no-cache"
    # A tag of another state is answered in full, with the current tag.
    response = client.get("/v1/views/page_views", headers={"If-None-Match": '"other"'})
    assert response.status_code == 200 and response.json() == first.json()
    _commit(store, "lambda-speed", 1, [pv("/a", "10:00", 3)])
    response = client.get("/v1/views/page_views", headers={"If-None-Match": tag})
    assert response.status_code == 200 and response.headers["etag"] != tag
    assert response.json()["rows"] == [pv("/a", "09:00", 1), pv("/a", "10:00", 3)]
    # A 304 answers before a cursor is checked: a cursor's answer cannot have changed either.
    cursor = get(client, "page_views", limit="1")["meta"]["next_cursor"]
    page = client.get("/v1/views/page_views", params={"limit": "1", "cursor": cursor})
    again = client.get(
        "/v1/views/page_views",
        params={"limit": "1", "cursor": cursor},
        headers={"If-None-Match": page.headers["etag"]},
    )
    assert again.status_code == 304


def test_an_answer_asked_again_is_sent_unread_until_the_state_moves(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 1, cutoff=at("10:00"))
    insert_batch(store, "page_views", 1, [pv("/a", "09:00", 1)])
    _commit(store, "lambda-speed", 0, [pv("/a", "10:00", 2)])
    first = client.get("/v1/views/page_views")
    again = client.get("/v1/views/page_views")
    assert (again.content, again.headers["etag"]) == (first.content, first.headers["etag"])
    # Another page of the same state is a query of its own, read from the store.
    assert get(client, "page_views", limit="1")["rows"] == [pv("/a", "09:00", 1)]
    _commit(store, "lambda-speed", 1, [pv("/a", "10:00", 3)])
    moved = client.get("/v1/views/page_views")
    assert moved.headers["etag"] != first.headers["etag"]
    assert moved.json()["rows"] == [pv("/a", "09:00", 1), pv("/a", "10:00", 3)]
    assert _answers(_samples(client.get("/metrics").text)) == {"store": 3, "cache": 1}


def _answers(values: dict[tuple[str, frozenset[tuple[str, str]]], float]) -> dict[str, float]:
    """Answers with rows by where their body came from (`lk_serving_answers_total`)."""
    return {
        source: values[("lk_serving_answers_total", _labels({"source": source}))]
        for source in ("store", "cache")
    }


# --- metrics --------------------------------------------------------------------------------


def test_metrics_show_latency_per_view_pool_use_and_the_stream_progress_read(
    client: TestClient, store: psycopg.Connection
) -> None:
    set_alias(store, "lambda", 3, cutoff=at("10:00"))
    _commit(
        store,
        "lambda-speed",
        41,
        [pv("/a", "10:00", 2)],
        watermark_ms=parse_iso(at("10:05")),
        late_dropped=4,
    )
    set_batch_quarantined(store, 3, 7)
    get(client, "page_views")
    get(client, "sessions")
    tag = client.get("/v1/views/page_views").headers["etag"]
    assert client.get("/v1/views/page_views", headers={"If-None-Match": tag}).status_code == 304
    client.get("/v1/views/page_views", params={"limit": "0"})  # 422: refused before reading

    response = client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain")
    values = _samples(response.text)

    def count(code: int, view: str) -> float:
        labels = {"architecture": "lambda", "code": str(code), "view": view}
        return values[("lk_serving_request_duration_seconds_count", _labels(labels))]

    assert (count(200, "page_views"), count(200, "sessions"), count(304, "page_views")) == (2, 1, 1)
    # The second page_views was the first's body, sent again unread (the state had not moved).
    assert _answers(values) == {"store": 2, "cache": 1}
    buckets = {
        labels["le"]
        for (name, labels_) in values
        if name == "lk_serving_request_duration_seconds_bucket"
        for labels in [dict(labels_)]
    }
    assert {"0.005", "0.01", "0.05"} <= buckets
    assert values[("lk_serving_pool_connections", _labels({"state": "max"}))] == 8
    assert values[("lk_serving_pool_connections", _labels({"state": "open"}))] >= 1
    assert values[("lk_serving_pool_requests_waiting", _labels({}))] == 0
    lam = _labels({"architecture": "lambda"})
    assert values[("lk_serving_view_version", lam)] == 3
    assert values[("lk_serving_batch_cutoff_seconds", lam)] == parse_iso(at("10:00")) / 1000
    assert values[("lk_serving_stream_last_batch_id", lam)] == 41
    assert values[("lk_serving_stream_watermark_seconds", lam)] == parse_iso(at("10:05")) / 1000
    assert values[("lk_serving_stream_late_dropped", lam)] == 4
    assert values[("lk_serving_quarantined", lam)] == 7
    assert abs(values[("lk_serving_stream_committed_seconds", lam)] - time.time()) < 600


def _labels(labels: dict[str, str]) -> frozenset[tuple[str, str]]:
    return frozenset(labels.items())


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, _labels(sample.labels)): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def test_a_503_does_not_tell_where_the_store_is(stack: Settings) -> None:
    port = _free_port()
    nowhere = stack.model_copy(update={"postgres_port": port})
    response = TestClient(create_app(nowhere)).get("/v1/views/page_views")
    assert response.status_code == 503
    detail = response.json()["detail"]
    assert detail.startswith("the serving store is unavailable: ")
    assert str(port) not in detail and (nowhere.postgres_host or nowhere.host) not in detail


def test_replaced_rows_are_stored_exactly_as_held(store: psycopg.Connection) -> None:
    """A micro-batch hands its replaced rows over as Arrow, written as one CSV block: what is
    stored must be the rows' own values, odd user ids and the digits of a ratio included."""
    import pyarrow as pa

    from core.store import realtime
    from core.views.query import store_rows, store_table

    users = ["u1", 'a,"b', "é\nx", "back\\slash", " "]
    start = parse_iso(at("10:00"))
    sessions = pa.table(
        {
            "user_id": users,
            "session_start": [start + i * MINUTE_MS + i for i in range(len(users))],
            "session_end": [start + (i + 5) * MINUTE_MS for i in range(len(users))],
            "events": list(range(1, len(users) + 1)),
        }
    )
    clicks, searches = [1, 1, 2, 3], [3, 10, 7, 3]
    ctr = pa.table(
        {
            "query": ["shoes", "a,b", 'say "hi"', ""],
            "window_start": [start] * 4,
            "window_end": [start + 60 * MINUTE_MS] * 4,
            "searches": searches,
            "clicks": clicks,
            "ctr": [c / n for c, n in zip(clicks, searches, strict=True)],  # 1/3, 0.1, 2/7, 1.0
        }
    )
    stream = "exact"
    changes = [
        realtime.Replacement("sessions", store_table(sessions, VIEWS["sessions"]), users=users),
        realtime.Replacement("search_ctr", store_table(ctr, VIEWS["search_ctr"])),
    ]
    assert realtime.commit_batch(store, realtime.StreamProgress(stream), 0, changes)

    for view, held in (("sessions", sessions), ("search_ctr", ctr)):
        spec = VIEWS[view]
        stored = store.execute(
            f"select {', '.join(spec.columns)} from {realtime_table(view)} where stream = %s",
            (stream,),
        ).fetchall()
        assert sorted(stored) == sorted(store_rows(held, spec)), view
