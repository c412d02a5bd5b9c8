"""`GET /`: the live dashboard, Lambda and Kappa side by side for one view (any of the
catalogue's, windowed or not).

A static page (`serving/dashboard/`): its script polls `GET /v1/views/{view}` for each
architecture every 2 s with `If-None-Match`, so an unchanged view costs a 304 and no rows. The
page carries the views' catalogue and the page size it may ask for, so the script repeats
neither. Its assets, uPlot included (vendored: no CDN at run time), are served under
`/dashboard/`. Neither is part of the API (CONTRACT §5), so neither is in the OpenAPI schema.

For a view with matches (`core.catalog.MATCH_SPECS`: `search_conversions`), the page also polls
the first `MATCHES_SHOWN` of each architecture's `GET /v1/views/{view}/matches` the same way,
and shows them under the panels.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

from core.catalog import MATCH_SPECS, SESSION_GAP_MS, VIEWS, ViewSpec
from core.times import MINUTE_MS
from serving.api.deps import app_settings

DASHBOARD_DIR = Path(__file__).resolve().parents[2] / "dashboard"
ASSETS_PATH = "/dashboard"
CONFIG_SLOT = "{{config}}"  # in index.html: where the page's configuration goes

MATCHES_SHOWN = 10
"""Matches per architecture the page shows: the first page of them, a glimpse beside the view
(the view's `converted` counts them all)."""

router = APIRouter(include_in_schema=False)


@cache
def _template() -> str:
    return (DASHBOARD_DIR / "index.html").read_text(encoding="utf-8")


def _minutes(ms: int) -> str:
    return f"{ms // MINUTE_MS}-minute"


def window_text(spec: ViewSpec) -> str:
    """What one row of the view spans, in a few words, for the page to show by the view."""
    per = f" per {', '.join(spec.keys)}" if spec.keys else ""
    if spec.current_state:
        return f"no window: the current state{per} (everything counted so far)"
    if spec.window_ms is None:
        return f"sessions{per} (events at most {SESSION_GAP_MS // MINUTE_MS} minutes apart)"
    if spec.hop_ms is not None:
        windows = spec.window_ms // spec.hop_ms
        every = "minute" if spec.hop_ms == MINUTE_MS else f"{spec.hop_ms // MINUTE_MS} minutes"
        return (
            f"{_minutes(spec.window_ms)} windows{per}, starting every {every}: they overlap, "
            f"so each event counts in {windows} windows (and {windows} times in the total)"
        )
    return f"{_minutes(spec.window_ms)} tumbling windows{per}"


def match_columns(spec: ViewSpec) -> tuple[str, ...]:
    """The columns the page shows of a view's matches: its keys, each event's id, then the
    events' times in the pattern's order (search, click, order). Not the window, which the
    view's table shows, nor the searcher's id, to keep the table narrow."""
    # Each instant names its event (`click_ts`), whose id is the `_id` beside it.
    ids = tuple(f"{instant.removesuffix('_ts')}_id" for instant in spec.instants)
    assert set(ids) <= set(spec.values), (spec.name, ids)
    return (*spec.keys, *ids, *spec.instants)


def page_config(page_limit: int) -> dict[str, object]:
    """What the script needs to know: each view's fields in row order (a view of the current
    state has no time fields) and what a row spans, the largest page, and the views with
    matches, with the columns and the number of matches shown of them."""
    return {
        "views": {
            name: {
                "keys": spec.keys,
                "time_fields": spec.time_fields,
                "values": spec.values,
                "window": window_text(spec),
            }
            for name, spec in VIEWS.items()
        },
        "page_limit": page_limit,
        # From the catalogue, so the script names no pattern view of its own.
        "matches": {view: list(match_columns(spec)) for view, spec in MATCH_SPECS.items()},
        "matches_shown": MATCHES_SHOWN,
    }


@router.get("/", response_class=HTMLResponse)
async def dashboard(request: Request) -> HTMLResponse:
    """The dashboard page (HTML); it reads the API from the browser."""
    config = json.dumps(page_config(app_settings(request).serve_page_limit_max))
    # `<\/`: no value may close the <script> element the configuration sits in.
    html = _template().replace(CONFIG_SLOT, config.replace("</", "<\\/"))
    # no-cache: a redeployed API's page, and its catalogue, are picked up at the next load.
    return HTMLResponse(html, headers={"Cache-Control": "no-cache"})


def assets() -> StaticFiles:
    """The page's script, style and vendored libraries, to mount at `ASSETS_PATH`."""
    return StaticFiles(directory=DASHBOARD_DIR)
