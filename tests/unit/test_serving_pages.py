"""The serving API's pure parts: page cursors, limits and `If-None-Match` (no store)."""

from __future__ import annotations

import base64
import json

import pytest
from fastapi import HTTPException
from fastapi.testclient import TestClient
from starlette.requests import Request

from core.catalog import MATCH_COLUMNS, MATCH_SPECS
from core.settings import Architecture, Settings
from core.store.reads import State, ViewFilters, decode_rows, position, rows_statement
from core.times import to_timestamp
from serving import caching
from serving.api.routes.views import view_query
from serving.caching import none_match
from serving.cursor import BadCursorError, Cursor, decode, encode, query_digest
from serving.filters import (
    BadFilterError,
    PageLimits,
    UnknownViewError,
    ViewQuery,
    parse_matches_query,
    parse_view_query,
)
from serving.main import create_app

WINDOWED = (str, int)  # page_views: page, window start (ms)
LIMITS = PageLimits(default=1_000, maximum=10_000)


def test_a_cursor_round_trips_with_any_key() -> None:
    digest = query_digest("page_views", "lambda", ViewFilters())
    for page in ["/a", "/é", 'quote " and, comma', "", "/" * 300]:
        cursor = Cursor((3, 1_795_000_000_123_456), (page, 1_793_523_600_000), digest)
        text = encode(cursor)
        assert text.isascii() and "=" not in text and "/" not in text and "+" not in text
        assert decode(text, WINDOWED, digest) == cursor
    before_any_alias = Cursor((None, None), ("/a", 0), digest)
    assert decode(encode(before_any_alias), WINDOWED, digest) == before_any_alias


def _forged(data: object) -> str:
    return base64.urlsafe_b64encode(json.dumps(data).encode()).decode().rstrip("=")


@pytest.mark.parametrize(
    "text",
    [
        "",
        "!!!",
        "bm90IGpzb24",  # "not json"
        _forged({"a": 1}),
        _forged([2, 1, 0, "d", ["/a", 0]]),  # another format
        _forged([1, "1", 0, "d", ["/a", 0]]),  # a version that is no number
        _forged([1, True, 0, "d", ["/a", 0]]),
        _forged([1, 1, 0, "d", ["/a"]]),  # a position of another shape
        _forged([1, 1, 0, "d", [1, 0]]),
        _forged([1, 1, 0, "d", ["/a", 0.5]]),
    ],
)
def test_a_cursor_this_api_did_not_issue_is_refused(text: str) -> None:
    with pytest.raises(BadCursorError, match="not a cursor this API issued"):
        decode(text, WINDOWED, "d")


def test_a_cursor_of_another_query_is_refused() -> None:
    mine = query_digest("page_views", "lambda", ViewFilters(keys=(("page", "/a"),)))
    other = query_digest("page_views", "lambda", ViewFilters(keys=(("page", "/b"),)))
    assert mine != other
    assert other != query_digest("page_views", "kappa", ViewFilters(keys=(("page", "/b"),)))
    text = encode(Cursor((1, 1), ("/a", 0), mine))
    with pytest.raises(BadCursorError, match="belongs to another query"):
        decode(text, WINDOWED, other)


def test_limits_and_cursors_are_parsed_only_for_pages() -> None:
    query = parse_view_query("page_views", [], "lambda", LIMITS)
    assert (query.limit, query.cursor) == (1_000, None)
    assert parse_view_query("page_views", [("limit", "10000")], "lambda", LIMITS).limit == 10_000
    for bad in ["0", "10001", "-1", "1e3", "٣", " 5", ""]:
        with pytest.raises(BadFilterError, match="limit must be a whole number"):
            parse_view_query("page_views", [("limit", bad)], "lambda", LIMITS)
    # The whole-view reads (quality checks, demo) take no page parameters.
    assert parse_view_query("page_views", [], "lambda").limit is None
    with pytest.raises(BadFilterError, match="unknown query parameter 'limit'"):
        parse_view_query("page_views", [("limit", "5")], "lambda")
    # A cursor carries its query: it decodes for the same filters, in any order of parameters.
    first = parse_view_query("page_views", [("page", "/a"), ("limit", "1")], "lambda", LIMITS)
    text = encode(Cursor((1, 1), ("/a", 0), first.digest))
    params = [("cursor", text), ("page", "/a")]
    assert parse_view_query("page_views", params, "lambda", LIMITS).cursor is not None


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (None, False),
        ("", False),
        ('"abc"', True),
        ('W/"abc"', True),
        ('"x", "abc"', True),
        ('"x",W/"abc" ', True),
        ("*", True),
        ('"abcd"', False),
        ("abc", False),  # not a quoted tag
    ],
)
def test_if_none_match_uses_the_weak_comparison(header: str | None, matches: bool) -> None:
    assert none_match(header, '"abc"') is matches


def test_answers_keep_the_most_recent_bodies_within_their_bytes() -> None:
    answers = caching.Answers(max_bytes=10)
    answers.put('"a"', b"12345")
    answers.put('"b"', b"12345")
    assert answers.get('"a"') == b"12345"  # now the most recently used
    answers.put('"c"', b"123")  # over 10 bytes: the least recently used goes
    assert (answers.get('"a"'), answers.get('"b"'), answers.get('"c"')) == (b"12345", None, b"123")
    answers.put('"d"', b"12345678901")  # larger than the whole cache: not kept, nothing evicted
    assert answers.get('"d"') is None and answers.get('"a"') == b"12345"


def test_answers_of_zero_bytes_keep_nothing() -> None:
    answers = caching.Answers(max_bytes=0)
    answers.put('"a"', b"1")
    assert answers.get('"a"') is None


def test_a_query_string_parsed_once_still_follows_each_deployments_settings() -> None:
    # The route keeps checked queries by their text; the deployment's default architecture and
    # page limit must still apply to each app, and a refused query is refused every time.
    def checked(settings: Settings, query_string: bytes) -> ViewQuery:
        scope = {
            "type": "http",
            "app": create_app(settings),
            "path_params": {"view": "page_views"},
            "query_string": query_string,
        }
        return view_query(Request(scope))

    for _ in range(2):
        kappa = checked(Settings(architecture=Architecture.KAPPA, serve_page_limit=5), b"page=/a")
        lambda_ = checked(Settings(architecture=Architecture.LAMBDA), b"page=/a")
        assert (kappa.architecture, kappa.limit) == ("kappa", 5)
        assert (lambda_.architecture, lambda_.limit) == ("lambda", 1_000)
        with pytest.raises(HTTPException) as refused:
            checked(Settings(), b"page=/a&page=/b")
        assert refused.value.status_code == 422


# --- a view of the current state (no time fields) ---------------------------------------


@pytest.mark.parametrize(
    "params",
    [
        [("start", "2026-11-01T10:00:00Z")],
        [("end", "2026-11-01T10:00:00Z")],
        [("segment", "gold"), ("start", "yesterday")],  # refused for what it is, not its value
    ],
)
def test_start_or_end_on_the_current_state_is_refused_with_the_reason(
    params: list[tuple[str, str]],
) -> None:
    name = next(n for n, _ in params if n in ("start", "end"))
    for limits in (LIMITS, None):
        with pytest.raises(BadFilterError) as refused:
            parse_view_query("segment_totals", params, "kappa", limits)
        assert str(refused.value) == (
            f"{name!r} does not apply to segment_totals: it has no window (the current state "
            "per segment), so it takes no start or end"
        )


def test_the_current_state_is_filtered_by_its_key_and_paged_by_it_alone() -> None:
    query = parse_view_query("segment_totals", [("segment", "gold")], "lambda", LIMITS)
    assert query.filters == ViewFilters(keys=(("segment", "gold"),))
    with pytest.raises(BadFilterError, match="'page' is not a key of segment_totals"):
        parse_view_query("segment_totals", [("page", "/a")], "lambda", LIMITS)
    with pytest.raises(BadFilterError, match="segment_totals accepts architecture, limit, "):
        parse_view_query("segment_totals", [("window", "x")], "lambda", LIMITS)
    # A cursor's position is the last row's segment alone.
    first = parse_view_query("segment_totals", [], "lambda", LIMITS)
    text = encode(Cursor((1, 1), ("gold",), first.digest))
    query = parse_view_query("segment_totals", [("cursor", text)], "lambda", LIMITS)
    assert query.cursor is not None and query.cursor.after == ("gold",)
    windowed = encode(Cursor((1, 1), ("gold", 1_793_523_600_000), first.digest))
    with pytest.raises(BadFilterError, match="not a cursor this API issued"):
        parse_view_query("segment_totals", [("cursor", windowed)], "lambda", LIMITS)


def test_the_hopping_view_takes_start_end_and_page() -> None:
    params = [("page", "/a"), ("start", "2026-11-01T10:01:00Z"), ("end", "2026-11-01T10:05:00Z")]
    query = parse_view_query("page_views_hopping", params, "kappa", LIMITS)
    assert query.filters == ViewFilters(
        keys=(("page", "/a"),), start_ms=1_793_527_260_000, end_ms=1_793_527_500_000
    )
    text = encode(Cursor((1, 1), ("/a", 1_793_527_260_000), query.digest))
    cursor = parse_view_query("page_views_hopping", [*params, ("cursor", text)], "kappa", LIMITS)
    assert cursor.cursor is not None


def test_the_route_answers_422_for_start_on_the_current_state() -> None:
    scope = {
        "type": "http",
        "app": create_app(Settings()),
        "path_params": {"view": "segment_totals"},
        "query_string": b"start=2026-11-01T10:00:00Z",
    }
    with pytest.raises(HTTPException) as refused:
        view_query(Request(scope))
    assert refused.value.status_code == 422
    assert "segment_totals: it has no window" in str(refused.value.detail)
    # The same view without a time filter is a query like any other.
    assert view_query(Request({**scope, "query_string": b"segment=gold"})).spec.current_state


def test_the_openapi_page_names_every_view_and_where_each_filter_applies() -> None:
    from core.catalog import VIEWS

    schema = TestClient(create_app(Settings())).get("/openapi.json").json()
    assert schema["info"]["summary"].startswith(f"The {len(VIEWS)} views of the Lambda and Kappa")
    parameters = {p["name"]: p for p in schema["paths"]["/v1/views/{view}"]["get"]["parameters"]}
    assert parameters["view"]["schema"]["enum"] == list(VIEWS)
    assert parameters["view"]["description"] == "One of the 8 views (any other: 404)."
    assert parameters["segment"]["description"] == "revenue_by_segment and segment_totals only."
    assert parameters["page"]["description"] == "page_views and page_views_hopping only."
    assert parameters["user_id"]["description"] == "sessions only."
    for name in ("start", "end"):
        assert "segment_totals has no window: 422." in parameters[name]["description"]


# --- a pattern view's matches (`/v1/views/{view}/matches`) ---------------------------------


def test_matches_take_the_views_key_filters_window_and_pages() -> None:
    query = parse_matches_query(
        "search_conversions",
        [("query", "boots"), ("start", "2026-11-01T10:00:00Z"), ("limit", "2")],
        "kappa",
        LIMITS,
    )
    assert query.spec.columns == MATCH_COLUMNS
    assert query.filters.keys == (("query", "boots"),)
    assert (query.architecture, query.limit) == ("kappa", 2)
    # Not the view's query: a cursor or an ETag of one is never the other's.
    view = parse_view_query("search_conversions", [("query", "boots")], "kappa", LIMITS)
    assert query.digest != view.digest
    # A page ends on (query, window start, search id): two matches share a query and window.
    cursor = Cursor((3, 1), ("boots", 1_793_523_600_000, "s-9"), query.digest)
    params = [("query", "boots"), ("start", "2026-11-01T10:00:00Z"), ("cursor", encode(cursor))]
    again = parse_matches_query("search_conversions", params, "kappa", LIMITS)
    assert again.cursor == cursor
    views_cursor = encode(Cursor((3, 1), ("boots", 1_793_523_600_000), query.digest))
    params[-1] = ("cursor", views_cursor)
    with pytest.raises(BadFilterError, match="not a cursor this API issued"):
        parse_matches_query("search_conversions", params, "kappa", LIMITS)


def test_matches_refuse_another_views_filters_and_views_without_matches() -> None:
    with pytest.raises(BadFilterError, match="'page' is not a key of search_conversions/matches"):
        parse_matches_query("search_conversions", [("page", "/a")], "lambda", LIMITS)
    with pytest.raises(UnknownViewError, match="'search_ctr' has no matches"):
        parse_matches_query("search_ctr", [], "lambda", LIMITS)
    with pytest.raises(UnknownViewError, match="unknown view 'nope'"):
        parse_matches_query("nope", [], "lambda", LIMITS)


def test_the_matches_route_answers_404_and_422_before_any_store() -> None:
    client = TestClient(create_app(Settings()))  # no lifespan: no pool, so no read may happen
    refused = client.get("/v1/views/page_views/matches")
    assert refused.status_code == 404
    assert "has no matches" in refused.json()["detail"]
    assert client.get("/v1/views/search_conversions/matches?segment=gold").status_code == 422
    schema = client.get("/openapi.json").json()
    get = schema["paths"]["/v1/views/{view}/matches"]["get"]
    parameters = {p["name"]: p for p in get["parameters"]}
    assert parameters["view"]["schema"]["enum"] == ["search_conversions"]
    assert {"query", "start", "end", "limit", "cursor", "architecture"} <= set(parameters)
    assert "page" not in parameters


def test_matches_are_read_as_a_tumbling_view_in_their_own_order() -> None:
    spec = MATCH_SPECS["search_conversions"]
    state = State("lambda", 4, 1_793_527_200_000, 1, "lambda-speed", None, 0)
    after = ("boots", 1_793_523_600_000, "s-9")
    statement = rows_statement(spec, state, ViewFilters(), after=after, limit=3)
    assert statement is not None
    text, params = statement
    sql_text = text.decode()
    # Lambda: the batch's matches of searches before the cutoff, the speed layer's from it.
    assert "batch_search_conversions_matches" in sql_text
    assert "rt_search_conversions_matches" in sql_text
    assert '"t"."search_id" collate "C"' in sql_text
    assert (params["after0"], params["after2"]) == ("boots", "s-9")
    assert params["after1"] == to_timestamp(1_793_523_600_000)
    assert (params["version"], params["limit"]) == (4, 3)
    # A row as the store returns it: every instant back as ISO, the position as the cursor's.
    at = to_timestamp
    row = (
        "boots",
        at(0),
        at(3_600_000),
        "s-9",
        "u-1",
        at(60_000),
        "c-1",
        at(120_000),
        "o-1",
        at(180_000),
    )
    [decoded] = decode_rows(spec, [row])
    assert decoded == {
        "query": "boots",
        "window_start": "1970-01-01T00:00:00Z",
        "window_end": "1970-01-01T01:00:00Z",
        "search_id": "s-9",
        "user_id": "u-1",
        "search_ts": "1970-01-01T00:01:00Z",
        "click_id": "c-1",
        "click_ts": "1970-01-01T00:02:00Z",
        "order_id": "o-1",
        "order_ts": "1970-01-01T00:03:00Z",
    }
    assert position(spec, row) == ("boots", 0, "s-9")
