"""`GET /v1/views/{view}`: one page of a view, merged for the asked architecture, with its meta;
`GET /v1/views/{view}/matches`: one page of a pattern view's complex events, read the same way
(the same snapshot of the same state, filters, pages and ETags; `core.catalog.MATCH_SPECS`).

Every answer carries an `ETag` naming the store state it was read from; a request whose
`If-None-Match` still names the current state gets 304 after one statement, without its rows
being read, and a query asked again while that state holds gets the body encoded the first
time (`serving.caching`). A page cursor read from another alias version gets 409.
"""

from __future__ import annotations

import asyncio
import functools
from dataclasses import dataclass
from time import perf_counter
from typing import Any

import orjson
import psycopg
from fastapi import APIRouter, HTTPException, Request, Response, status
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool, PoolClosed, PoolTimeout
from starlette.datastructures import QueryParams

from core.catalog import MATCH_SPECS, VIEWS
from core.store.reads import State
from serving import caching, repository
from serving.api.deps import app_metrics, app_pool, app_settings
from serving.filters import (
    ARCHITECTURES,
    KEY_FILTERS,
    BadFilterError,
    PageLimits,
    UnknownViewError,
    ViewQuery,
    default_architecture,
    parse_matches_query,
    parse_view_query,
)
from serving.metrics import ServingMetrics
from serving.models import (
    STORE_UNAVAILABLE,
    ErrorBody,
    MatchesResponse,
    ReadArchitecture,
    ViewResponse,
)

router = APIRouter(prefix="/v1/views", tags=["views"])


def _parameter(
    name: str, description: str, schema: dict[str, Any] | None = None, where: str = "query"
) -> dict[str, Any]:
    return {
        "name": name,
        "in": where,
        "required": where == "path",
        "schema": schema or {"type": "string"},
        "description": description,
    }


# What `core.times.parse_iso` reads; a day the month lacks, year 0 or a fraction finer than a
# millisecond are still refused (422).
INSTANT = {
    "type": "string",
    "pattern": (
        r"^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
        r"T([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,9})?(Z|\+00:00)$"
    ),
    "examples": ["2026-11-01T10:00:00Z"],
}

_KEYED = {key: [name for name, spec in VIEWS.items() if key in spec.keys] for key in KEY_FILTERS}
"""Each key filter and the views it applies to."""
_NO_TIME_FIELDS = " and ".join(name for name, spec in VIEWS.items() if spec.current_state)

# For the OpenAPI page only: the view and the whole query string are checked by
# `parse_view_query` (which also refuses unknown and repeated parameters), not by FastAPI,
# whose dependency solving and per-parameter validation cost more than a 304's statement.
PARAMETERS = [
    _parameter(
        "view",
        f"One of the {len(VIEWS)} views (any other: 404).",
        {"type": "string", "enum": [*VIEWS]},
        where="path",
    ),
    _parameter(
        "start",
        "ISO 8601 UTC; rows whose window (sessions: session) starts at or after it. "
        f"{_NO_TIME_FIELDS} has no window: 422.",
        INSTANT,
    ),
    _parameter(
        "end",
        "ISO 8601 UTC; rows whose window (sessions: session) starts before it. "
        f"{_NO_TIME_FIELDS} has no window: 422.",
        INSTANT,
    ),
    _parameter(
        "architecture",
        "lambda or kappa (default: the deployment's).",
        {"type": "string", "enum": list(ARCHITECTURES)},
    ),
    _parameter(
        "limit",
        "Rows per page: 1 to LK_SERVE_PAGE_LIMIT_MAX (10,000); default LK_SERVE_PAGE_LIMIT "
        "(1,000).",
        {"type": "integer", "minimum": 1},
    ),
    _parameter("cursor", "`meta.next_cursor` of the previous page (same view and filters)."),
    *(_parameter(key, f"{' and '.join(_KEYED[key])} only.") for key in KEY_FILTERS),
    _parameter(
        "If-None-Match",
        "The `ETag` of an answer already held: 304, without rows, while it is still current.",
        where="header",
    ),
]

MATCH_PARAMETERS = [
    _parameter(
        "view",
        f"A view with matches: {', '.join(MATCH_SPECS)} (another view, or an unknown one: 404).",
        {"type": "string", "enum": [*MATCH_SPECS]},
        where="path",
    ),
    _parameter(
        "start", "ISO 8601 UTC; matches whose search's window starts at or after it.", INSTANT
    ),
    _parameter("end", "ISO 8601 UTC; matches whose search's window starts before it.", INSTANT),
    *(p for p in PARAMETERS if p["name"] in ("architecture", "limit", "cursor", "If-None-Match")),
    *(
        _parameter(key, "The search's.")
        for key in sorted({k for spec in MATCH_SPECS.values() for k in spec.keys})
    ),
]

_MATCHES_OF = {spec.name: view for view, spec in MATCH_SPECS.items()}
"""A matches table's name -> its view."""

_CACHE_HEADERS = {
    "ETag": {
        "description": "Names the query and the store state the answer was read from.",
        "schema": {"type": "string"},
    },
    "Cache-Control": {
        "description": "`no-cache`: revalidate before use.",
        "schema": {"type": "string"},
    },
}


@functools.lru_cache(maxsize=1024)
def _parsed(
    view: str, query_string: bytes, architecture: ReadArchitecture, limits: PageLimits
) -> ViewQuery:
    # A pure function of its arguments, and pollers ask the same few queries again and again:
    # each is parsed once (a refused one raises, and is not kept).
    return parse_view_query(view, QueryParams(query_string).multi_items(), architecture, limits)


@functools.lru_cache(maxsize=256)
def _parsed_matches(
    view: str, query_string: bytes, architecture: ReadArchitecture, limits: PageLimits
) -> ViewQuery:
    return parse_matches_query(view, QueryParams(query_string).multi_items(), architecture, limits)


def view_query(request: Request) -> ViewQuery:
    """The checked request: 404 for an unknown view, 422 with the reason for a bad filter."""
    return _checked(request, _parsed)


def matches_query(request: Request) -> ViewQuery:
    """The checked request for matches: 404 for a view without, 422 for a bad filter."""
    return _checked(request, _parsed_matches)


def _checked(request: Request, parse: Any) -> ViewQuery:
    settings = app_settings(request)
    try:
        query: ViewQuery = parse(
            request.path_params["view"],
            request.scope["query_string"],
            default_architecture(settings),
            PageLimits.from_settings(settings),
        )
        return query
    except UnknownViewError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
    except BadFilterError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc


def _body(query: ViewQuery, state: State, page: repository.Page) -> bytes:
    meta = repository.view_meta(state, page.next_cursor).model_dump()
    # The rows are checked JSON values already: encoded as they are (orjson, the same JSON as
    # Starlette's JSONResponse), not validated again on the way out.
    matches_of = _MATCHES_OF.get(query.spec.name)
    if matches_of is not None:
        return orjson.dumps({"view": matches_of, "matches": page.rows, "meta": meta})
    return orjson.dumps({"view": query.spec.name, "rows": page.rows, "meta": meta})


def _recheck(request: Request, pool: AsyncConnectionPool[Any]) -> None:
    """Check the pool's idle connections in the background (once at a time): after a store
    restart they are all broken, and each would otherwise fail one request."""
    running: asyncio.Task[None] | None = getattr(request.app.state, "pool_check", None)
    if running is None or running.done():
        request.app.state.pool_check = asyncio.create_task(pool.check())


@dataclass(frozen=True, slots=True)
class _Answer:
    state: State
    tag: str
    body: bytes | None  # None: `If-None-Match` names it (304)
    cached: bool = False


async def _read(
    conn: psycopg.AsyncConnection[Any],
    query: ViewQuery,
    if_none_match: str | None,
    answers: caching.Answers,
) -> _Answer:
    # One statement first: pollers mostly get a 304, and a query asked again while nothing
    # moved an answer encoded already, each for a single round trip and no rows.
    state = await repository.read_state(conn, query.architecture)
    tag = caching.etag(query, state)
    if caching.none_match(if_none_match, tag):
        return _Answer(state, tag, None)
    if (body := answers.get(tag)) is not None:
        return _Answer(state, tag, body, cached=True)
    async with repository.snapshot(conn) as snapshot:
        state = await snapshot.state(query.architecture)
        tag = caching.etag(query, state)
        unchanged = caching.none_match(if_none_match, tag)
        moved = query.cursor is not None and query.cursor.generation != state.generation
        page = None if unchanged or moved else await snapshot.page(query, state)
    # Refused after the read-only transaction commits: leaving it by an exception would roll
    # it back, and psycopg forgets the connection's prepared statements on a rollback.
    if unchanged:
        return _Answer(state, tag, None)
    repository.check_cursor(query, state)
    assert page is not None
    body = _body(query, state, page)
    answers.put(tag, body)  # the tag of the snapshot the rows were read in
    return _Answer(state, tag, body)


async def _answer(
    query: ViewQuery,
    if_none_match: str | None,
    request: Request,
    pool: AsyncConnectionPool[Any],
    metrics: ServingMetrics,
) -> Response:
    answers: caching.Answers = request.app.state.answers
    for attempt in (1, 2):
        conn = None
        try:
            async with pool.connection() as conn:
                answer = await _read(conn, query, if_none_match, answers)
            break
        except (PoolTimeout, PoolClosed):
            raise  # no connection at all: the store is down (503)
        except psycopg.OperationalError:
            # A connection opened before the store restarted breaks on first use. The read is
            # idempotent: try once more, on another connection.
            if attempt == 2 or conn is None or not conn.broken:
                raise
            _recheck(request, pool)
    metrics.observe_state(answer.state)
    if answer.body is None:
        return _not_modified(answer.tag)
    metrics.answers.labels("cache" if answer.cached else "store").inc()
    return Response(
        answer.body,
        media_type="application/json",
        headers={"ETag": answer.tag, "Cache-Control": caching.CACHE_CONTROL},
    )


def _not_modified(tag: str) -> Response:
    return Response(
        status_code=status.HTTP_304_NOT_MODIFIED,
        headers={"ETag": tag, "Cache-Control": caching.CACHE_CONTROL},
    )


def _page_responses(not_found: str) -> dict[int | str, dict[str, Any]]:
    """The answers a page of rows may give besides its body (a view's, or its matches')."""
    return {
        status.HTTP_200_OK: {"headers": _CACHE_HEADERS},
        status.HTTP_304_NOT_MODIFIED: {
            "description": "`If-None-Match` names the current answer's ETag (no rows read).",
            "headers": _CACHE_HEADERS,
        },
        status.HTTP_404_NOT_FOUND: {"model": ErrorBody, "description": not_found},
        status.HTTP_409_CONFLICT: {
            "model": ErrorBody,
            "description": "The cursor was read from a version the alias no longer points at.",
        },
        status.HTTP_422_UNPROCESSABLE_CONTENT: {
            "model": ErrorBody,
            "description": "Bad filter, limit or cursor.",
        },
        **STORE_UNAVAILABLE,
    }


@router.get(
    "/{view}",
    response_model=ViewResponse,
    openapi_extra={"parameters": PARAMETERS},
    responses=_page_responses("Unknown view."),
)
async def read_view(request: Request) -> Response:
    """One page of a view (sorted by key fields, then window) and where it comes from; an
    `ETag` and `Cache-Control: no-cache`, so pollers revalidate with `If-None-Match`."""
    # Checked before the pool is asked, so a refused request never takes a connection.
    return await _serve(request, view_query(request))


@router.get(
    "/{view}/matches",
    response_model=MatchesResponse,
    openapi_extra={"parameters": MATCH_PARAMETERS},
    responses=_page_responses("Unknown view, or a view without matches."),
)
async def read_matches(request: Request) -> Response:
    """One page of a pattern view's complex events (CONTRACT section 5: search, click and order
    of each converted search, sorted by query, window and search id), read as a view's page."""
    return await _serve(request, matches_query(request))


async def _serve(request: Request, query: ViewQuery) -> Response:
    pool, metrics = app_pool(request), app_metrics(request)
    started = perf_counter()
    code = status.HTTP_500_INTERNAL_SERVER_ERROR  # unless an answer or a known failure
    try:
        response = await _answer(
            query, request.headers.get("if-none-match"), request, pool, metrics
        )
        code = response.status_code
        return response
    except repository.AliasMovedError as exc:
        code = status.HTTP_409_CONFLICT
        return JSONResponse({"detail": str(exc)}, status_code=code)
    except psycopg.OperationalError:
        code = status.HTTP_503_SERVICE_UNAVAILABLE  # answered by the app's handler
        raise
    finally:
        metrics.observe_request(query.spec.name, query.architecture, code, perf_counter() - started)
