"""A live run of both architectures on one workload, ending in the report.

    outcome = run_comparison(settings, CompareSpec(events=6000, rate_per_s=100), echo)

The run has a namespace of its own on the stack (`Settings.namespaced` with
`RUN_PREFIX`<time>: its own topics, buckets and serving database), so the log holds exactly
the workload the oracle is computed from. Both architectures are deployed as the processes
the chart runs (`comparison.deployment`), the workload is produced at a steady rate
(`comparison.feed`), a sampler compares what each serves with the oracle every few seconds
(`comparison.sampler`), and the scenarios play in order (`comparison.scenarios`). The
components' output goes to log files, never to the terminal.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

import psutil

from comparison import chart_weight, code_size, stored
from comparison.context import Context
from comparison.deployment import Deployment
from comparison.errors import ComparisonError
from comparison.feed import Clock, SteadyFeed
from comparison.figures import ComparisonRun
from comparison.publish import publish
from comparison.report import write_report
from comparison.sampler import Sampler
from comparison.scenarios import PLAYS, SCENARIOS, warm_up
from comparison.sweep import BENCH_DIR, latest_sweep
from core import workload
from core.cdc import capture
from core.cdc.publish import publish_profiles
from core.oracle import load_profiles_jsonl
from core.provision import provision_all
from core.settings import Architecture, Settings
from core.store.connection import ensure_database

Echo = Callable[[str], None]
LIVE_MICRO_BATCH_S = 4.0
"""A live stream's micro-batch holds at most what the source produces in this long: a stream
reading as events arrive sees its watermark move between micro-batches (one that caught up
on everything at once would drop nothing as late)."""
QUICK_JIT: Final = (
    "-XX:TieredStopAtLevel=1 -XX:+DontCompileHugeMethods -XX:ReservedCodeCacheSize=240m"
)
"""The options a run gives its Spark drivers' JVMs unless `Settings.spark_driver_java_options`
sets others: the quick (C1) compiler alone, and huge methods left interpreted again (they come
after `core.spark`'s options, so they win). A run's JVMs live a few minutes on small
micro-batches and spend much of their CPU compiling, on two cores that the whole run shares;
measured alone on the default run's Lambda batch, 76-93 CPU-s became 57-62 over two runs each
(the whole run: docs/BENCHMARKS.md). Compiling the huge methods of the parse did not pay there:
the demo's Lambda recompute took 83 CPU-s with it, 68 without. A long run on a large workload
may want the optimising compiler back: `LK_SPARK_DRIVER_JAVA_OPTIONS=-XX:TieredStopAtLevel=4`.
The code cache keeps the tiered default's size: with the quick compiler alone HotSpot reserves
48 MB, a Lambda batch's driver filled it in a comparison test (then "Out of space in CodeCache
for adapters" killed its tasks), and the class archive's own training run fills 31 MB."""
ROOT = Path(__file__).resolve().parent.parent
RUN_PREFIX: Final = "cmp-"
"""Every run's namespace starts so: the chart grants its comparison Job the buckets
`<bucket>-cmp-*` (lk.minio.access), and a chart test holds the two together."""


@dataclass(frozen=True, slots=True)
class CompareSpec:
    seed: int = 7
    events: int = 6000
    rate_per_s: float = 100.0
    sample_every_s: float = 3.0
    scenarios: tuple[str, ...] = SCENARIOS
    moves: int = 1
    """Moves of segment-move, each its own commit to visible (p50 and p99 from several)."""
    out_dir: Path = Path("out/compare")
    serve_port: int | None = None
    """Run `lk serve` on this port for the run (the dashboard at `/`); None: no API process."""
    publish: bool = True
    job_timeout_s: float = 1800.0
    catch_up_timeout_s: float = 900.0
    sweep_dir: Path = BENCH_DIR
    """Where `make bench` commits its sweeps over history sizes (the report draws the latest)."""


@dataclass(frozen=True, slots=True)
class Outcome:
    run: ComparisonRun
    report: Path
    json: Path
    url: str | None
    settings: Settings
    """The run's namespace: `lk serve` with these answers for its data."""
    logs: Path
    notes: list[str] = field(default_factory=list)


def run_comparison(
    settings: Settings,
    spec: CompareSpec,
    echo: Echo,
    progress: Callable[[int, int], None] | None = None,
) -> Outcome:
    sweep = latest_sweep(spec.sweep_dir)  # first: a broken file stops the run before it starts
    name = f"{RUN_PREFIX}{datetime.now(UTC):%Y%m%d%H%M%S}"
    java_options = settings.spark_driver_java_options or QUICK_JIT
    ns = settings.namespaced(name).model_copy(
        update={"architecture": Architecture.BOTH, "spark_driver_java_options": java_options}
    )
    out = spec.out_dir / name
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    echo(f"== namespace {name}: its own topics, buckets and serving database")
    ensure_database(ns)
    for line in provision_all(ns):
        echo(f"  {line}")

    events_file = out / "events.jsonl"
    profiles_file = workload.default_profiles_path(events_file)
    stats = workload.generate(
        workload.WorkloadSpec(
            seed=spec.seed, events=spec.events, watermark_delay_ms=ns.watermark_delay_ms
        ),
        events_file,
        profiles_file,
    )
    echo(f"== workload: seed {spec.seed}, {spec.events:,} event lines")
    for line in workload.summary(stats).splitlines():
        echo(f"  {line}")
    # The run's own user table, captured by a connector of its own (its slot, dropped at the
    # end, would otherwise hold WAL for ever).
    with capture.running(ns):
        echo(f"  profiles: {publish_profiles(ns, profiles_file)}")

        run = ComparisonRun(
            created_at=datetime.now(UTC).isoformat(timespec="seconds"),
            workload={
                "seed": spec.seed,
                "events": spec.events,
                "rate_per_s": spec.rate_per_s,
                "duration_s": spec.events / spec.rate_per_s,
                "namespace": name,
                "watermark_delay_minutes": ns.watermark_delay_minutes,
                "sample_every_s": spec.sample_every_s,
                "late_events": stats.late_events,
                "event_time_span_s": _event_time_span_s(stats),
                "cpus": os.cpu_count(),
                "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
            },
            sweep=sweep,
            log_file=str(logs),
        )
        clock = Clock()
        lines = [
            line for line in events_file.read_bytes().splitlines(keepends=True) if line.strip()
        ]
        feed = SteadyFeed(ns, lines, spec.rate_per_s, clock)
        sampler = Sampler(ns, clock, feed, load_profiles_jsonl(profiles_file), spec.sample_every_s)
        deployment = Deployment(
            ns, logs, spec.serve_port, max(50, round(spec.rate_per_s * LIVE_MICRO_BATCH_S))
        )
        echo(f"== deploying both architectures as processes (their logs: {logs})")
        deployed_at = clock.now()
        deployment.start()
        if spec.serve_port is not None:
            echo(f"  the dashboard: http://{ns.host}:{spec.serve_port}/")
        ctx = Context(
            ns, clock, deployment, feed, sampler, run, profiles_file, echo,
            spec.job_timeout_s, spec.catch_up_timeout_s, deployed_at,
        )  # fmt: skip
        ctx.moves = spec.moves
        if progress is not None:
            ctx.progress = progress
        sampler.start()
        try:
            warm_up(ctx)
            for scenario in spec.scenarios:
                PLAYS[scenario](ctx)
        finally:
            sampler.stop()
            deployment.stop()
            for restart in deployment.restarted:
                echo(f"  restarted, as its Deployment would be: {restart}")

        run.samples = sampler.samples
        run.freshness = sampler.freshness()
        run.cost = deployment.costs()
        run.stored = stored.measure(ns)
        try:
            run.chart_weight = chart_weight.measure()
        except ComparisonError as exc:  # the app image has no Helm SDK: the figure says so
            echo(f"  the chart's weight is not measured here: {exc}")
        run.code = code_size.measure(ROOT)
        report, json_file = write_report(run, out)
        url = publish(settings, out) if spec.publish else None
        return Outcome(run, report, json_file, url, ns, logs)


def _event_time_span_s(stats: workload.WorkloadStats) -> float | None:
    """The event time the workload spans, first to last event (seconds)."""
    if stats.first_event_ts is None or stats.last_event_ts is None:
        return None
    return (stats.last_event_ts - stats.first_event_ts) / 1000
