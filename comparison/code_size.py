"""How much code each architecture needs: lines of Python shared by both, or specific to one.

    size = measure(Path("."))    # a `CodeSize` for the report's `fig-code`

A line counts when it holds code: blank lines, comments and docstrings (a string standing alone
as a statement) do not, so a well documented module is not penalised. Multi-line strings that
are code (SQL, HTML) count line by line.

Where each room (top-level package) belongs, from docs/ARCHITECTURE.md:

- **shared**, written once and run by both architectures: `core` (the view logic, the store,
  the log), `stream_engine` (Lambda's speed layer and the Kappa job both run it), `quality`,
  `serving` (one API merges per architecture), `lk` (the CLI; its commands for one
  architecture are thin calls into that architecture's room, so the room counts as shared) and
  the DAG files other than one architecture's (`dags/data_quality.py`, `dags/lk_dags/`);
- **lambda**: `batch_layer` (archiver, batch job, cutoff), `speed_layer` (the hand-off) and
  `dags/lambda_*.py`;
- **kappa**: `kappa` (the job and its replay) and `dags/kappa_*.py`;
- **tooling**, shown but counted in neither: `tests`, `infra` (the local stack, the cluster,
  the images) and `comparison` itself, which measure or host the architectures but are not
  part of either.

A room not listed here is `unclassified` (counted in neither, and a unit test fails), so a new
room must be placed deliberately.
"""

from __future__ import annotations

import ast
import io
import subprocess
import tokenize
from pathlib import Path, PurePosixPath
from typing import Final

from comparison.figures import CodeSize

SHARED: Final = "shared"
LAMBDA: Final = "lambda"
KAPPA: Final = "kappa"
TOOLING: Final = "tooling"
UNCLASSIFIED: Final = "unclassified"

ROOMS: Final[dict[str, str]] = {
    "core": SHARED,
    "stream_engine": SHARED,
    "quality": SHARED,
    "serving": SHARED,
    "lk": SHARED,
    "dags": SHARED,
    "batch_layer": LAMBDA,
    "speed_layer": LAMBDA,
    "kappa": KAPPA,
    "tests": TOOLING,
    "infra": TOOLING,
    "comparison": TOOLING,
    ".ci": TOOLING,
}
TOP_LEVEL: Final = "(top level)"
"""The room of Python files at the root of the tree."""

_NOT_CODE: Final = frozenset(
    {
        tokenize.COMMENT,
        tokenize.NL,
        tokenize.NEWLINE,
        tokenize.INDENT,
        tokenize.DEDENT,
        tokenize.ENDMARKER,
        tokenize.ENCODING,
    }
)
_SKIPPED_DIRS: Final = frozenset({"__pycache__", "node_modules", "build", "dist"})


def code_lines(source: str) -> int:
    """Lines of `source` holding code: not blank, not only a comment, not a docstring."""
    lines: set[int] = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type not in _NOT_CODE:
                lines.update(range(token.start[0], token.end[0] + 1))
        tree = ast.parse(source)
    except (SyntaxError, tokenize.TokenError):  # a file being edited: a rougher count
        return sum(1 for line in source.splitlines() if line.strip()[:1] not in ("", "#"))
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Expr)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            lines.difference_update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return len(lines)


def room_of(path: PurePosixPath) -> tuple[str, str]:
    """(room, part) of a file given relative to the tree's root."""
    if len(path.parts) == 1:
        return TOP_LEVEL, UNCLASSIFIED
    top = path.parts[0]
    if top == "dags" and len(path.parts) == 2:  # one architecture's DAG files, by their name
        for part in (LAMBDA, KAPPA):
            if path.name.startswith(f"{part}_"):
                return f"dags/{part}_*", part
    return top, ROOMS.get(top, UNCLASSIFIED)


def python_files(root: Path) -> list[PurePosixPath]:
    """The tree's Python files relative to `root`: what git tracks or would (ignored files such
    as the virtualenv and caches left out); without git, a walk that skips hidden folders."""
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--", "*.py"],
            cwd=root,
            capture_output=True,
            check=True,
        ).stdout.decode()
    except (OSError, subprocess.CalledProcessError):
        # Not a work tree: an image's site-packages (beside every other package) or an archive.
        # Only the known rooms are the project's there; whichever of them it ships.
        return sorted(
            PurePosixPath(p.relative_to(root).as_posix())
            for room in ROOMS
            for p in (root / room).rglob("*.py")
            if not any(
                part.startswith(".") or part in _SKIPPED_DIRS
                for part in p.relative_to(root).parts[:-1]
            )
        )
    # A file deleted in the work tree but still in the index is gone: skip it.
    names = (name for name in listed.split("\0") if name)
    return sorted(PurePosixPath(n) for n in names if (root / n).is_file())


def measure(root: Path) -> CodeSize:
    """Lines of code per room of the tree at `root`, and the totals per part."""
    by_room: dict[str, dict[str, str | int]] = {}
    for path in python_files(root):
        room, part = room_of(path)
        entry = by_room.setdefault(room, {"part": part, "lines": 0})
        entry["lines"] = int(entry["lines"]) + code_lines(
            (root / path).read_text(encoding="utf-8", errors="replace")
        )
    totals = {SHARED: 0, LAMBDA: 0, KAPPA: 0}
    for entry in by_room.values():
        if entry["part"] in totals:
            totals[str(entry["part"])] += int(entry["lines"])
    return CodeSize(
        shared=totals[SHARED],
        lambda_only=totals[LAMBDA],
        kappa_only=totals[KAPPA],
        by_room=dict(sorted(by_room.items())),
    )
