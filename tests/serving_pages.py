"""A whole view through the serving API: its pages joined into one answer.

The API answers at most `limit` rows a page (CONTRACT §5 and the README's pagination); tests
that compare a whole view with the oracle follow `meta.next_cursor` to the last page. A
pattern view's matches (``GET /v1/views/{view}/matches``) page the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from core.catalog import MATCH_ORDER, MATCH_VIEWS, VIEW_NAMES

if TYPE_CHECKING:
    from core.oracle import OracleResult

MAX_LIMIT = "10000"  # the API's maximum page (LK_SERVE_PAGE_LIMIT_MAX's default)

ANSWERS: tuple[str, ...] = (*VIEW_NAMES, *(f"{view}/matches" for view in MATCH_VIEWS))
"""What the API answers that the oracle has too: every view, and each pattern view's matches
(named by their path below ``/v1/views/``)."""


def read_whole(get: Callable[..., Any], view: str, **params: str) -> dict[str, Any]:
    """`get(path, params=...)` is an HTTP client's (TestClient, httpx). Every page must answer
    200; the answer is the last page's with every page's rows. `view` may be a pattern view's
    matches (``<view>/matches``): their rows are the body's ``matches``."""
    field = "matches" if view.endswith("/matches") else "rows"
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page_params = {**params, "limit": MAX_LIMIT} | ({"cursor": cursor} if cursor else {})
        response = get(f"/v1/views/{view}", params=page_params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        rows += body[field]
        cursor = body["meta"]["next_cursor"]
        if cursor is None:
            return {**body, "rows": rows}


def read_answers(get: Callable[..., Any], **params: str) -> dict[str, dict[str, Any]]:
    """Every one of `ANSWERS`, whole (`read_whole`)."""
    return {name: read_whole(get, name, **params) for name in ANSWERS}


def oracle_answers(expected: OracleResult) -> dict[str, list[dict[str, Any]]]:
    """The oracle's rows of each of `ANSWERS`, in the API's reading order."""
    matches = sorted(expected.matches, key=lambda row: tuple(row[c] for c in MATCH_ORDER))
    return {**expected.views, "search_conversions/matches": matches}  # the one pattern view
