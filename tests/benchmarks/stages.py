"""Where a Spark run's time goes, stage by stage: its event log read back, its jobs grouped by
their description (`core.spark.described`: the replay's history and the batch recompute name
each of their steps).

For each group: how long some job of it was running (the union of its jobs' spans: groups
that run at once, as the views' writes do, overlap), its tasks' time, their CPU and their
garbage collection. The run's seconds with no job running at all are the driver's own work
(the JVM's start, Python, planning, the commits to the store), which no task slot can share.

    uv run python -m tests.benchmarks.stages out/bench/events/5000000-kappa-reprocess
"""

from __future__ import annotations

import io
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import IO, Any, cast

UNDESCRIBED = "(no description)"
STREAM = "a stream's micro-batches:"
DELTA = "Delta: "


@dataclass(frozen=True)
class Stage:
    """The jobs of one description."""

    description: str
    jobs: int
    wall_seconds: float
    """The union of its jobs' spans, first submission to last completion with gaps left out."""
    task_seconds: float
    task_cpu_seconds: float
    gc_seconds: float
    spilled_bytes: int


@dataclass(frozen=True)
class Breakdown:
    """A run's stages, in the order they first started, and the run's own span."""

    stages: list[Stage]
    app_seconds: float
    """From the application's start to its end (or its last event)."""
    no_job_seconds: float
    """Of `app_seconds`, the time with no job running: the driver's own work."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "app_seconds": round(self.app_seconds, 1),
            "no_job_seconds": round(self.no_job_seconds, 1),
            "stages": [
                {k: round(v, 1) if isinstance(v, float) else v for k, v in asdict(s).items()}
                for s in self.stages
            ],
        }


def event_log(folder: Path) -> list[Path]:
    """The files of the one event log a driver wrote in `folder`, in order: Spark 4 writes a
    folder `eventlog_v2_<app>` of `events_<n>_<app>` files (rolling), a single file otherwise."""
    logs = [p for p in folder.iterdir() if not p.name.startswith(".")]
    if len(logs) != 1:
        raise ValueError(f"{folder}: expected one event log, found {len(logs)}")
    if logs[0].is_file():
        return logs
    parts = [p for p in logs[0].iterdir() if p.name.startswith("events_")]
    return sorted(parts, key=lambda p: int(p.name.split("_")[1]))


def read_events(paths: Iterable[Path]) -> Iterator[dict[str, Any]]:
    """The events of one log's files, a JSON document per line; `.zstd` is Spark's zstd
    compression (`core.spark.event_log_conf`)."""
    for path in paths:
        yield from _read_file(path)


def _read_file(path: Path) -> Iterator[dict[str, Any]]:
    with path.open("rb") as raw:
        stream: IO[bytes] = raw
        if path.suffix == ".zstd":
            import zstandard  # deferred: a bench dependency

            stream = cast("IO[bytes]", zstandard.ZstdDecompressor().stream_reader(raw))
        for line in io.TextIOWrapper(stream, encoding="utf-8"):
            if line.strip():
                yield json.loads(line)


def _description(properties: dict[str, Any]) -> str:
    """A job's stage: its description (`core.spark.described`'s "<phase>: <step>"), without
    what Delta adds around it ("Delta: <ours>: Filtering files for query" is part of ours)."""
    text = str(properties.get("spark.job.description") or "").strip()
    # A streaming query's own micro-batch jobs: "<query name>\nid = …\nrunId = …\nbatch = N".
    if text.startswith("id = ") or "\nid = " in text:
        name = text.split("\n", 1)[0] if not text.startswith("id = ") else ""
        return f"{STREAM} {name}".rstrip()
    while text.startswith(DELTA):
        text = text.removeprefix(DELTA)
    return ": ".join(text.split(": ")[:2]) or UNDESCRIBED


def _union_seconds(spans: Iterable[tuple[int, int]]) -> float:
    total, end = 0, None
    for start, stop in sorted(spans):
        if end is None or start > end:
            total += stop - start
            end = stop
        elif stop > end:
            total += stop - end
            end = stop
    return total / 1000


def breakdown(events: Iterable[dict[str, Any]]) -> Breakdown:
    """The stages of one run's events (`read_events`)."""
    app_start = app_end = None
    jobs: dict[int, tuple[str, int]] = {}  # job -> (description, submitted ms)
    spans: dict[str, list[tuple[int, int]]] = defaultdict(list)
    job_of_stage: dict[int, int] = {}
    tasks: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0, 0.0])
    first: dict[str, int] = {}
    for event in events:
        kind = event.get("Event")
        if kind == "SparkListenerApplicationStart":
            app_start = event["Timestamp"]
        elif kind == "SparkListenerApplicationEnd":
            app_end = event["Timestamp"]
        elif kind == "SparkListenerJobStart":
            name = _description(event.get("Properties") or {})
            jobs[event["Job ID"]] = (name, event["Submission Time"])
            first.setdefault(name, event["Submission Time"])
            for stage in event.get("Stage IDs", []):
                job_of_stage[stage] = event["Job ID"]
        elif kind == "SparkListenerJobEnd" and event["Job ID"] in jobs:
            name, submitted = jobs[event["Job ID"]]
            spans[name].append((submitted, event["Completion Time"]))
            app_end = max(app_end or 0, event["Completion Time"])
        elif kind == "SparkListenerTaskEnd" and event.get("Stage ID") in job_of_stage:
            metrics = event.get("Task Metrics") or {}
            name = jobs[job_of_stage[event["Stage ID"]]][0]
            totals = tasks[name]
            totals[0] += metrics.get("Executor Run Time", 0) / 1000
            totals[1] += metrics.get("Executor CPU Time", 0) / 1e9
            totals[2] += metrics.get("JVM GC Time", 0) / 1000
            totals[3] += metrics.get("Disk Bytes Spilled", 0) + metrics.get(
                "Memory Bytes Spilled", 0
            )
    stages = [
        Stage(
            description=name,
            jobs=len(spans[name]),
            wall_seconds=_union_seconds(spans[name]),
            task_seconds=tasks[name][0],
            task_cpu_seconds=tasks[name][1],
            gc_seconds=tasks[name][2],
            spilled_bytes=int(tasks[name][3]),
        )
        for name in sorted(first, key=first.__getitem__)
    ]
    start = app_start if app_start is not None else min(first.values(), default=0)
    app_seconds = ((app_end or start) - start) / 1000
    busy = _union_seconds(span for group in spans.values() for span in group)
    return Breakdown(stages, app_seconds, max(app_seconds - busy, 0.0))


def lines(result: Breakdown) -> list[str]:
    """`result` as a table for a terminal or a log."""
    out = [
        f"  {'stage':<58} {'jobs':>4} {'wall s':>7} {'task s':>7} {'CPU s':>7} {'GC s':>6}",
    ]
    for stage in result.stages:
        out.append(
            f"  {stage.description[:58]:<58} {stage.jobs:>4} {stage.wall_seconds:>7.1f} "
            f"{stage.task_seconds:>7.1f} {stage.task_cpu_seconds:>7.1f} {stage.gc_seconds:>6.1f}"
        )
    out.append(
        f"  the run {result.app_seconds:.1f} s, of which no job running "
        f"{result.no_job_seconds:.1f} s (the driver's own work)"
    )
    return out


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    for arg in args:
        path = Path(arg)
        result = breakdown(read_events(event_log(path) if path.is_dir() else [path]))
        print(f"{arg}:")
        print("\n".join(lines(result)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
