"""docs/ARCHITECTURE.md's table of rooms says which rooms each one imports: checked against the
import graph (grimp, import-linter's own), deferred imports included, so the two cannot drift."""

from __future__ import annotations

import re
import sys

import grimp
import pytest

from tests.conftest import ROOT

ROOMS_TABLE = re.compile(r"^\| `(\w+)/` \| .+ \| (.+) \|$", re.MULTILINE)
DAGS_PACKAGE = "lk_dags"  # dags/lk_dags: Airflow puts dags/ on its path


def _table() -> dict[str, str]:
    text = (ROOT / "docs" / "ARCHITECTURE.md").read_text()
    section = text.split("## Rooms", 1)[1].split("\n## ", 1)[0]
    return {room: imports for room, imports in ROOMS_TABLE.findall(section)}


def _room(module: str) -> str:
    top = module.split(".")[0]
    return "dags" if top == DAGS_PACKAGE else top


@pytest.fixture(scope="module")
def imported() -> dict[str, set[str]]:
    """Per room, the other rooms its modules import."""
    rooms = [room for room in _table() if room != "dags"]
    sys.path.insert(0, str(ROOT / "dags"))
    try:
        graph = grimp.build_graph(*rooms, DAGS_PACKAGE, include_external_packages=False)
    finally:
        sys.path.remove(str(ROOT / "dags"))
    found: dict[str, set[str]] = {room: set() for room in [*rooms, "dags"]}
    for module in graph.modules:
        for other in graph.find_modules_directly_imported_by(module):
            if _room(other) != _room(module):
                found[_room(module)].add(_room(other))
    return found


def test_the_table_names_every_room(imported: dict[str, set[str]]) -> None:
    assert set(_table()) == set(imported)


@pytest.mark.parametrize("room", sorted(_table()))
def test_a_room_imports_exactly_the_rooms_its_row_names(
    room: str, imported: dict[str, set[str]]
) -> None:
    said = _table()[room]
    if said == "everything":
        return  # the CLI composes every room
    named = set(re.findall(r"`(\w+)`", said.split(";")[0]))
    assert imported[room] == named, f"{room}/ imports {sorted(imported[room])}; the table: {said}"
