"""Bench step 3 (Lambda): the speed layer's sustained rate and its freshness.

The speed layer (`speed_layer.lambda_speed.SpeedLayer`, the engine `lk stream` runs) runs
continuously with a short trigger on a log of its own, while a producer process
(`live_producer`) writes events with the current time at a steady target rate, plus a few
*markers* a second: page views of pages no other event uses. A probe asks the serving API
(`lk serve`, a process of its own, over HTTP) for recent `page_views` rows four times a second;
a marker's freshness is the time from just before its `produce()` call to the first answer
that holds its row (so it includes up to one probe interval).

Figures: the producer's achieved rate; the sustained rate, what the stream took in from the
producer's start to the end of its last micro-batch over that time (when it keeps up, the
produced rate; when it falls behind, its capacity); whether it kept up (the backlog left when
the producer stopped); p50/p90/p99/max freshness; Spark's per-trigger durations and the
engine's own phases (`phases.PhaseTimer`). After the producer stops, the stream keeps running
for up to `grace_s` so that markers still queued get a freshness too; a marker never seen
counts as "not visible" (its freshness is then at least the time it waited, and p99 is a lower
bound, which the report says).
"""

from __future__ import annotations

import math
import multiprocessing
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.settings import Settings
from tests.benchmarks.live_producer import MARKER_PREFIX, produce_live
from tests.benchmarks.phases import PhaseTimer, phase_lines
from tests.benchmarks.progress import QueryWatcher
from tests.benchmarks.threads import CpuWindows, window_figures, window_lines
from tests.isolation import settings_env
from tests.processes import stop_group
from tests.serving_pages import read_whole

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from stream_engine.engine import StreamEngine
    from tests.benchmarks.rss import RssSampler

# --- the serving API and the freshness probe ----------------------------------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_api(settings: Settings, log: Path) -> tuple[subprocess.Popen[bytes], str]:
    """`lk serve` for `settings` on a free port, in its own process group; waits for /health."""
    import httpx

    port = _free_port()
    lk = Path(sys.executable).with_name("lk")
    with log.open("ab") as out:
        process = subprocess.Popen(
            [str(lk), "serve", "--architecture", "lambda", "--port", str(port)],
            env={**os.environ, **settings_env(settings)},
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://{settings.host}:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"lk serve exited ({process.returncode}); see {log}")
        try:
            if httpx.get(f"{url}/health", timeout=1).status_code == 200:
                return process, url
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    stop_process(process)
    raise RuntimeError(f"lk serve did not answer in 60 s; see {log}")


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the process's own group, SIGKILL after 15 s."""
    stop_group(process, grace_s=15)


class FreshnessProbe(threading.Thread):
    """Polls the API for marker rows; records when each marker was first visible."""

    def __init__(
        self, url: str, markers: multiprocessing.Queue[tuple[int, float]], interval_s: float
    ) -> None:
        super().__init__(name="freshness-probe", daemon=True)
        self.url = url
        self.markers = markers
        self.interval_s = interval_s
        self.produced: dict[int, float] = {}
        self.seen: dict[int, float] = {}
        self.requests = 0
        self.errors = 0
        self.stopping = threading.Event()

    def unseen(self) -> int:
        self._drain()
        return len(self.produced) - len(self.seen)

    def _drain(self) -> None:
        while True:
            try:
                seq, at = self.markers.get_nowait()
            except queue.Empty:
                return
            self.produced[seq] = at

    def run(self) -> None:
        import httpx

        from core.times import MINUTE_MS, iso

        with httpx.Client(base_url=self.url, timeout=10) as client:
            while not self.stopping.is_set():
                self._drain()
                waiting = [at for seq, at in self.produced.items() if seq not in self.seen]
                if waiting:
                    # Only the windows that can hold a marker not yet seen: a small answer.
                    oldest_ms = int(min(waiting) * 1000) - MINUTE_MS
                    start = iso(oldest_ms - oldest_ms % MINUTE_MS)
                    try:
                        rows = read_whole(client.get, "page_views", start=start)["rows"]
                        now = time.time()
                        self.requests += 1
                        for row in rows:
                            page = row["page"]
                            if page.startswith(MARKER_PREFIX):
                                seq = int(page.removeprefix(MARKER_PREFIX))
                                if seq in self.produced and seq not in self.seen:
                                    self.seen[seq] = now
                    except (httpx.HTTPError, ValueError, KeyError, AssertionError):
                        self.errors += 1
                self.stopping.wait(self.interval_s)

    def freshness(self) -> list[float]:
        return sorted(self.seen[seq] - self.produced[seq] for seq in self.seen)


def _percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    index = min(len(values) - 1, max(0, math.ceil(q * len(values)) - 1))
    return values[index]


# --- the run --------------------------------------------------------------------------------


@dataclass
class SpeedConfig:
    seconds: float = 90.0
    rate: float = 20_000.0
    trigger_s: float = 1.0
    markers_per_s: float = 4.0
    grace_s: float = 120.0
    probe_interval_s: float = 0.25
    warmup_timeout_s: float = 300.0  # the first (empty) micro-batch creates the state tables
    cpu_window_s: float = 30.0  # the stream's CPU is given per window: the JIT's part shrinks


def _stop_between_batches(
    query: Any, timer: PhaseTimer, engine: StreamEngine, wait_s: float = 120.0
) -> None:
    """Stop when no micro-batch is running, if one ends within `wait_s`: stopping mid-batch
    interrupts its Delta writes, and Spark then logs a long, harmless error. Past that, the
    micro-batch is interrupted (it may be busy in Python, where a stop does not reach). Then
    wait for the merges of the micro-batches Spark handed over."""
    deadline = time.monotonic() + wait_s
    while query.isActive and query.status["isTriggerActive"] and time.monotonic() < deadline:
        time.sleep(0.2)
    stopping = threading.Thread(target=query.stop, daemon=True)
    stopping.start()
    stopping.join(timeout=30)
    if stopping.is_alive():
        timer.interrupt()
        stopping.join(timeout=60)
    engine.finish(query)


def run(
    spark: SparkSession,
    settings: Settings,
    config: SpeedConfig,
    sampler: RssSampler,
    log_dir: Path,
) -> dict[str, Any]:
    from core.store.streams import LAMBDA_SPEED
    from speed_layer.lambda_speed import SpeedLayer

    api, url = start_api(settings, log_dir / "serve.log")
    sampler.watch("serving API", api.pid)
    context = multiprocessing.get_context("spawn")  # no fork of a process that runs a JVM
    markers: multiprocessing.Queue[tuple[int, float]] = context.Queue()
    results: multiprocessing.Queue[dict[str, Any]] = context.Queue()
    stop = context.Event()
    probe = FreshnessProbe(url, markers, config.probe_interval_s)
    timer = PhaseTimer()
    producer = context.Process(
        target=produce_live,
        args=(
            settings.kafka_bootstrap,
            settings.events_topic,
            config.rate,
            config.seconds,
            config.markers_per_s,
            markers,
            results,
            stop,
        ),
        name="live-producer",
    )
    query = None
    producer_group = "live producer (load, not counted)"
    try:
        with timer.installed(), QueryWatcher(spark) as watcher:
            speed = SpeedLayer(spark, settings)
            query = speed.engine.start(available_now=False, trigger_seconds=config.trigger_s)
            deadline = time.monotonic() + config.warmup_timeout_s
            while query.lastProgress is None and time.monotonic() < deadline:
                if query.exception() is not None:
                    raise RuntimeError(f"speed layer failed: {query.exception()}")
                time.sleep(0.5)
            warmup_s = time.monotonic() - (deadline - config.warmup_timeout_s)
            probe.start()
            producer.start()
            assert producer.pid is not None
            sampler.watch(producer_group, producer.pid, counted=False)
            print(
                f"  speed layer warm ({warmup_s:.0f}s); producing {config.rate:,.0f} events/s "
                f"for {config.seconds:.0f}s, {config.markers_per_s:g} markers/s; "
                f"trigger {config.trigger_s:g}s",
                flush=True,
            )
            produced_from = time.time()
            jvm = spark.sparkContext._gateway.proc.pid  # type: ignore[union-attr]
            cpu = CpuWindows({"JVM": jvm, "driver": os.getpid()}, config.cpu_window_s)
            cpu.start(len(speed.engine.outcomes))
            while producer.is_alive():
                producer.join(timeout=5)
                if query.exception() is not None:
                    raise RuntimeError(f"speed layer failed: {query.exception()}")
                cpu.tick(len(speed.engine.outcomes))
            cpu.tick(len(speed.engine.outcomes), last=True)
            produced_until = time.time()
            produced = results.get(timeout=30)
            grace_until = time.monotonic() + config.grace_s
            while probe.unseen() and time.monotonic() < grace_until and query.isActive:
                time.sleep(1)
            drained_at = time.time()
            _stop_between_batches(query, timer, speed.engine)
    finally:
        stop.set()
        probe.stopping.set()
        if query is not None and query.isActive:
            query.stop()
            speed.engine.finish(query)
        if producer.is_alive():
            producer.join(timeout=30)
        sampler.forget(producer_group)
        stop_process(api)
        sampler.forget("serving API")
    probe.join(timeout=15)
    window = (produced_from, produced_until, drained_at)
    figures = _figures(config, produced, window, watcher.of(LAMBDA_SPEED), probe, timer)
    figures["warmup_s"] = round(warmup_s, 1)
    figures["cpu_windows"] = cpu.windows
    if cpu.windows:  # the first window holds the JIT's warm-up, the last the closest to steady
        figures["stream_cpu"] = {
            "first_window": window_figures(cpu.windows[0]),
            "last_window": window_figures(cpu.windows[-1]),
        }
    print("  the stream's CPU while producing, window by window:", flush=True)
    for line in window_lines(cpu.windows):
        print(line, flush=True)
    return figures


def _ended_at(batch: dict[str, Any]) -> float:
    return float(batch["started_at"]) + batch["trigger_ms"] / 1000


def _figures(
    config: SpeedConfig,
    produced: dict[str, Any],
    window: tuple[float, float, float],
    batches: list[dict[str, Any]],
    probe: FreshnessProbe,
    timer: PhaseTimer,
) -> dict[str, Any]:
    produced_from, produced_until, drained_at = window
    span = produced_until - produced_from
    in_window = [b for b in batches if produced_from <= _ended_at(b) <= produced_until]
    processed_in_window = sum(b["input_rows"] for b in in_window)
    processed_total = sum(b["input_rows"] for b in batches)
    total_in = produced["events"] + produced["markers"]
    # Sustained: what the stream took in from the producer's start to its last micro-batch's
    # end. When it keeps up, that is the produced rate; when it falls behind, its capacity.
    last_end = max((_ended_at(b) for b in batches if b["input_rows"]), default=produced_from)
    consuming_s = last_end - produced_from
    busy_s = sum(b["trigger_ms"] for b in batches if b["input_rows"]) / 1000
    fresh = probe.freshness()
    unseen = len(probe.produced) - len(probe.seen)
    figures: dict[str, Any] = {
        "target_events_per_s": config.rate,
        "produced_events": produced["events"],
        "produced_markers": produced["markers"],
        "produce_seconds": round(produced["seconds"], 1),
        "produced_events_per_s": round(produced["events"] / produced["seconds"]),
        "sustained_events_per_s": round(processed_total / consuming_s) if consuming_s > 0 else 0,
        "kept_up": processed_in_window >= 0.95 * total_in,
        "processed_while_producing": processed_in_window,
        "processed_while_producing_per_s": round(processed_in_window / span) if span else 0,
        "backlog_when_producer_stopped": max(0, total_in - processed_in_window),
        "processed_total": processed_total,
        "unprocessed_at_end": max(0, total_in - processed_total),
        "processed_per_busy_s": round(processed_total / busy_s) if busy_s else 0,
        "waited_after_stop_s": round(drained_at - produced_until, 1),
        "trigger_s": config.trigger_s,
        "micro_batches": len(batches),
        "markers_seen": len(fresh),
        "markers_not_visible": unseen,
        "freshness_s": {
            "p50": _round(_percentile(fresh, 0.50)),
            "p90": _round(_percentile(fresh, 0.90)),
            "p99": _round(_percentile(fresh, 0.99)),
            "max": _round(fresh[-1] if fresh else None),
            "p99_is_lower_bound": unseen > 0,
        },
        "probe": {"requests": probe.requests, "errors": probe.errors},
        "spark_batches": batches,
        "engine_phases": timer.summary(),
        "engine_batches": [b.as_dict() for b in timer.batches],
    }
    f = figures["freshness_s"]
    print(
        f"  speed: produced {figures['produced_events_per_s']:,}/s "
        f"(target {config.rate:,.0f}); the stream took in {figures['sustained_events_per_s']:,}/s "
        f"({figures['processed_per_busy_s']:,}/s per busy second); "
        f"{'kept up' if figures['kept_up'] else 'fell behind'}: backlog when the producer "
        f"stopped {figures['backlog_when_producer_stopped']:,}, left unprocessed "
        f"{figures['unprocessed_at_end']:,}",
        flush=True,
    )
    print(
        f"  freshness over {len(fresh)} markers: p50 {f['p50']}s, p90 {f['p90']}s, "
        f"p99 {f['p99']}s, max {f['max']}s"
        + (f"; {unseen} markers never visible" if unseen else ""),
        flush=True,
    )
    for line in QueryWatcher.printable(batches):
        print(line, flush=True)
    for line in phase_lines(figures["engine_phases"]):
        print(line, flush=True)
    return figures


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)
