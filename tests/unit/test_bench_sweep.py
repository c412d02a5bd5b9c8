"""The bench's sweep without services: the sizes it reads, the file the report's figure reads
(its shape is a contract), and what it derives from the points."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from comparison.figures import read_sweep
from tests.benchmarks import run, sweep
from tests.benchmarks.report import machine
from tests.benchmarks.sweep import Point


def test_sizes_should_read_plain_underscored_and_scientific_numbers() -> None:
    assert sweep.parse_sizes("10000, 1e5,1_000_000,5e6") == (10_000, 100_000, 1_000_000, 5_000_000)


def test_sizes_should_come_ascending_and_once() -> None:
    assert sweep.parse_sizes("1e6,10000,1000000,") == (10_000, 1_000_000)


@pytest.mark.parametrize("text", ["", " , ", "ten", "0", "-5", "1.5", "2.5e0"])
def test_sizes_should_refuse_what_is_not_a_whole_positive_number(text: str) -> None:
    with pytest.raises(ValueError):
        sweep.parse_sizes(text)


def test_the_bench_should_take_the_sizes_and_name_the_committed_file_by_date() -> None:
    args = run.parse_args(["--steps", "sweep", "--sweep-sizes", "30000,1e4"])
    assert args.steps == ["sweep"]
    assert args.sweep_sizes == (10_000, 30_000)
    assert args.sweep_json.parent == run.ROOT / "docs" / "bench"
    assert args.sweep_json.name.startswith("sweep-20") and args.sweep_json.suffix == ".json"


def test_the_bench_should_refuse_bad_sizes_before_it_starts() -> None:
    with pytest.raises(SystemExit):
        run.parse_args(["--steps", "sweep", "--sweep-sizes", "lots"])


def _points() -> list[Point]:
    small, large = ({f"archive_{k}": v for k, v in a.items()} for a in (ARCHIVE_S, ARCHIVE_L))
    return [
        Point("lambda", 10_000, 41.24, 60.06, 1_234_567_890, small),
        Point("kappa", 10_000, 25.0, 30.0, 1_000_000_000),
        Point("lambda", 1_010_000, 141.24, 260.06, 2_000_000_000, large),
        Point("kappa", 1_010_000, 75.0, 130.0, 1_500_000_000),
    ]


ARCHIVE_S = {"seconds": 20.0, "cpu_seconds": 25.0}
ARCHIVE_L = {"seconds": 40.0, "cpu_seconds": 65.0}


def test_the_file_should_have_the_shape_the_report_reads(tmp_path: Path) -> None:
    host = {**machine(), "memory_gib": 23.4}
    path = tmp_path / "sweep.json"
    path.write_text(json.dumps(sweep.document("2026-11-28", host, _points())))
    read = json.loads(path.read_text())
    assert set(read) == {"date", "machine", "points"}
    assert read["date"] == "2026-11-28"
    assert set(read["machine"]) == {"cpus", "memory_gib", "kind"}
    assert read["machine"]["memory_gib"] == 23.4
    assert isinstance(read["machine"]["kind"], str) and read["machine"]["kind"]
    first = read["points"][0]
    assert first == {
        "architecture": "lambda",
        "events": 10_000,
        "seconds": 41.2,
        "cpu_seconds": 60.1,
        "peak_rss_bytes": 1_234_567_890,
        "archive_seconds": 20.0,
        "archive_cpu_seconds": 25.0,
        "cores": 1.46,
    }
    for point in read["points"]:
        assert point["architecture"] in ("lambda", "kappa")
        assert isinstance(point["events"], int) and isinstance(point["peak_rss_bytes"], int)
        assert isinstance(point["seconds"], float) and isinstance(point["cpu_seconds"], float)
    # The report's own reader takes it: the file's shape is the one `comparison` defines.
    read_back = read_sweep(read)
    assert read_back.date == "2026-11-28" and read_back.machine == read["machine"]
    assert [(p.architecture, p.events, p.seconds) for p in read_back.points] == [
        (p["architecture"], p["events"], p["seconds"]) for p in read["points"]
    ]
    assert [p.cores for p in read_back.points] == pytest.approx(
        [p["cores"] for p in read["points"]], abs=0.005
    )


def test_the_fixed_cost_should_be_the_smallest_log_and_the_rest_per_million() -> None:
    bigger = Point("lambda", 3_010_000, 161.24, 300.06, 2_000_000_000)
    assert sweep.costs([*_points(), bigger], "lambda") == {
        "at_events": 10_000,
        "fixed_seconds": 41.2,
        "fixed_cpu_seconds": 60.1,
        "per_million": [
            {"from": 10_000, "to": 1_010_000, "seconds": 100.0, "cpu_seconds": 200.0},
            {"from": 1_010_000, "to": 3_010_000, "seconds": 10.0, "cpu_seconds": 20.0},
        ],
    }
    assert sweep.costs(_points()[:2], "kappa")["per_million"] == []  # type: ignore[index]
    assert sweep.costs([], "kappa") is None


def test_the_summary_should_show_each_point_and_each_architectures_costs() -> None:
    lines = sweep.summary(_points())
    assert sum("lambda " in line and "archive 20.0s, 25.0 CPU-s" in line for line in lines) == 1
    assert any(
        line.strip() == "kappa: 25.0s, 30.0 CPU-s at 10,000 events; a million more: 10,000 to "
        "1,010,000: 50.0s, 100.0 CPU-s"
        for line in lines
    )
