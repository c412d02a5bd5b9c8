"""The sweep over history sizes the report draws (comparison.sweep): the latest file of a
folder (a parameter, the repository's docs/bench by default), read with its nulls; none yet is
no error; a broken file stops the run before it starts, naming the file and the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from comparison.errors import ComparisonError
from comparison.figures import ComparisonRun, SweepPoint
from comparison.sweep import BENCH_DIR, latest_sweep

SWEEP: dict[str, Any] = {
    "date": "2026-11-28",
    "machine": {"cpus": 2, "memory_gib": 23.4, "kind": "a shared VM"},
    "points": [
        {"architecture": "lambda", "events": 10_000, "seconds": 41.2, "cpu_seconds": 60.1,
         "peak_rss_bytes": 123_456_789},
        {"architecture": "kappa", "events": 10_000, "seconds": 18.5, "cpu_seconds": None,
         "peak_rss_bytes": None},
        {"architecture": "kappa", "events": 100_000, "seconds": 31.0},
    ],
}  # fmt: skip


def test_the_latest_sweep_of_the_folder_is_read_with_its_nulls(tmp_path: Path) -> None:
    older = {**SWEEP, "date": "2026-11-20", "points": SWEEP["points"][:1]}
    (tmp_path / "sweep-2026-11-20.json").write_text(json.dumps(older))
    (tmp_path / "sweep-2026-11-28.json").write_text(json.dumps(SWEEP))
    (tmp_path / "2026-11-29-5.1M.json").write_text("{}")  # another bench's file: not a sweep
    sweep = latest_sweep(tmp_path)
    assert sweep is not None
    assert (sweep.date, sweep.source) == ("2026-11-28", "sweep-2026-11-28.json")
    assert sweep.machine["kind"] == "a shared VM"
    assert sweep.points == [
        SweepPoint("lambda", 10_000, 41.2, 60.1, 123_456_789),
        SweepPoint("kappa", 10_000, 18.5, None, None),
        SweepPoint("kappa", 100_000, 31.0, None, None),
    ]
    # A run carries it into its JSON, and reads it back equal.
    run = ComparisonRun(created_at="2026-11-28T10:00:00Z", workload={}, sweep=sweep)
    assert ComparisonRun.read(run.write(tmp_path / "run.json")) == run


def test_no_sweep_yet_is_none(tmp_path: Path) -> None:
    assert latest_sweep(tmp_path) is None
    assert BENCH_DIR.name == "bench" and BENCH_DIR.parent.name == "docs"


def test_a_broken_sweep_names_its_file_and_field(tmp_path: Path) -> None:
    broken = {**SWEEP, "points": [{"architecture": "lambda", "seconds": 4.0}]}
    (tmp_path / "sweep-2026-11-28.json").write_text(json.dumps(broken))
    with pytest.raises(ComparisonError, match=r"sweep-2026-11-28\.json is not a sweep.*events"):
        latest_sweep(tmp_path)
    (tmp_path / "sweep-2026-11-29.json").write_text("{not json")
    with pytest.raises(ComparisonError, match=r"sweep-2026-11-29\.json is not a sweep"):
        latest_sweep(tmp_path)
