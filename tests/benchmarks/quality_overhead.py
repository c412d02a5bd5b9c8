"""What the Great Expectations gates cost: their share of the Lambda batch run's wall time.

    uv run python -m tests.benchmarks.quality_overhead [--events 60000] [--rounds 2]

Runs `batch_layer.pipeline` as the `lambda_batch` DAG does (archive, raw gate, views, views gate,
publish) on a generated workload in a namespace of its own on the local stack (started if it is
not running, and then stopped again), `--rounds` times in one process. Round 1 pays Great
Expectations' import and project setup, as each Airflow task process does; later rounds show
the steady cost of the checks themselves. Each later round first produces the next hour of
events (at round 1's rate), as an hourly run finds them. Prints one line per step and round, and
the overhead as a share of both the batch job (gates + views) and the whole run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from core.settings import Settings, get_settings

GATES = ("validate_raw", "validate_views")
JOB = ("validate_raw", "compute_views", "validate_views")


def import_seconds() -> float:
    """`import great_expectations` in a fresh interpreter: what each task process pays once."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-c", "import great_expectations"],
        check=True,
        capture_output=True,
    )
    return time.monotonic() - started


def one_round(spark: Any, settings: Settings, run: str) -> dict[str, float]:
    from batch_layer import pipeline
    from lk.pipelines import publish_batch

    timings: dict[str, float] = {}

    def timed(name: str, call: Callable[[], Any]) -> Any:
        started = time.monotonic()
        value = call()
        timings[name] = time.monotonic() - started
        return value

    partitions = timed("close_archive", lambda: pipeline.close_archive(spark, settings))
    raw = timed("validate_raw", lambda: pipeline.validate_raw(spark, settings, run, partitions))
    version = timed("compute_views", lambda: pipeline.compute_views(spark, settings))
    timed("validate_views", lambda: pipeline.validate_views(spark, settings, version, run))
    timed("publish", lambda: publish_batch(settings, version))
    print(
        f"  {run}: {len(partitions)} partitions, {raw.rows:,} raw rows checked; "
        + ", ".join(f"{k} {v:.1f}s" for k, v in timings.items()),
        flush=True,
    )
    return timings


def shares(timings: dict[str, float]) -> dict[str, float]:
    gates = sum(timings[g] for g in GATES)
    job = sum(timings[s] for s in JOB)
    return {
        "gates_s": round(gates, 1),
        "job_s": round(job, 1),
        "run_s": round(sum(timings.values()), 1),
        "share_of_job": round(gates / job, 3),
        "share_of_run": round(gates / sum(timings.values()), 3),
    }


def _round_spec(events: int, seed: int, number: int) -> Any:
    """Round 1: the workload (4 hours of events). Later rounds: the next hour, at the same
    rate, as an hourly `lambda_batch` run finds it."""
    from core.workload import WorkloadSpec

    first = WorkloadSpec(seed=seed, events=events)
    if number == 1:
        return first
    hour = 3_600_000
    start = first.start_ms + int(first.hours * hour) + (number - 2) * hour
    return WorkloadSpec(
        seed=seed + number, events=max(1, int(events / first.hours)), start_ms=start, hours=1.0
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=60_000, help="Event lines in round 1.")
    parser.add_argument("--rounds", type=int, default=2, help="Batch runs in one process.")
    parser.add_argument("--seed", type=int, default=5)
    args = parser.parse_args(argv)

    from core import workload
    from core.kafka_io import produce_file
    from core.spark import build_spark_session
    from infra.stack import stack
    from tests.isolation import drop_isolated, isolated_settings

    base = get_settings()
    print("== stack", flush=True)
    running = {s.name for s in stack.services(base) if s.status().running}
    spark = settings = None
    report: dict[str, Any] = {"events": args.events, "rounds": []}
    try:
        stack.up(base, progress=lambda line: print(f"  {line}", flush=True))
        settings = isolated_settings(base, "dqbench")
        report["gx_import_s"] = round(import_seconds(), 1)
        print(f"  import great_expectations: {report['gx_import_s']}s", flush=True)
        spark = build_spark_session(settings, "lk-bench-quality")
        folder = Path(tempfile.mkdtemp(prefix="lk-dq-bench-"))
        for number in range(1, args.rounds + 1):
            spec = _round_spec(args.events, args.seed, number)
            events = spec.events
            out = folder / f"round{number}.jsonl"
            workload.generate(spec, out, workload.default_profiles_path(out))
            produce_file(settings, workload.default_profiles_path(out), settings.profiles_topic)
            produce_file(settings, out, settings.events_topic)
            print(f"== round {number}: {events:,} new event lines", flush=True)
            timings = one_round(spark, settings, f"bench-{number}")
            figures = {"new_events": events, **shares(timings)}
            figures["steps_s"] = {k: round(v, 1) for k, v in timings.items()}
            report["rounds"].append(figures)
            print(
                f"  gates {figures['gates_s']}s = {figures['share_of_job']:.1%} of the batch job "
                f"({figures['job_s']}s), {figures['share_of_run']:.1%} of the whole run "
                f"({figures['run_s']}s)",
                flush=True,
            )
    finally:
        if spark is not None:
            spark.stop()
        for problem in drop_isolated(base, settings) if settings is not None else []:
            print(f"  could not delete {problem}", flush=True)
        for service in reversed(stack.services(base)):
            if service.name not in running:
                service.stop()
    print(json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
