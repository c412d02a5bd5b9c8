"""Lines of code per architecture (comparison.code_size): what counts as a line, where each
room belongs, and that the totals are the sums of their rooms, on a made tree and on ours."""

from __future__ import annotations

from pathlib import Path, PurePosixPath

import pytest

from comparison.code_size import (
    KAPPA,
    LAMBDA,
    SHARED,
    TOOLING,
    UNCLASSIFIED,
    code_lines,
    measure,
    room_of,
)

ROOT = Path(__file__).resolve().parents[2]

MODULE = '''"""A module docstring,
over two lines."""

import os  # a trailing comment: the line is code

# a comment line


class A:
    """A class docstring."""

    x: int = 1
    """An attribute's docstring."""

    def f(self) -> str:
        sql = """select 1
            from t"""
        return sql
'''


def test_a_line_counts_when_it_holds_code() -> None:
    # import, class, x, def, the two lines of the SQL string, return.
    assert code_lines(MODULE) == 7
    assert code_lines("") == 0
    assert code_lines("# only a comment\n\n") == 0


def test_a_file_that_does_not_parse_counts_its_lines_that_are_not_blank_or_comments() -> None:
    assert code_lines('"""doc"""\n\n# note\nx = (1 +\n') == 2
    assert code_lines("def f(:\n    pass\n") == 2


@pytest.mark.parametrize(
    ("path", "room", "part"),
    [
        ("core/views/partials.py", "core", SHARED),
        ("stream_engine/engine.py", "stream_engine", SHARED),
        ("batch_layer/job.py", "batch_layer", LAMBDA),
        ("speed_layer/lambda_speed.py", "speed_layer", LAMBDA),
        ("kappa/reprocess.py", "kappa", KAPPA),
        ("dags/lambda_batch.py", "dags/lambda_*", LAMBDA),
        ("dags/kappa_reprocess.py", "dags/kappa_*", KAPPA),
        ("dags/data_quality.py", "dags", SHARED),
        ("dags/lk_dags/lambda_like.py", "dags", SHARED),  # only the DAG files go by name
        ("tests/unit/test_x.py", "tests", TOOLING),
        ("infra/stack/stack.py", "infra", TOOLING),
        ("newroom/x.py", "newroom", UNCLASSIFIED),
        ("setup.py", "(top level)", UNCLASSIFIED),
    ],
)
def test_each_file_belongs_to_a_room_and_a_part(path: str, room: str, part: str) -> None:
    assert room_of(PurePosixPath(path)) == (room, part)


def test_a_tree_is_counted_per_room_and_totals_are_their_sums(tmp_path: Path) -> None:
    files = {
        "core/a.py": "x = 1\ny = 2\n",
        "core/sub/b.py": "# comment\nz = 3\n",
        "batch_layer/job.py": '"""doc"""\nrun = True\n',
        "dags/lambda_batch.py": "a = 1\n",
        "dags/kappa_reprocess.py": "b = 1\nc = 2\n",
        "dags/common.py": "d = 1\n",
        "kappa/job.py": "e = 1\n",
        "tests/test_a.py": "f = 1\n" * 10,
        ".venv/lib/site.py": "ignored = 1\n",
        "core/__pycache__/a.py": "ignored = 1\n",
        "pyspark/sql.py": "ignored = 1\n",  # another package beside ours (an image's site-packages)
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    size = measure(tmp_path)  # not a git work tree: our rooms only, without caches
    assert size.by_room == {
        "batch_layer": {"part": LAMBDA, "lines": 1},
        "core": {"part": SHARED, "lines": 3},
        "dags": {"part": SHARED, "lines": 1},
        "dags/kappa_*": {"part": KAPPA, "lines": 2},
        "dags/lambda_*": {"part": LAMBDA, "lines": 1},
        "kappa": {"part": KAPPA, "lines": 1},
        "tests": {"part": TOOLING, "lines": 10},
    }
    assert (size.shared, size.lambda_only, size.kappa_only) == (4, 2, 3)


def test_every_room_of_our_tree_is_classified_and_the_totals_add_up() -> None:
    size = measure(ROOT)
    packages = {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert packages <= set(size.by_room), packages - set(size.by_room)
    unclassified = [r for r, info in size.by_room.items() if info["part"] == UNCLASSIFIED]
    assert unclassified == []
    for part, total in (
        (SHARED, size.shared),
        (LAMBDA, size.lambda_only),
        (KAPPA, size.kappa_only),
    ):
        rooms = [int(i["lines"]) for i in size.by_room.values() if i["part"] == part]
        assert rooms and total == sum(rooms) > 0, part
    assert size.by_room["dags/lambda_*"]["part"] == LAMBDA
    assert size.by_room["dags/kappa_*"]["part"] == KAPPA
