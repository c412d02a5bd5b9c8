"""The serving API against its own OpenAPI, fuzzed by schemathesis (issue 15, item 6).

Schemathesis reads `/openapi.json` from the real app (in-process, over ASGI, its lifespan run:
the reader pool on the stack's Postgres) and generates requests for every operation, valid and
invalid. Every answer must be no 5xx, and conform to the schema: a declared status code, its
declared media type and headers, and a body matching its declared schema.

The store holds rows for every view (Lambda: a published batch version and the speed layer's
rows after its cutoff; Kappa: its stream), so generated requests read real pages. Each 200
from a view is followed by its next page (`meta.next_cursor`) and by its revalidation (its
`ETag` as `If-None-Match`: 304), both checked the same way; a cursor taken before an alias
switch (409) and a store that cannot be reached (503) are checked by explicit cases.

The store is a database of this module's own in the stack's Postgres (created here, dropped
at the end), so nothing here meets the pipeline tests' `serving` database.
"""

from __future__ import annotations

import base64
import json
import socket
from collections.abc import Iterator
from dataclasses import asdict
from typing import Any

import psycopg
import pytest
import schemathesis
from fastapi import FastAPI
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from psycopg import sql
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from comparison.verdict import verdict
from core.catalog import VIEWS
from core.settings import Settings
from core.store import comparison_reports, quality_results
from core.store.connection import connect
from core.store.schema import batch_table, create_all, realtime_table, sort_columns
from core.times import HOUR_MS, MINUTE_MS, iso, parse_iso, to_timestamp
from quality.result import QualityResult
from serving.main import create_app
from tests.integration.helpers import own_database
from tests.unit.test_comparison_report import synthetic_run

CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
]

# Short and repeatable: a fixed derandomized search, and no example database in the work tree.
FUZZ = settings(
    max_examples=200,
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)

VIEW_PATH = "/v1/views/{view}"
VERDICT = [asdict(row) for row in verdict(synthetic_run())]
CUTOFF = "2026-11-01T10:00:00Z"


# --- a private store with rows in every view -----------------------------------------------------


def _db_row(view: str, row: dict[str, Any]) -> tuple[Any, ...]:
    spec = VIEWS[view]
    return tuple(
        to_timestamp(parse_iso(row[c])) if c in spec.time_fields else row[c] for c in spec.columns
    )


def _insert(
    conn: psycopg.Connection, table: str, tag: tuple[str, Any], view: str, rows: list[Any]
) -> None:
    columns = [tag[0], *VIEWS[view].columns]
    statement = sql.SQL("insert into {} ({}) values ({})").format(
        sql.Identifier(table),
        sql.SQL(", ").join(map(sql.Identifier, columns)),
        sql.SQL(", ").join(sql.Placeholder() * len(columns)),
    )
    with conn.cursor() as cur:
        cur.executemany(statement, [(tag[1], *_db_row(view, row)) for row in rows])


def _window(begin_ms: int, size_ms: int) -> dict[str, str]:
    return {"window_start": iso(begin_ms), "window_end": iso(begin_ms + size_ms)}


def _view_rows(view: str) -> list[dict[str, Any]]:
    """A few hours of rows on each side of the cutoff, several keys each."""
    base = parse_iso("2026-11-01T08:00:00Z")
    rows: list[dict[str, Any]] = []
    for hour in range(4):
        begin = base + hour * HOUR_MS
        if view == "page_views":
            for page in ("/", "/a", "/B", "/é"):
                for minute in (0, 1, 59):
                    start = begin + minute * MINUTE_MS
                    rows.append({"page": page, **_window(start, MINUTE_MS), "count": hour + 1})
        elif view == "unique_users":
            rows.append({**_window(begin, HOUR_MS), "users": 10 + hour})
        elif view == "search_ctr":
            for query, clicks in (("shoes", 1), ("hats", 0), ("Ünïcode", 3)):
                rows.append(
                    {
                        "query": query,
                        **_window(begin, HOUR_MS),
                        "searches": 4,
                        "clicks": clicks,
                        "ctr": clicks / 4,
                    }
                )
        elif view == "search_conversions":
            for query, clicked, converted in (("shoes", 2, 1), ("hats", 0, 0), ("Ünïcode", 4, 3)):
                rows.append(
                    {
                        "query": query,
                        **_window(begin, HOUR_MS),
                        "searches": 4,
                        "clicked": clicked,
                        "converted": converted,
                        "conversion_rate": converted / 4,
                    }
                )
        elif view == "revenue_by_segment":
            for segment in ("gold", "silver", "none"):
                rows.append({"segment": segment, **_window(begin, HOUR_MS), "revenue_cents": 999})
        elif view == "page_views_hopping":
            for page in ("/", "/é"):
                for minute in (0, 1, 55):
                    start = begin + minute * MINUTE_MS
                    rows.append({"page": page, **_window(start, 10 * MINUTE_MS), "count": 2})
        elif view == "segment_totals":
            if hour == 0:  # no window: one row per segment
                for segment in ("gold", "silver", "unknown"):
                    rows.append({"segment": segment, "users": 3, "revenue_cents": 1234})
        else:
            for user in ("u1", "u2", "U1"):
                start = begin + 5 * MINUTE_MS
                rows.append(
                    {
                        "user_id": user,
                        "session_start": iso(start),
                        "session_end": iso(start + 20 * MINUTE_MS + 1),
                        "events": 3,
                    }
                )
    return rows


def _set_alias(
    conn: psycopg.Connection, architecture: str, version: int, cutoff: str | None
) -> None:
    conn.execute(
        "insert into view_alias (architecture, version, cutoff) values (%s, %s, %s) "
        "on conflict (architecture) do update set version = excluded.version, "
        "cutoff = excluded.cutoff, switched_at = clock_timestamp()",
        (architecture, version, None if cutoff is None else to_timestamp(parse_iso(cutoff))),
    )


def _seed(conn: psycopg.Connection) -> None:
    """Lambda v1 (batch before the cutoff, speed after) and Kappa v1 and v2, their progress,
    the quality suites' last results and a comparison report's address and verdict."""
    cutoff = parse_iso(CUTOFF)
    for view, spec in VIEWS.items():
        rows = _view_rows(view)
        if spec.current_state:  # the speed layer's rows are the whole view
            before, after = [], rows
        else:
            before = [r for r in rows if parse_iso(r[spec.time_fields[0]]) < cutoff]
            after = [r for r in rows if parse_iso(r[spec.time_fields[0]]) >= cutoff]
        _insert(conn, batch_table(view), ("version", 1), view, before)
        _insert(conn, realtime_table(view), ("stream", "lambda-speed"), view, after)
        for stream in ("kappa-v1", "kappa-v2"):
            _insert(conn, realtime_table(view), ("stream", stream), view, rows)
    conn.execute(
        "insert into view_versions (architecture, version, status, cutoff, quarantined) "
        "values ('lambda', 1, 'published', %s, 3)",
        (to_timestamp(cutoff),),
    )
    for stream, watermark in (("lambda-speed", "2026-11-01T11:59:00Z"), ("kappa-v1", None)):
        conn.execute(
            "insert into stream_progress (stream, last_batch_id, watermark, late_dropped, "
            "quarantined) values (%s, 4, %s, 2, 5)",
            (stream, None if watermark is None else to_timestamp(parse_iso(watermark))),
        )
    _set_alias(conn, "lambda", 1, CUTOFF)
    _set_alias(conn, "kappa", 1, None)

    quality_results.record(
        conn,
        [
            QualityResult("batch_views.page_views", "lambda-batch", "r1", True, 48, 9, 0, (), 0.5),
            QualityResult(
                "reconciliation", "kappa-serving", "r2", False, None, 3, 1, ("off by 1",), 1.0
            ),
        ],
    )
    quality_results.record_docs(conn, "http://127.0.0.1:9000/lk-quality/docs/index.html")
    comparison_reports.record_report(
        conn,
        "http://127.0.0.1:9000/lk-dq/comparison/20261101T120000Z/report.html",
        "http://127.0.0.1:9000/lk-dq/comparison/20261101T120000Z/comparison.json",
        VERDICT,
    )


@pytest.fixture(scope="module")
def store_settings(stack: Settings) -> Iterator[Settings]:
    with own_database(stack, "lk_serving_schema") as settings_:
        with connect(settings_) as conn:
            create_all(conn)
            _seed(conn)
        yield settings_


@pytest.fixture(scope="module")
def app(store_settings: Settings) -> FastAPI:
    """The app on the seeded store; schemathesis runs its lifespan (the reader pool) around
    each test that calls it."""
    return create_app(store_settings)


# The OpenAPI does not depend on the settings: read from an app that is never started.
# (`schemathesis.pytest.from_fixture` would load it from `app` instead, but it fails on
# pytest 9: it sets the test's `_nodeid`, which pytest no longer has.)
schema = schemathesis.openapi.from_dict(create_app(Settings()).openapi())


# --- the fuzzing --------------------------------------------------------------------------------


def _follow_up(app: FastAPI, case: schemathesis.Case, response: schemathesis.Response) -> None:
    """A view's 200: its next page and its revalidation must conform too."""
    if case.operation.path != VIEW_PATH or response.status_code != 200:
        return
    operation = case.operation
    query = dict(case.query or {})
    cursor = response.json()["meta"]["next_cursor"]
    if cursor is not None:
        page = operation.Case(
            path_parameters=case.path_parameters, query={**query, "cursor": cursor}
        )
        assert page.call_and_validate(checks=CHECKS, app=app).status_code == 200
    tag = response.headers["etag"][0]
    again = operation.Case(
        path_parameters=case.path_parameters, query=query, headers={"If-None-Match": tag}
    )
    assert again.call_and_validate(checks=CHECKS, app=app).status_code == 304


@schema.parametrize()
@FUZZ
def test_every_answer_conforms_to_the_openapi(app: FastAPI, case: schemathesis.Case) -> None:
    response = case.call_and_validate(checks=CHECKS, app=app)
    _follow_up(app, case, response)


# --- answers the fuzzing cannot reach -----------------------------------------------------------


def _view_case(view: str, **query: str) -> Any:
    return schema[VIEW_PATH]["GET"].Case(path_parameters={"view": view}, query=query)


def test_a_stale_cursor_gets_a_conforming_409(app: FastAPI, store_settings: Settings) -> None:
    # The alias moves (Kappa v1 -> v2) between a page and the next: 409, as declared.
    first = _view_case("page_views", architecture="kappa", limit="5")
    body = first.call_and_validate(checks=CHECKS, app=app).json()
    cursor = body["meta"]["next_cursor"]
    assert len(body["rows"]) == 5 and cursor
    with connect(store_settings) as conn:
        _set_alias(conn, "kappa", 2, None)
    try:
        stale = _view_case("page_views", architecture="kappa", cursor=cursor)
        response = stale.call_and_validate(checks=CHECKS, app=app)
        assert response.status_code == 409, response.text
        assert "start again without a cursor" in response.json()["detail"]
    finally:
        with connect(store_settings) as conn:
            _set_alias(conn, "kappa", 1, None)


def _cursor(generation: list[Any], digest: str, after: list[Any]) -> str:
    """A cursor as the API spells one (`serving.cursor`), around any position at all."""
    raw = json.dumps([1, *generation, digest, after]).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _issued(app: FastAPI, view: str) -> tuple[list[Any], str]:
    """The alias generation and the query digest of a real cursor for `view` (first page)."""
    body = _view_case(view, limit="1").call_and_validate(checks=CHECKS, app=app).json()
    cursor = body["meta"]["next_cursor"]
    _, version, switched_at, digest, _ = json.loads(base64.urlsafe_b64decode(cursor + "=="))
    return [version, switched_at], digest


# Cursors are opaque but not secret (base64 of JSON): a client may send back one of the current
# alias and query whose position it edited. Any such position must be answered 200 or 422.
KEYS = st.text(st.characters(exclude_categories=()), max_size=8)
INSTANTS = st.integers()


@pytest.mark.parametrize("view", ["page_views", "sessions", "segment_totals"])
def test_an_edited_cursor_is_not_a_server_error(app: FastAPI, view: str) -> None:
    generation, digest = _issued(app, view)

    @FUZZ
    @given(key=KEYS, instants=st.lists(INSTANTS, min_size=2, max_size=2))
    @example(key="\x00", instants=[0, 0])  # no text Postgres holds
    @example(key="\ud800", instants=[0, 0])  # a lone surrogate: no UTF-8
    @example(key="/a", instants=[-(2**62), 2**62])  # no instant a datetime holds
    def edited(key: str, instants: list[int]) -> None:
        # page_views sorts by (page, window_start); sessions by (user_id, start, end);
        # segment_totals by its segment alone.
        times = len(sort_columns(VIEWS[view])) - 1
        after = [key, *instants[:times]]
        case = _view_case(view, limit="2", cursor=_cursor(generation, digest, after))
        response = case.call_and_validate(checks=CHECKS, app=app)
        assert response.status_code in (200, 422), response.text

    edited()


def test_the_comparison_answers_its_verdict_conforming(app: FastAPI) -> None:
    response = schema["/v1/comparison"]["GET"].Case().call_and_validate(checks=CHECKS, app=app)
    assert response.status_code == 200, response.text
    assert response.json()["verdict"] == VERDICT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("path", "view"),
    [(VIEW_PATH, "sessions"), ("/v1/quality", None), ("/v1/comparison", None)],
    ids=["view", "quality", "comparison"],
)
def test_an_unreachable_store_gets_a_conforming_503(
    stack: Settings, path: str, view: str | None
) -> None:
    # An app whose store is nowhere, its lifespan not run (it would fail to open the pool).
    nowhere = create_app(stack.model_copy(update={"postgres_port": _free_port()}))
    case = schema[path]["GET"].Case(path_parameters={"view": view} if view else {})
    response = TestClient(nowhere).get(case.formatted_path)
    assert response.status_code == 503, response.text
    case.validate_response(response, checks=CHECKS[1:])  # a declared 503, not a server error
