"""The dashboard at `/`: its page and assets are served without a store, load nothing from
another host, and stay out of the API's OpenAPI schema; its table of the last comparison's
verdict (`GET /v1/comparison`) and a pattern view's matched patterns
(`GET /v1/views/{view}/matches`), in Chromium with the API's answers given by the test."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient

from core.catalog import MATCH_SPECS, MATCH_VIEWS, VIEWS
from core.settings import Settings
from serving.api.routes.dashboard import DASHBOARD_DIR, MATCHES_SHOWN, match_columns
from serving.main import create_app
from tests.browser import chromium


class _Page(HTMLParser):
    """The URLs the page loads (`src`, `href`) and the text of its configuration script."""

    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []
        self.config = ""
        self._in_config = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.urls += [value for name, value in attrs if name in ("src", "href") and value]
        self._in_config = tag == "script" and ("id", "config") in attrs

    def handle_data(self, data: str) -> None:
        if self._in_config:
            self.config += data

    def handle_endtag(self, tag: str) -> None:
        self._in_config = False


def _client(**settings: object) -> TestClient:
    # No lifespan (not entered as a context manager): no store is needed, none is reached.
    return TestClient(create_app(Settings(**settings)))  # type: ignore[arg-type]


def _page(client: TestClient) -> _Page:
    response = client.get("/")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/html")
    assert response.headers["cache-control"] == "no-cache"
    page = _Page()
    page.feed(response.text)
    return page


def test_the_page_loads_only_local_assets_and_they_are_served() -> None:
    client = _client()
    page = _page(client)
    assets = [url for url in page.urls if not url.startswith("data:")]
    assert {"dashboard/dashboard.js", "dashboard/vendor/uplot/uPlot.iife.min.js"} <= set(assets)
    for url in assets:
        assert "://" not in url and not url.startswith("//"), url  # relative: this host
        response = client.get(f"/{url}")
        assert response.status_code == 200, url
        assert response.content
        kind = "javascript" if url.endswith(".js") else "css"
        assert kind in response.headers["content-type"], (url, response.headers["content-type"])
    # The page's own files name no other host either (the vendored uPlot names its home only
    # in its licence comment).
    for own in ("index.html", "dashboard.js", "dashboard.css"):
        assert not re.search(r"https?://", (DASHBOARD_DIR / own).read_text()), own


def test_the_page_carries_the_catalogue_and_the_largest_page() -> None:
    config = json.loads(_page(_client(serve_page_limit=100, serve_page_limit_max=500)).config)
    assert config["page_limit"] == 500
    assert list(config["views"]) == list(VIEWS)
    for name, spec in VIEWS.items():
        fields = config["views"][name]
        assert (fields["keys"], fields["time_fields"], fields["values"]) == (
            list(spec.keys),
            list(spec.time_fields),
            list(spec.values),
        )


def test_the_page_says_which_views_have_matches_from_the_catalogue() -> None:
    config = json.loads(_page(_client()).config)
    assert list(config["matches"]) == list(MATCH_VIEWS) == ["search_conversions"]
    assert config["matches"] == {
        view: list(match_columns(spec)) for view, spec in MATCH_SPECS.items()
    }
    # Each event's id, then the three times in the pattern's order: search -> click -> order.
    assert config["matches"]["search_conversions"] == [
        "query",
        "search_id",
        "click_id",
        "order_id",
        "search_ts",
        "click_ts",
        "order_ts",
    ]
    assert all(set(columns) <= set(MATCH_SPECS[view].columns)
               for view, columns in config["matches"].items())  # fmt: skip
    assert config["matches_shown"] == MATCHES_SHOWN == 10


def test_the_script_names_no_pattern_view_and_the_page_no_inline_code() -> None:
    script = (DASHBOARD_DIR / "dashboard.js").read_text()
    html = (DASHBOARD_DIR / "index.html").read_text()
    # Which views have matches, and their columns, come from the configuration alone.
    assert "config.matches" in script
    for view in MATCH_VIEWS:
        assert f'"{view}"' not in script and f"'{view}'" not in script, view
    assert "/matches" in script
    # No inline handler or script: only the configuration (JSON, never run) and the files.
    assert not re.search(r"\son[a-z]+\s*=", html, re.IGNORECASE)
    scripts = re.findall(r"<script\b([^>]*)>", html)
    assert all("src=" in attrs or 'type="application/json"' in attrs for attrs in scripts)
    assert 'id="matches"' in html and 'id="matches-panel"' in html


def test_the_dashboard_is_not_part_of_the_api_schema() -> None:
    client = _client()
    paths = client.get("/openapi.json").json()["paths"]
    assert "/" not in paths and not any(path.startswith("/dashboard") for path in paths)
    assert client.get("/dashboard/nope.js").status_code == 404


def test_the_vendored_uplot_is_the_version_its_readme_names_with_its_licence() -> None:
    vendor = DASHBOARD_DIR / "vendor"
    banner = (vendor / "uplot" / "uPlot.iife.min.js").read_text()[:200]
    version = re.search(r"\(v(\d+\.\d+\.\d+)\)", banner)
    assert version, banner
    assert (
        f"uPlot](https://github.com/leeoniya/uPlot) {version[1]} "
        in (vendor / "README.md").read_text()
    )
    assert "MIT License" in (vendor / "uplot" / "LICENSE").read_text()


def test_the_page_lists_every_view_with_what_a_row_spans() -> None:
    page = _page(_client())
    views = json.loads(page.config)["views"]
    assert list(views) == [
        "page_views",
        "unique_users",
        "search_ctr",
        "revenue_by_segment",
        "sessions",
        "page_views_hopping",
        "segment_totals",
        "search_conversions",
    ]
    # The current state has no time fields: its table is its key and values alone.
    assert views["segment_totals"] == {
        "keys": ["segment"],
        "time_fields": [],
        "values": ["users", "revenue_cents"],
        "window": "no window: the current state per segment (everything counted so far)",
    }
    hopping = views["page_views_hopping"]
    assert hopping["time_fields"] == ["window_start", "window_end"]
    assert hopping["window"] == (
        "10-minute windows per page, starting every minute: they overlap, so each event "
        "counts in 10 windows (and 10 times in the total)"
    )
    assert views["page_views"]["window"] == "1-minute tumbling windows per page"
    assert views["unique_users"]["window"] == "60-minute tumbling windows"
    assert views["sessions"]["window"] == "sessions per user_id (events at most 30 minutes apart)"


def test_the_script_shows_what_a_row_spans_and_assumes_no_time_fields() -> None:
    script = (DASHBOARD_DIR / "dashboard.js").read_text()
    html = (DASHBOARD_DIR / "index.html").read_text()
    assert 'id="window"' in html
    assert "config.views[view].window" in script
    # Every use of a view's time fields spreads them: none picks the first or second.
    assert "time_fields[" not in script and "time_fields.length" not in script


# --- the last comparison's verdict ---------------------------------------------------------------

ORIGIN = "http://dashboard.test"
REPORT = "http://minio.test/lk-dq/comparison/20261124T153000Z/report.html"
VERDICT = [
    {
        "question": "How fresh: produced → visible, p99",
        "figure": "fig-freshness",
        "lambda_figure": "5.6 s",
        "kappa_figure": "4.4 s",
        "ahead": "kappa",
        "by": "1.3\N{MULTIPLICATION SIGN} fresher",
    },
    {
        "question": "Late data repaired: rows still off after the batch",
        "figure": "fig-late",
        "lambda_figure": "0 rows, exact again at 300 s",
        "kappa_figure": "35 rows, never repaired",
        "ahead": "lambda",
        "by": "35 rows fewer",
    },
    {
        "question": "<b>escaped</b>",
        "figure": "fig-code",
        "lambda_figure": "<i>1</i>",
        "kappa_figure": "\N{EN DASH}",
        "ahead": "",
        "by": "",
    },
]
PUBLISHED = {
    "report": REPORT,
    "json": REPORT.replace("report.html", "comparison.json"),
    "published_at": "2026-11-24T16:30:00+01:00",
    "verdict": VERDICT,
}
NOTHING_YET = {"report": None, "json": None, "published_at": None, "verdict": None}
EMPTY_VIEW: dict[str, Any] = {
    "rows": [],
    "meta": {"architecture": "lambda", "view_version": None, "batch_cutoff": None,
             "speed_watermark": None, "quarantined": 0, "late_dropped": 0, "next_cursor": None},
}  # fmt: skip


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as chrome:
        yield chrome


def _open(
    browser: Any,
    comparison: dict[str, Any],
    view: str = "",
    matches: dict[str, dict[str, Any]] | None = None,
    asked: list[str] | None = None,
) -> Any:
    """The dashboard in a new page (at `#view` if given): the page and its assets from the app,
    `comparison` as `GET /v1/comparison`'s answer, every view empty, and `matches` per
    architecture as `GET /v1/views/{view}/matches`'s (its `status`, and its `body` if 200);
    the URL of every API request is added to `asked`."""
    client = _client()

    def answer(route: Any) -> None:
        url = urlsplit(route.request.url)
        path = url.path
        if path.startswith("/v1/") and asked is not None:
            asked.append(f"{path}?{url.query}")
        if path == "/v1/comparison":
            route.fulfill(status=200, json=comparison)
        elif path.startswith("/v1/views/") and path.endswith("/matches"):
            architecture = parse_qs(url.query)["architecture"][0]
            given = (matches or {}).get(architecture, {"status": 404})
            if given["status"] == 200:
                route.fulfill(status=200, json=given["body"], headers={"ETag": '"m"'})
            else:
                route.fulfill(status=given["status"], json={"detail": given.get("detail", "")})
        elif path.startswith("/v1/views/"):
            route.fulfill(status=200, json=EMPTY_VIEW, headers={"ETag": '"e"'})
        else:
            served = client.get(path)
            route.fulfill(
                status=served.status_code, headers=dict(served.headers), body=served.content
            )

    page = browser.new_page()
    page.route(f"{ORIGIN}/**", answer)
    page.goto(f"{ORIGIN}/{f'#{view}' if view else ''}")
    return page


def test_the_page_has_a_table_for_the_last_comparison() -> None:
    html = (DASHBOARD_DIR / "index.html").read_text()
    script = (DASHBOARD_DIR / "dashboard.js").read_text()
    assert 'id="comparison"' in html and "Lambda vs Kappa: last comparison" in html
    assert 'fetch("v1/comparison"' in script
    # The answer's text is shown as text, never parsed as HTML.
    assert "innerHTML" not in script and "insertAdjacentHTML" not in script


def test_the_verdict_shows_each_row_linked_to_its_figure_in_the_report(browser: Any) -> None:
    from playwright.sync_api import expect

    page = _open(browser, PUBLISHED)
    section = page.locator("#comparison")
    rows = section.locator("tbody tr")
    expect(rows).to_have_count(len(VERDICT))
    expect(section.locator("thead th")).to_have_text(
        ["question", "Lambda", "Kappa", "ahead", "by how much"]
    )
    for i, entry in enumerate(VERDICT):
        cells = rows.nth(i).locator("td")
        ahead = {"lambda": "Lambda", "kappa": "Kappa", "": "not measured"}[entry["ahead"]]
        expect(cells).to_have_text(
            [entry["question"], entry["lambda_figure"], entry["kappa_figure"], ahead, entry["by"]]
        )
        link = cells.first.locator("a")
        expect(link).to_have_attribute("href", f"{REPORT}#{entry['figure']}")
    # Text from the API stays text: no element was made of it.
    assert section.locator("tbody b, tbody i").count() == 0
    status = section.locator(".comparison-status")
    expect(status).to_have_text(
        "Published 2026-11-24 15:30:00 UTC: the report, its numbers (comparison.json)."
    )
    expect(status.get_by_role("link", name="the report")).to_have_attribute("href", REPORT)


def test_before_the_first_run_the_page_says_so(browser: Any) -> None:
    from playwright.sync_api import expect

    page = _open(browser, NOTHING_YET)
    section = page.locator("#comparison")
    expect(section.locator(".comparison-status")).to_have_text(
        "No comparison published yet: lk compare (or lk demo) runs one."
    )
    expect(section.locator(".table-wrap")).to_be_hidden()


def test_a_report_address_that_is_not_http_is_never_a_link(browser: Any) -> None:
    from playwright.sync_api import expect

    page = _open(browser, {**PUBLISHED, "report": "javascript:alert(1)"})
    section = page.locator("#comparison")
    expect(section.locator("tbody tr")).to_have_count(len(VERDICT))
    assert section.locator("tbody a").count() == 0
    assert section.get_by_role("link", name="the report").count() == 0


# --- a pattern view's matched patterns -----------------------------------------------------------


def _match(architecture: str, i: int) -> dict[str, Any]:
    """The `i`-th match of a page: a search at 10:0i, its click a minute later, its order at
    five minutes."""
    return {
        "query": "shoes",
        "window_start": "2026-11-01T10:00:00Z",
        "window_end": "2026-11-01T11:00:00Z",
        "search_id": f"{architecture}-s{i}",
        "user_id": f"u{i}",
        "search_ts": f"2026-11-01T10:{i:02d}:00Z",
        "click_ts": f"2026-11-01T10:{i + 1:02d}:00.250Z",
        "click_id": f"{architecture}-c{i}",
        "order_id": f"{architecture}-o{i}",
        "order_ts": f"2026-11-01T10:{i + 5:02d}:00.000Z",
    }


def _matches_page(architecture: str, count: int, more: bool) -> dict[str, Any]:
    meta = {**EMPTY_VIEW["meta"], "architecture": architecture,
            "next_cursor": "next" if more else None}  # fmt: skip
    rows = [_match(architecture, i) for i in range(count)]
    return {"status": 200, "body": {"view": "search_conversions", "matches": rows, "meta": meta}}


def _console(page: Any) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda exc: errors.append(f"uncaught: {exc}"))
    return errors


def test_a_pattern_views_matches_are_shown_per_architecture(browser: Any) -> None:
    from playwright.sync_api import expect

    asked: list[str] = []
    matches = {
        "lambda": _matches_page("lambda", MATCHES_SHOWN, more=True),
        "kappa": _matches_page("kappa", 2, more=False),
    }
    # Kappa's second: a search before midnight, its order after it (dated in full).
    late = {"search_ts": "2026-11-01T23:50:00Z", "click_ts": "2026-11-01T23:55:00Z",
            "order_ts": "2026-11-02T00:20:00Z"}  # fmt: skip
    matches["kappa"]["body"]["matches"][1].update(late)
    page = _open(browser, NOTHING_YET, "search_conversions", matches, asked)
    errors = _console(page)
    section = page.locator("#matches")
    expect(section).to_be_visible()
    expect(section.locator("h2")).to_contain_text(
        "the first 10 of each architecture's /v1/views/search_conversions/matches"
    )
    columns = ["query", "search_id", "click_id", "order_id", "search_ts", "click_ts", "order_ts"]
    for architecture, count, summary in (
        ("lambda", MATCHES_SHOWN, "the first 10 matches shown; more follow"),
        ("kappa", 2, "2 matches, all shown"),
    ):
        panel = section.locator(f"#matches-{architecture}")
        expect(panel.locator("h3 .name")).to_have_text(architecture.title())
        expect(panel.locator("thead th")).to_have_text(columns)
        expect(panel.locator("tbody tr")).to_have_count(count)
        expect(panel.locator(".summary")).to_have_text(summary)
        expect(panel.locator(".status")).to_contain_text("read at ")
        expect(panel.locator(".banner")).to_be_hidden()
        # The search's date once: the click and the order on its day read as times of day.
        expect(panel.locator("tbody tr").first.locator("td")).to_have_text(
            ["shoes", f"{architecture}-s0", f"{architecture}-c0", f"{architecture}-o0",
             "2026-11-01 10:00:00", "10:01:00.250", "10:05:00"]
        )  # fmt: skip
        # The architecture's own panel still shows the view alone (the integration test's
        # locators, `#lambda thead th`, stay the view's).
        expect(page.locator(f"#{architecture} thead th")).to_have_text(
            list(VIEWS["search_conversions"].columns)
        )
    expect(section.locator("#matches-kappa tbody tr").nth(1).locator("td").nth(4)).to_have_text(
        "2026-11-01 23:50:00"
    )
    expect(section.locator("#matches-kappa tbody tr").nth(1).locator("td").nth(5)).to_have_text(
        "23:55:00"
    )
    expect(section.locator("#matches-kappa tbody tr").nth(1).locator("td").nth(6)).to_have_text(
        "2026-11-02 00:20:00"
    )
    # The first page only, of each architecture, with no filter the dashboard does not set.
    asked_matches = {url for url in asked if "/matches?" in url}
    assert asked_matches == {
        f"/v1/views/search_conversions/matches?architecture={a}&limit={MATCHES_SHOWN}"
        for a in ("lambda", "kappa")
    }
    assert errors == []


def test_other_views_hide_the_matches_and_ask_for_none(browser: Any) -> None:
    from playwright.sync_api import expect

    asked: list[str] = []
    matches = {a: _matches_page(a, 3, more=False) for a in ("lambda", "kappa")}
    page = _open(browser, NOTHING_YET, "page_views", matches, asked)
    errors = _console(page)
    expect(page.locator("#lambda .status")).to_contain_text("read at ")
    expect(page.locator("#matches")).to_be_hidden()
    assert not any("/matches" in url for url in asked), asked
    page.locator("#view").select_option("search_conversions")
    expect(page.locator("#matches")).to_be_visible()
    expect(page.locator("#matches-kappa tbody tr")).to_have_count(3)
    page.locator("#view").select_option("sessions")
    expect(page.locator("#matches")).to_be_hidden()
    # A view's change empties the tables: the next pattern view starts from its own answer.
    expect(page.locator("#matches-kappa tbody tr")).to_have_count(0)
    assert errors == []


def test_a_failed_matches_poll_shows_a_banner_on_that_architecture_alone(browser: Any) -> None:
    from playwright.sync_api import expect

    down = "the serving store is unavailable: connection refused"
    matches = {
        "lambda": {"status": 503, "detail": down},
        "kappa": _matches_page("kappa", 0, more=False),
    }
    page = _open(browser, NOTHING_YET, "search_conversions", matches)
    lam, kappa = page.locator("#matches-lambda"), page.locator("#matches-kappa")
    expect(lam.locator(".banner")).to_have_text(f"{down}; retrying every 2 s")
    expect(lam).to_have_class(re.compile(r"\bstale\b"))
    expect(lam.locator(".status")).to_have_text("waiting for a first answer")
    expect(kappa.locator(".summary")).to_have_text("no match yet")
    expect(kappa.locator(".banner")).to_be_hidden()
    expect(kappa).not_to_have_class(re.compile(r"\bstale\b"))
