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
import uuid
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
from core.store.streams import to_timestamp
from core.timefmt import HOUR_MS, MINUTE_MS, iso, parse_iso
from serving.main import create_app
from tests.conftest import ROOT, run_lk

Row = dict[str, Any]

# --- a private database, and hand-made rows ---------------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def serving_settings(stack: Settings) -> Iterator[Settings]:
    """The stack's settings, pointing at a database of this module's own."""
    name = f"lk_serving_test_{uuid.uuid4().hex[:8]}"
    admin = stack.model_copy(update={"postgres_db": "postgres"})
    with connect(admin) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        yield stack.model_copy(update={"postgres_db": name})
    finally:
        with connect(admin) as conn:
            conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


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


def test_lambda_meta(client: TestClient, store: psycopg.Connection) -> None:
    set_alias(store, "lambda", 3, cutoff=at("10:00"))
    set_progress(
        store, "lambda-speed", watermark=at("10:49:59.123"), late_dropped=4, quarantined=99
    )
    set_progress(store, "lambda-archiver", watermark=at("11:00"), late_dropped=1, quarantined=7)
    set_progress(store, "kappa-v3", watermark=at("12:00"), late_dropped=5, quarantined=8)
    assert get(client, "unique_users")["meta"] == {
        "architecture": "lambda",
        "view_version": 3,
        "batch_cutoff": "2026-11-01T10:00:00Z",
        "speed_watermark": "2026-11-01T10:49:59.123Z",
        "quarantined": 7,
        "late_dropped": 4,
        "stream": "lambda-speed",
        "next_cursor": None,
    }


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
    set_progress(store, "lambda-archiver", quarantined=900)

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
