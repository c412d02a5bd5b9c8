"""A whole view through the serving API: its pages joined into one answer.

The API answers at most `limit` rows a page (CONTRACT §5 and the README's pagination); tests
that compare a whole view with the oracle follow `meta.next_cursor` to the last page.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

MAX_LIMIT = "10000"  # the API's maximum page (LK_SERVE_PAGE_LIMIT_MAX's default)


def read_whole(get: Callable[..., Any], view: str, **params: str) -> dict[str, Any]:
    """`get(path, params=...)` is an HTTP client's (TestClient, httpx). Every page must answer
    200; the answer is the last page's with every page's rows."""
    rows: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        page_params = {**params, "limit": MAX_LIMIT} | ({"cursor": cursor} if cursor else {})
        response = get(f"/v1/views/{view}", params=page_params)
        assert response.status_code == 200, response.text
        body: dict[str, Any] = response.json()
        rows += body["rows"]
        cursor = body["meta"]["next_cursor"]
        if cursor is None:
            return {**body, "rows": rows}
