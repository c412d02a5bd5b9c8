"""`docs/CONTRACT.md` stays true: it names every path the API serves and every top-level `lk`
command, and numbers its sections as the shared contract (`../shared/CONTRACT.md`) does, so that
"CONTRACT §N" means the same section in either. The app is built, never started: no store."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.routing import APIRoute
from starlette.routing import Mount, Route

from core.settings import Settings
from lk.cli import cli
from serving.main import create_app

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "CONTRACT.md").read_text(encoding="utf-8")
SHARED = ROOT.parent / "shared" / "CONTRACT.md"

SECTION = re.compile(r"^## (\d+)\. (.+)$", re.MULTILINE)


def _named(method: str, path: str) -> bool:
    """`GET /v1/quality` appears, not only as the start of a longer path (`GET /` is not named
    by `GET /health`)."""
    return re.search(rf"\b{method} {re.escape(path)}(?![\w/{{])", DOC) is not None


def test_every_route_of_the_api_is_named() -> None:
    app = create_app(Settings())
    missing = []
    for route in app.routes:
        if isinstance(route, APIRoute | Route):
            # HEAD: Starlette answers it wherever it answers GET, for its own pages.
            missing += [
                f"{method} {route.path}"
                for method in sorted(set(route.methods or ()) - {"HEAD"})
                if not _named(method, route.path)
            ]
        elif isinstance(route, Mount) and f"{route.path}/" not in DOC:
            missing.append(f"{route.path}/ (mounted)")
    assert missing == []


def test_every_lk_command_is_named() -> None:
    assert sorted(cli.commands) != []
    assert [name for name in sorted(cli.commands) if f"`lk {name}" not in DOC] == []


def test_sections_are_numbered_as_the_shared_contract() -> None:
    shared = SECTION.findall(SHARED.read_text(encoding="utf-8"))
    assert shared != []
    assert SECTION.findall(DOC) == shared


def test_every_section_the_document_cites_exists() -> None:
    defined = {number for number, _ in SECTION.findall(DOC)}
    cited = set(re.findall(r"§(\d+)", DOC))
    assert cited - defined == set()
