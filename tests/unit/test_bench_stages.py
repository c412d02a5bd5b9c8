"""Where a run's time goes, stage by stage (`tests/benchmarks/stages.py`), read from Spark's own
event log, and the job descriptions it groups by (`core.spark.described`).

The sample is an event log Spark 4 wrote (`local[2]`, trimmed to the events the breakdown
reads): one described job group, two described groups run at once from two threads, and
jobs with no description.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING

from core.spark import described
from tests.benchmarks.stages import (
    STREAM,
    UNDESCRIBED,
    breakdown,
    event_log,
    lines,
    read_events,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SAMPLE = Path(__file__).parent / "data" / "spark4-event-log-sample.zstd"


def test_a_spark_event_log_is_broken_down_by_job_description() -> None:
    result = breakdown(read_events([SAMPLE]))
    by_name = {stage.description: stage for stage in result.stages}
    assert list(by_name) == ["sample: read", "sample: write a", "sample: write b", UNDESCRIBED]
    assert [by_name[n].jobs for n in by_name] == [2, 3, 3, 2]
    for stage in result.stages:  # Spark's task metrics were read, in seconds
        assert 0 < stage.task_cpu_seconds <= stage.task_seconds, stage
        assert 0 < stage.wall_seconds <= result.app_seconds, stage
    # The two writes ran at once: the time with no job running is what their union leaves.
    busy = result.app_seconds - result.no_job_seconds
    assert busy < sum(stage.wall_seconds for stage in result.stages)
    assert 0 < result.no_job_seconds < result.app_seconds
    table = lines(result)
    assert len(table) == len(result.stages) + 2 and "no job running" in table[-1]
    assert result.as_dict()["stages"][0]["description"] == "sample: read"


def test_overlapping_jobs_of_one_stage_count_once() -> None:
    def job(number: int, start: int, end: int) -> list[dict[str, object]]:
        return [
            {
                "Event": "SparkListenerJobStart",
                "Job ID": number,
                "Submission Time": start,
                "Stage IDs": [number],
                "Properties": {"spark.job.description": "s"},
            },
            {"Event": "SparkListenerJobEnd", "Job ID": number, "Completion Time": end},
        ]

    events = [
        {"Event": "SparkListenerApplicationStart", "Timestamp": 0},
        *job(0, 1_000, 3_000),
        *job(1, 2_000, 4_000),  # overlaps job 0
        *job(2, 6_000, 7_000),
        {"Event": "SparkListenerApplicationEnd", "Timestamp": 10_000},
    ]
    result = breakdown(events)
    assert [(s.description, s.jobs, s.wall_seconds) for s in result.stages] == [("s", 3, 4.0)]
    assert (result.app_seconds, result.no_job_seconds) == (10.0, 6.0)


def test_jobs_delta_and_a_stream_start_for_a_step_count_in_that_step() -> None:
    def job(number: int, description: str) -> list[dict[str, object]]:
        return [
            {
                "Event": "SparkListenerJobStart",
                "Job ID": number,
                "Submission Time": number * 1_000,
                "Stage IDs": [number],
                "Properties": {"spark.job.description": description},
            },
            {"Event": "SparkListenerJobEnd", "Job ID": number, "Completion Time": number * 1_000},
        ]

    descriptions = [
        "batch recompute: write page_views",
        "Delta: Delta: batch recompute: write page_views: Filtering files for query",
        "kappa-v2\nid = 1138\nrunId = 42\nbatch = 0",
        "id = 1138\nrunId = 42\nbatch = 1",
        "",
    ]
    events = [event for n, text in enumerate(descriptions) for event in job(n, text)]
    assert [(s.description, s.jobs) for s in breakdown(events).stages] == [
        ("batch recompute: write page_views", 2),
        (f"{STREAM} kappa-v2", 1),
        (STREAM, 1),
        (UNDESCRIBED, 1),
    ]


def test_a_rolling_event_log_is_read_in_the_order_of_its_files(tmp_path: Path) -> None:
    log = tmp_path / "eventlog_v2_local-1"
    log.mkdir()
    for n in (10, 2, 1):
        (log / f"events_{n}_local-1").write_text("")
    (log / "appstatus_local-1").write_text("")
    assert [p.name for p in event_log(tmp_path)] == [
        "events_1_local-1",
        "events_2_local-1",
        "events_10_local-1",
    ]


def test_a_description_is_the_calling_threads_and_comes_back_after(spark: SparkSession) -> None:
    context = spark.sparkContext
    seen: list[str | None] = []

    def other_thread() -> None:
        seen.append(context.getLocalProperty("spark.job.description"))

    with described(spark, "outer"):
        with described(spark, "inner"):
            assert context.getLocalProperty("spark.job.description") == "inner"
            thread = threading.Thread(target=other_thread)
            thread.start()
            thread.join()
        assert context.getLocalProperty("spark.job.description") == "outer"
    assert context.getLocalProperty("spark.job.description") is None
    assert seen == [None]
