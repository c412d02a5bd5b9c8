"""Bench step `sweep`: what reprocessing costs as the log grows, each run a cold Spark
application, so that its fixed cost shows beside its cost per event.

For each size (lines in the log; default 10,000, 100,000, 1M, 5M and 20M), a namespace of its
own gets that many lines (`workload.generate_and_produce`, as the `workload` step), then each
architecture reprocesses the whole log, every part an `lk` command in a process of its own
(`comparison.processes`: the process tree's CPU-seconds, the driver and its JVM, and the
peak of its resident memory, sampled every 0.5 s), as an operator or the chart starts them:

- Lambda: `lk archive --available-now` drains the log into the master dataset (reported apart:
  a deployment archives continuously, ahead of any recompute); then the recompute, from the
  start of `lk batch --drain` (both quality gates, the five views, the version marked ready)
  to the end of `lk step publish` (the hand-off that moves readers to it; no Spark).
- Kappa: `lk reprocess --architecture kappa`: a new version replayed from offset 0 (the log up
  to its end as one micro-batch on Spark's task slots, `stream_engine.history`, then what
  arrived meanwhile in micro-batches of `stream_max_offsets_per_trigger` records), checked,
  and readers switched to it (`kappa.reprocess.Reprocess`, as the `replay` step runs it warm).

Each point has its wall time, the CPU-seconds and peak memory of its drivers (the process
tree: Python, its JVM, Spark's tasks in it), the average number of cores they kept busy
(CPU-seconds over wall time), and the stack's services' CPU beside it. The drivers run with
the namespace's settings as the chart would, the JVM's default compilers. The points are written
to the bench's JSON and to `docs/bench/sweep-<date>.json` (`document`: the shape the report's
figure reads). Each Spark driver writes its event log under the bench's logs, and each point
holds where its time went, stage by stage (`tests.benchmarks.stages`: the jobs by their
description), in `stages`.
"""

from __future__ import annotations

import json
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import pairwise
from pathlib import Path
from typing import TYPE_CHECKING, Any

from comparison.processes import Finished, LkProcess, run_to_end
from core.settings import Architecture, Settings
from tests.benchmarks import stages
from tests.benchmarks.report import GIB, machine
from tests.benchmarks.workload import generate_and_produce
from tests.isolation import settings_env

if TYPE_CHECKING:
    from tests.benchmarks.rss import RssSampler

DEFAULT_SIZES = (10_000, 100_000, 1_000_000, 5_000_000, 20_000_000)
JOB_TIMEOUT_S = 3600.0
ARCHITECTURES = ("lambda", "kappa")
OTHER = "workload and cleanup"
"""The bench step of what a size does besides its runs, so that no run's CPU includes it."""


def parse_sizes(text: str) -> tuple[int, ...]:
    """`10000,1e5,1_000_000` -> (10000, 100000, 1000000): ascending, each once."""
    sizes = set()
    for part in text.split(","):
        word = part.strip().replace("_", "")
        if not word:
            continue
        try:
            value = float(word)
        except ValueError:
            raise ValueError(f"not a number of events: {part.strip()!r}") from None
        if value < 1 or value != int(value):
            raise ValueError(f"not a whole, positive number of events: {part.strip()!r}")
        sizes.add(int(value))
    if not sizes:
        raise ValueError("no size given")
    return tuple(sorted(sizes))


@dataclass(frozen=True)
class Point:
    """One architecture's reprocessing of one log: wall time, CPU and peak memory of its
    drivers (a Lambda point's archive is apart, in `extra`)."""

    architecture: str
    events: int
    seconds: float
    cpu_seconds: float
    peak_rss_bytes: int
    extra: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return {
            "architecture": self.architecture,
            "events": self.events,
            "seconds": round(self.seconds, 1),
            "cpu_seconds": round(self.cpu_seconds, 1),
            "cores": round(self.cores, 2),
            "peak_rss_bytes": self.peak_rss_bytes,
            **self.extra,
        }

    @property
    def cores(self) -> float:
        """The cores its drivers kept busy, on average."""
        return self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0


def document(day: str, host: dict[str, Any], points: Iterable[Point]) -> dict[str, Any]:
    """The committed file's shape: `date`, `machine` (cpus, memory_gib, kind), `points`."""
    return {
        "date": day,
        "machine": {key: host[key] for key in ("cpus", "memory_gib", "kind")},
        "points": [point.as_dict() for point in points],
    }


def costs(points: Sequence[Point], architecture: str) -> dict[str, Any] | None:
    """What the smallest log costs (next to nothing to process: the fixed cost of a cold run),
    and what each further million events costs from one size to the next (not one slope: a
    replay's cost per event grows with its state, a batch's shrinks as its fixed work spreads)."""
    mine = sorted((p for p in points if p.architecture == architecture), key=lambda p: p.events)
    if not mine:
        return None
    return {
        "at_events": mine[0].events,
        "fixed_seconds": round(mine[0].seconds, 1),
        "fixed_cpu_seconds": round(mine[0].cpu_seconds, 1),
        "per_million": [
            {
                "from": a.events,
                "to": b.events,
                "seconds": round((b.seconds - a.seconds) * 1e6 / (b.events - a.events), 1),
                "cpu_seconds": round(
                    (b.cpu_seconds - a.cpu_seconds) * 1e6 / (b.events - a.events), 1
                ),
            }
            for a, b in pairwise(mine)
        ],
    }


class Sweep:
    """The runs, each size in a namespace the bench makes and drops (`namespace`, `drop`);
    `sampler` attributes the CPU of the stack's `services` (its groups) to each run."""

    def __init__(
        self,
        namespace: Callable[[str], Settings],
        drop: Callable[[Settings], None],
        sampler: RssSampler,
        services: Iterable[str],
        logs: Path,
        work: Path,
    ) -> None:
        self.namespace = namespace
        self.drop = drop
        self.sampler = sampler
        self.services = frozenset(services)
        self.logs = logs
        self.work = work
        self.points: list[Point] = []

    def run(self, sizes: Sequence[int], out: Path) -> dict[str, Any]:
        """Every size in turn; `out` is rewritten after each, so a cut run keeps its points."""
        day = datetime.now(UTC).date().isoformat()
        host = machine()
        sizes_s: dict[str, float] = {}
        for events in sizes:
            started = time.monotonic()
            self.size(events)
            sizes_s[str(events)] = round(time.monotonic() - started, 1)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(document(day, host, self.points), indent=2) + "\n")
            print(f"  sweep so far in {out}", flush=True)
        for line in summary(self.points):
            print(line, flush=True)
        return {
            **document(day, host, self.points),
            "file": str(out),
            "seconds_by_size": sizes_s,
            "costs": {a: costs(self.points, a) for a in ARCHITECTURES},
        }

    def size(self, events: int) -> None:
        print(f"  -- {events:,} events", flush=True)
        self.sampler.step(_step(events, OTHER))
        # The chart runs both architectures side by side (comparison/live.py does too).
        settings = self.namespace(f"benchsweep{events}").model_copy(
            update={"architecture": Architecture.BOTH}
        )
        try:
            with tempfile.TemporaryDirectory(dir=self.work) as tmp:  # gone once produced
                produced = generate_and_produce(settings, events, Path(tmp))
            counts = {"valid_events": produced["valid_events"]}
            self.points.append(self.lambda_point(settings, events, counts))
            self.points.append(self.kappa_point(settings, events, counts))
        finally:
            self.drop(settings)  # a 5M-line log and its copies: gone before the next size

    def job(self, settings: Settings, events: int, name: str, args: list[str]) -> Finished:
        """`lk <args>` to its end, a cold driver of its own; its output in the bench's logs, its
        Spark event log in `event_logs(events, name)`."""
        self.sampler.step(_step(events, name))
        log = self.logs / f"sweep-{events}-{name.replace(' ', '-')}.log"
        event_logs = self.event_logs(events, name)
        event_logs.mkdir(parents=True, exist_ok=True)
        settings = settings.model_copy(update={"spark_event_log_dir": event_logs.as_uri()})
        process = LkProcess(name, args, settings_env(settings), log)
        try:
            finished = run_to_end(process, JOB_TIMEOUT_S)
        except BaseException:
            if process.alive:  # SIGTERM or Ctrl-C to the bench: its driver and JVM end too
                process.kill()
            raise
        finally:
            self.sampler.step(_step(events, OTHER))
        if finished.returncode != 0:
            last = finished.output_tail.strip().splitlines()[-1:] or ["no output"]
            raise RuntimeError(f"`lk {' '.join(args)}` exited {finished.returncode}: {last[0]}")
        print(
            f"    {name}: {finished.seconds:.1f}s, {finished.usage.cpu_seconds:.1f} CPU-s, "
            f"peak RSS {finished.usage.peak_rss_bytes / GIB:.2f} GiB",
            flush=True,
        )
        return finished

    def event_logs(self, events: int, name: str) -> Path:
        return self.logs / "events" / f"{events}-{name.replace(' ', '-')}"

    def stages(self, events: int, name: str) -> dict[str, Any]:
        """Where the run's time went, stage by stage (empty for a run with no Spark)."""
        folder = self.event_logs(events, name)
        if not any(folder.iterdir()):
            return {}
        result = stages.breakdown(stages.read_events(stages.event_log(folder)))
        for line in stages.lines(result):
            print(f"    {line}", flush=True)
        return result.as_dict()

    def around(self, events: int, names: Iterable[str], prefix: str = "") -> dict[str, float]:
        """CPU-seconds, in these runs, of the stack's services (Kafka, MinIO, Postgres: they
        serve the drivers, and whoever else uses the shared stack counts too) and of the whole
        machine: far more than the driver's and the services' says the run shared the cores."""
        steps = [_step(events, name) for name in names]
        account = self.sampler.cpu
        services = sum(
            seconds
            for step in steps
            for group, seconds in account.steps.get(step, {}).items()
            if group in self.services
        )
        busy = sum(account.machine.get(step, {}).get("busy_s", 0.0) for step in steps)
        return {
            f"{prefix}services_cpu_seconds": round(services, 1),
            f"{prefix}machine_busy_cpu_seconds": round(busy, 1),
        }

    def lambda_point(self, settings: Settings, events: int, counts: dict[str, Any]) -> Point:
        from core.store import versions
        from core.store.connection import connect

        archive = self.job(settings, events, "lambda archive", ["archive", "--available-now"])
        batch = self.job(settings, events, "lambda batch", ["batch", "--drain"])
        with connect(settings) as conn:
            ready = versions.latest_ready(conn, "lambda")
        if ready is None:
            raise RuntimeError("`lk batch --drain` left no ready batch version")
        publish = self.job(
            settings, events, "lambda publish", ["step", "publish", f"version={ready.version}"]
        )
        with connect(settings) as conn:
            current = versions.current(conn, "lambda")
        if current is None or current.version != ready.version:
            raise RuntimeError(f"readers were not switched to batch version {ready.version}")
        recompute = (batch, publish)
        return Point(
            "lambda",
            events,
            seconds=sum(f.seconds for f in recompute),
            cpu_seconds=sum(f.usage.cpu_seconds for f in recompute),
            peak_rss_bytes=max(f.usage.peak_rss_bytes for f in recompute),
            extra={
                **counts,
                "batch_seconds": round(batch.seconds, 1),
                "publish_seconds": round(publish.seconds, 1),
                "archive_seconds": round(archive.seconds, 1),
                "archive_cpu_seconds": round(archive.usage.cpu_seconds, 1),
                "archive_peak_rss_bytes": archive.usage.peak_rss_bytes,
                **self.around(events, ("lambda batch", "lambda publish")),
                **self.around(events, ("lambda archive",), "archive_"),
                "version": ready.version,
                "stages": self.stages(events, "lambda batch"),
            },
        )

    def kappa_point(self, settings: Settings, events: int, counts: dict[str, Any]) -> Point:
        replay = self.job(
            settings, events, "kappa reprocess", ["reprocess", "--architecture", "kappa"]
        )
        return Point(
            "kappa",
            events,
            seconds=replay.seconds,
            cpu_seconds=replay.usage.cpu_seconds,
            peak_rss_bytes=replay.usage.peak_rss_bytes,
            extra={
                **counts,
                "max_offsets_per_trigger": settings.stream_max_offsets_per_trigger,
                **self.around(events, ("kappa reprocess",)),
                "stages": self.stages(events, "kappa reprocess"),
            },
        )


def _step(events: int, name: str) -> str:
    """The bench step a run's samples go to (the JSON's `cpu` has each run's machine)."""
    return f"sweep {events:,} {name}"


def summary(points: Sequence[Point]) -> list[str]:
    """The sweep as a table, then each architecture's fixed cost and cost per million."""
    lines = [
        f"  {'events':>10}  {'architecture':<12} {'seconds':>8} {'CPU-s':>8} {'cores':>6} "
        f"{'peak RSS':>9}  (Lambda's archive apart)"
    ]
    for p in sorted(points, key=lambda p: (p.events, p.architecture)):
        archive = (
            f"  archive {p.extra['archive_seconds']:.1f}s, {p.extra['archive_cpu_seconds']:.1f} "
            "CPU-s"
            if "archive_seconds" in p.extra
            else ""
        )
        lines.append(
            f"  {p.events:>10,}  {p.architecture:<12} {p.seconds:>8.1f} {p.cpu_seconds:>8.1f} "
            f"{p.cores:>6.2f} {p.peak_rss_bytes / GIB:>5.2f} GiB{archive}"
        )
    for architecture in ARCHITECTURES:
        cost = costs(points, architecture)
        if cost is None:
            continue
        steps = "; ".join(
            f"{step['from']:,} to {step['to']:,}: {step['seconds']:.1f}s, "
            f"{step['cpu_seconds']:.1f} CPU-s"
            for step in cost["per_million"]
        )
        lines.append(
            f"  {architecture}: {cost['fixed_seconds']:.1f}s, {cost['fixed_cpu_seconds']:.1f} "
            f"CPU-s at {cost['at_events']:,} events; a million more"
            + (f": {steps}" if steps else ": -")
        )
    return lines
