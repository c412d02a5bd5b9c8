"""The live dashboard (`GET /` of `lk serve`) in Debian's Chromium, on both architectures'
real output: it shows Lambda and Kappa side by side, updates once events are produced and
processed, follows the chosen view (a pattern view's first matches under it), and shows a
banner per architecture while the store is down, recovering by itself once it is back; below,
the last comparison's verdict once one is published (`GET /v1/comparison`).

The stream jobs (Lambda's speed layer, Kappa's version 1) run on the shared stack, on topics
and buckets of this module's own, and write to a Postgres of this module's own, so stopping it
is a real store outage that disturbs no other test. The tests run in file order on one page and
one `lk serve`, from an empty store on. `LK_SCREENSHOTS=1` saves the page with data to
docs/images/dashboard.png.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import workload
from core.catalog import MATCH_SPECS, VIEW_NAMES, VIEWS
from core.kafka_io import produce_file
from core.settings import Settings
from core.store import comparison_reports
from core.store.connection import connect, ensure_schema
from infra.stack.postgres import Postgres
from serving.api.routes.dashboard import MATCHES_SHOWN, match_columns, window_text
from tests.browser import chromium
from tests.conftest import ROOT
from tests.integration.helpers import isolated_settings, settings_env
from tests.serving_pages import read_whole

SCREENSHOT = ROOT / "docs" / "images" / "dashboard.png"
UPDATE_TIMEOUT_MS = 30_000  # a few polls (2 s) and a whole answer read
RECOVERY_TIMEOUT_MS = 60_000  # the pool's reconnection backs off while the store is down
STORE_DOWN_CONSOLE = "the server responded with a status of 503"
TABLE_ROWS = 50  # the rows a panel's table shows (dashboard.js)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Deployment:
    settings: Settings
    store: Postgres
    events: Path  # a generated workload, produced by test_the_page_follows_the_events_...
    profiles: Path


@pytest.fixture(scope="module")
def deployment(
    stack: Settings, stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Deployment]:
    """Topics and buckets of its own on the stack, an own store with its tables, no event yet."""
    home = Path(tempfile.mkdtemp(prefix="lk-dashboard-"))
    home.chmod(0o755)  # Postgres runs as `postgres` when the tests run as root
    shared = isolated_settings(stack, "dashboard")
    settings = shared.model_copy(update={"postgres_port": _free_port()})
    store = Postgres(
        Settings(
            home=home,
            stack_dir=home / "stack",
            cache_dir=Path(stack_env["LK_CACHE_DIR"]),
            postgres_port=settings.postgres_port,
            postgres_db=settings.postgres_db,
        )
    )
    try:
        store.up()  # the database and the serving login
        ensure_schema(settings)  # the tables, as `lk init` creates them
        events = tmp_path_factory.mktemp("dashboard") / "events.jsonl"
        profiles = workload.default_profiles_path(events)
        workload.generate(workload.WorkloadSpec(seed=23, events=1500), events, profiles)
        yield Deployment(settings, store, events, profiles)
    finally:
        store.stop()
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def api(
    deployment: Deployment, stack_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`lk serve` on the deployment's store, as a user runs it; its base URL."""
    port = _free_port()
    env = {**os.environ, **stack_env, **settings_env(deployment.settings)}
    log = tmp_path_factory.mktemp("serve") / "serve.log"
    lk = Path(sys.executable).with_name("lk")
    command = [str(lk), "serve", "--port", str(port), "--workers", "1"]
    with log.open("w") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, log.read_text()
            try:
                if httpx.get(f"{base}/health", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.2)
        yield base
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait(timeout=30)


@dataclass
class Browser:
    page: Any  # playwright.sync_api.Page
    console_errors: list[str]  # console messages of type error, and uncaught exceptions


@pytest.fixture(scope="module")
def browser(api: str) -> Iterator[Browser]:
    with chromium() as chrome:
        page = chrome.new_page(viewport={"width": 1400, "height": 720})
        seen = Browser(page, [])

        def console(message: Any) -> None:
            if message.type == "error":
                seen.console_errors.append(message.text)

        page.on("console", console)
        page.on("pageerror", lambda exc: seen.console_errors.append(f"uncaught: {exc}"))
        page.goto(f"{api}/")
        yield seen


def _served(api: str, view: str, architecture: str) -> str:
    """The summary line the page must show for the API's current answer."""
    with httpx.Client(base_url=api, timeout=30) as client:
        rows = read_whole(client.get, view, architecture=architecture)["rows"]
    value = VIEWS[view].values[0]
    total = sum(row[value] for row in rows)
    shown = f"; the first {TABLE_ROWS} are shown" if len(rows) > TABLE_ROWS else ""
    return f"{len(rows):,} rows, total {value} {total:,}{shown}"


def _expect_served(browser: Browser, api: str, view: str, timeout_ms: float) -> dict[str, str]:
    from playwright.sync_api import expect

    summaries = {}
    for architecture in ("lambda", "kappa"):
        summaries[architecture] = _served(api, view, architecture)
        panel = browser.page.locator(f"#{architecture}")
        expect(panel.locator(".summary")).to_have_text(summaries[architecture], timeout=timeout_ms)
    return summaries


def test_the_page_shows_both_architectures_before_any_event(browser: Browser, api: str) -> None:
    from playwright.sync_api import expect

    page = browser.page
    expect(page.locator("#view")).to_have_value("page_views")
    assert _expect_served(browser, api, "page_views", UPDATE_TIMEOUT_MS) == {
        "lambda": "0 rows, total count 0",
        "kappa": "0 rows, total count 0",
    }
    for architecture, title in (("lambda", "Lambda"), ("kappa", "Kappa")):
        panel = page.locator(f"#{architecture}")
        expect(panel.locator("h2 .name")).to_have_text(title)
        expect(panel.locator(".banner")).to_be_hidden()
        expect(panel.locator('[data-meta="view_version"]')).to_have_text("none published yet")
        expect(panel.locator("thead th")).to_have_text(list(VIEWS["page_views"].columns))
        expect(panel.locator("tbody tr")).to_have_count(0)
        expect(panel.locator(".chart canvas")).to_have_count(2)
        # Unchanged answers are revalidated with the ETag: 304s, and no rows read.
        expect(panel.locator(".status")).to_contain_text(
            re.compile(r"since then [1-9]\d* unchanged \(304\)"), timeout=10_000
        )
    comparison = page.locator("#comparison")
    expect(comparison.locator(".comparison-status")).to_have_text(
        "No comparison published yet: lk compare (or lk demo) runs one."
    )
    expect(comparison.locator("tbody tr")).to_have_count(0)
    assert browser.console_errors == []


def test_the_page_follows_the_events_as_they_are_processed(
    browser: Browser, api: str, deployment: Deployment, spark: Any
) -> None:
    from playwright.sync_api import expect

    from kappa.job import KappaViews
    from speed_layer.lambda_speed import SpeedLayer

    settings = deployment.settings
    produce_file(settings, deployment.profiles, settings.profiles_topic)
    produce_file(settings, deployment.events, settings.events_topic)
    # Lambda before its first batch serves its speed layer alone (the batch, minutes of Spark
    # here, changes nothing on the page); Kappa publishes version 1 at its first start.
    SpeedLayer(spark, settings).drain()
    KappaViews(spark, settings).drain()

    served = _expect_served(browser, api, "page_views", UPDATE_TIMEOUT_MS)
    assert all(line.endswith(f"the first {TABLE_ROWS} are shown") for line in served.values())
    lam, kappa = browser.page.locator("#lambda"), browser.page.locator("#kappa")
    expect(lam.locator('[data-meta="stream"]')).to_have_text("lambda-speed")
    expect(lam.locator('[data-meta="speed_watermark"]')).to_have_text(
        re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(\.\d{3})?$")
    )
    expect(kappa.locator('[data-meta="view_version"]')).to_have_text("1")
    expect(kappa.locator('[data-meta="stream"]')).to_have_text("kappa-v1")
    expect(kappa.locator('[data-meta="batch_cutoff"]')).to_have_text("none (no batch layer)")
    for panel in (lam, kappa):
        expect(panel.locator("tbody tr")).to_have_count(TABLE_ROWS)
        expect(panel.locator('[data-meta="quarantined"]')).not_to_have_text("0")
    assert browser.console_errors == []
    if os.environ.get("LK_SCREENSHOTS") == "1":
        browser.page.wait_for_timeout(6000)  # a few more polls after the step in the charts
        SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
        browser.page.screenshot(path=str(SCREENSHOT), full_page=True)


def test_switching_the_view_shows_its_rows(browser: Browser, api: str) -> None:
    from playwright.sync_api import expect

    page = browser.page
    for view in [*VIEW_NAMES[1:], VIEW_NAMES[0]]:
        page.locator("#view").select_option(view)
        assert page.url.endswith(f"#{view}")
        # What a row spans: a window (hopping ones overlap), a session, or no time at all.
        expect(page.locator("#window")).to_have_text(window_text(VIEWS[view]))
        _expect_served(browser, api, view, UPDATE_TIMEOUT_MS)
        value = VIEWS[view].values[0]
        for architecture in ("lambda", "kappa"):
            panel = page.locator(f"#{architecture}")
            expect(panel.locator("thead th")).to_have_text(list(VIEWS[view].columns))
            expect(panel.locator(".u-title").first).to_have_text(f"total {value}")
        _expect_matches(browser, api, view)
    assert browser.console_errors == []


def _expect_matches(browser: Browser, api: str, view: str) -> None:
    """A pattern view's section of matches: each architecture's first page, as many rows as
    the API's; hidden for any other view."""
    from playwright.sync_api import expect

    section = browser.page.locator("#matches")
    if view not in MATCH_SPECS:
        expect(section).to_be_hidden()
        return
    expect(section).to_be_visible()
    with httpx.Client(base_url=api, timeout=30) as client:
        for architecture in ("lambda", "kappa"):
            params = {"architecture": architecture, "limit": MATCHES_SHOWN}
            answer = client.get(f"/v1/views/{view}/matches", params=params)
            assert answer.status_code == 200, answer.text
            panel = section.locator(f"#matches-{architecture}")
            expect(panel.locator("thead th")).to_have_text(list(match_columns(MATCH_SPECS[view])))
            expect(panel.locator("tbody tr")).to_have_count(
                len(answer.json()["matches"]), timeout=UPDATE_TIMEOUT_MS
            )
            expect(panel.locator(".banner")).to_be_hidden()


def test_a_store_outage_shows_a_banner_per_architecture_and_recovers(
    browser: Browser, api: str, deployment: Deployment
) -> None:
    from playwright.sync_api import expect

    page = browser.page
    served = _expect_served(browser, api, "page_views", UPDATE_TIMEOUT_MS)
    deployment.store.stop()
    try:
        for architecture in ("lambda", "kappa"):
            panel = page.locator(f"#{architecture}")
            banner = panel.locator(".banner")
            expect(banner).to_be_visible(timeout=UPDATE_TIMEOUT_MS)
            expect(banner).to_contain_text("the serving store is unavailable: ")
            expect(banner).to_contain_text("retrying every 2 s")
            # The last answer read stays on screen, marked stale.
            expect(panel).to_have_class(re.compile(r"\bstale\b"))
            expect(panel.locator(".summary")).to_have_text(served[architecture])
    finally:
        deployment.store.up()
    for architecture in ("lambda", "kappa"):
        panel = page.locator(f"#{architecture}")
        expect(panel.locator(".banner")).to_be_hidden(timeout=RECOVERY_TIMEOUT_MS)
        expect(panel).not_to_have_class(re.compile(r"\bstale\b"))
    assert _expect_served(browser, api, "page_views", UPDATE_TIMEOUT_MS) == served
    # The page's only complaints were the browser's own lines about the 503 answers.
    unexpected = [text for text in browser.console_errors if STORE_DOWN_CONSOLE not in text]
    assert unexpected == [] and browser.console_errors, browser.console_errors


def test_the_last_comparisons_verdict_is_shown_linked_to_its_report(
    browser: Browser, api: str, deployment: Deployment
) -> None:
    """Published as `comparison.publish` records it; a page opened since shows it (an open
    page reads it again within a minute)."""
    from playwright.sync_api import expect

    from comparison.verdict import verdict
    from tests.unit.test_comparison_report import synthetic_run

    report = "http://127.0.0.1:9000/lk-dq/comparison/20261124T153000Z/report.html"
    rows = [asdict(row) for row in verdict(synthetic_run())]
    with connect(deployment.settings) as conn:
        comparison_reports.record_report(
            conn, report, report.replace("report.html", "comparison.json"), rows
        )
    with httpx.Client(base_url=api, timeout=30) as client:
        assert client.get("/v1/comparison").json()["verdict"] == rows
    chrome = browser.page.context.browser  # a page of its own: the module's page stays as it is
    assert chrome is not None
    page = chrome.new_page()
    try:
        page.goto(f"{api}/")
        table = page.locator("#comparison tbody tr")
        expect(table).to_have_count(len(rows), timeout=UPDATE_TIMEOUT_MS)
        for i, row in enumerate(rows):
            cells = table.nth(i).locator("td")
            ahead = {"lambda": "Lambda", "kappa": "Kappa"}.get(row["ahead"], row["ahead"])
            expect(cells).to_have_text(
                [row["question"], row["lambda_figure"], row["kappa_figure"], ahead, row["by"]]
            )
            expect(cells.first.locator("a")).to_have_attribute("href", f"{report}#{row['figure']}")
        expect(page.locator("#comparison .comparison-status")).to_contain_text("the report")
    finally:
        page.close()
