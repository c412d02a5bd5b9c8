"""Debian's Chromium, headless, driven through Playwright, for the tests of web pages (Airflow's
UI, the serving dashboard). Never `playwright install`: no browser is downloaded here."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from playwright.sync_api import Browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@contextmanager
def chromium() -> Iterator[Browser]:
    """A headless Chromium for the duration of the block (Playwright's sync API)."""
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "the UI tests drive Debian's chromium: apt install chromium"
    with sync_playwright() as playwright:
        # --no-sandbox: CI runs as root.
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            yield browser
        finally:
            browser.close()
