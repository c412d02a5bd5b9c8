"""The serving API's pure parts: page cursors, limits and `If-None-Match` (no store)."""

from __future__ import annotations

import base64
import json

import pytest
from fastapi import HTTPException
from starlette.requests import Request

from core.settings import Architecture, Settings
from core.store.reads import ViewFilters
from serving import caching
from serving.api.routes.views import view_query
from serving.caching import none_match
from serving.cursor import BadCursorError, Cursor, decode, encode, query_digest
from serving.filters import BadFilterError, PageLimits, ViewQuery, parse_view_query
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
