"""What the stream drivers' metrics cost: the speed layer with `LK_METRICS_PORT` and without,
side by side in one run.

    uv run python -m tests.benchmarks.metrics_overhead [--rate 100] [--seconds 240]

Two `lk stream --architecture lambda` processes, as the chart runs them, each on a namespace
of its own on the local stack (started if it is not running, and then stopped again), each fed
by a live producer at `--rate` events/s (`tests.benchmarks.live_producer`). One serves its
metrics and is scraped every `--scrape-s`, as Prometheus would; the other serves none. Once
both have committed `--warm-batches` micro-batches, for `--seconds`: each driver's CPU-seconds
(the Python process and its Spark JVM apart), its micro-batches committed (the store's
progress), so CPU per micro-batch, and their resident memory sampled every second.

Then, in this process, the metrics' own work: what a micro-batch's calls cost (both sides of
it, `--rounds` times) and what a scrape costs (the exposition of the default registry).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from core.settings import Settings, get_settings
from tests.processes import stop_group

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Driver:
    """`lk stream --architecture lambda` on `settings`, in its own process group."""

    def __init__(self, name: str, settings: Settings, port: int | None, log: Path) -> None:
        from tests.isolation import settings_env

        self.name, self.settings, self.port = name, settings, port
        env = {**os.environ, **settings_env(settings)}
        env.pop("LK_METRICS_PORT", None)
        if port is not None:
            env["LK_METRICS_PORT"] = str(port)
        lk = Path(sys.executable).with_name("lk")
        with log.open("w") as out:
            self.process = subprocess.Popen(
                [str(lk), "stream", "--architecture", "lambda"],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.rss: dict[str, list[int]] = {"driver": [], "jvm": []}

    def processes(self) -> dict[str, psutil.Process]:
        """The Python driver and its Spark JVM (once started)."""
        root = psutil.Process(self.process.pid)
        found = {"driver": root}
        for child in root.children(recursive=True):
            if child.name() == "java":
                found["jvm"] = child
        return found

    def cpu(self) -> dict[str, float]:
        return {k: sum(p.cpu_times()[:2]) for k, p in self.processes().items()}

    def sample_rss(self) -> None:
        for k, p in self.processes().items():
            self.rss[k].append(p.memory_info().rss)

    def batches(self) -> int:
        from core.store import realtime
        from core.store.connection import connect
        from core.store.streams import LAMBDA_SPEED

        with connect(self.settings) as conn:
            return realtime.load_progress(conn, LAMBDA_SPEED).last_batch_id + 1

    def stop(self) -> None:
        stop_group(self.process)


def side_by_side(base: Settings, args: argparse.Namespace, logs: Path) -> dict[str, Any]:
    import httpx

    from tests.benchmarks.live_producer import produce_live
    from tests.isolation import drop_isolated, isolated_settings

    context = multiprocessing.get_context("spawn")
    stop = context.Event()
    spaces: list[Settings] = []
    drivers: list[Driver] = []
    producers = []
    queues = []  # held here: a queue collected before its child reads it fails the child
    try:
        for name, port in (("metrics on", _free_port()), ("metrics off", None)):
            settings = isolated_settings(base, "metricsbench")
            spaces.append(settings)
            drivers.append(Driver(name, settings, port, logs / f"{name.replace(' ', '-')}.log"))
        for settings in spaces:
            markers, results = context.Queue(), context.Queue()
            queues += [markers, results]
            producer = context.Process(
                target=produce_live,
                args=(
                    settings.kafka_bootstrap,
                    settings.events_topic,
                    args.rate,
                    args.seconds + args.warm_timeout_s,
                    0.5,
                    markers,
                    results,
                    stop,
                ),
            )
            producer.start()
            producers.append(producer)
        deadline = time.monotonic() + args.warm_timeout_s
        while min(d.batches() for d in drivers) < args.warm_batches:
            for d in drivers:
                assert d.process.poll() is None, f"{d.name} exited; see {logs}"
            assert time.monotonic() < deadline, "the drivers did not warm up"
            time.sleep(2)
        print("  both warm: measuring", flush=True)
        cpu0 = [d.cpu() for d in drivers]
        batches0 = [d.batches() for d in drivers]
        scrapes: list[float] = []
        on = drivers[0]
        next_scrape = time.monotonic()
        until = time.monotonic() + args.seconds
        while time.monotonic() < until:
            for d in drivers:
                d.sample_rss()
            if time.monotonic() >= next_scrape:
                started = time.monotonic()
                httpx.get(f"http://127.0.0.1:{on.port}/metrics", timeout=10).raise_for_status()
                scrapes.append(time.monotonic() - started)
                next_scrape += args.scrape_s
            time.sleep(1.0)
        cpu1 = [d.cpu() for d in drivers]
        batches1 = [d.batches() for d in drivers]
    finally:
        stop.set()
        for producer in producers:
            producer.join(timeout=60)
        for d in drivers:
            d.stop()
        for settings in spaces:
            for problem in drop_isolated(base, settings):
                print(f"  could not delete {problem}", flush=True)
    figures: dict[str, Any] = {"scrape_s": [round(s, 4) for s in scrapes]}
    for d, c0, c1, b0, b1 in zip(drivers, cpu0, cpu1, batches0, batches1, strict=True):
        batches = b1 - b0
        entry: dict[str, Any] = {"micro_batches": batches}
        for part in ("driver", "jvm"):
            spent = c1.get(part, 0.0) - c0.get(part, 0.0)
            entry[f"{part}_cpu_s"] = round(spent, 2)
            entry[f"{part}_cpu_ms_per_batch"] = (
                round(1000 * spent / batches, 1) if batches else None
            )
            rss = d.rss[part]
            entry[f"{part}_rss_mib_mean"] = round(sum(rss) / len(rss) / 2**20, 1) if rss else None
            entry[f"{part}_rss_mib_peak"] = round(max(rss) / 2**20, 1) if rss else None
        figures[d.name] = entry
    return figures


def in_process(rounds: int) -> dict[str, float]:
    """The metrics' own calls: one micro-batch's (both sides), and one scrape."""
    from prometheus_client import REGISTRY, generate_latest

    from core.event_clock import EventClocks
    from stream_engine import metrics
    from stream_engine.metrics import Stopwatch, StreamMetrics

    settings = Settings()
    # No Kafka: the calls alone (the log's end, asked at a scrape, answers at once).
    stream = StreamMetrics("bench", settings, settings.watermark_delay_ms, lambda topic: {})
    stream.count_state({"page_views": 1000})
    metrics.watch(stream)
    clocks = EventClocks({p: 1_700_000_000_000 for p in range(6)})
    offsets = {f"{settings.events_topic}/{p}": 0 for p in range(6)}
    records = {settings.events_topic: 200, settings.profiles_topic: 0}
    changes = {"page_views": 3, "unique_users": 2, "search_ctr": 1}
    started = time.perf_counter()
    for batch_id in range(rounds):
        spark_side = Stopwatch()
        for stage in ("offsets", "spark_job", "inbox_write", "queue_wait"):
            spark_side.lap(stage)
        stream.handed(batch_id, time.perf_counter(), spark_side)
        merge = Stopwatch()
        for stage in ("split", "watermark", "accepted_log", "keyed_merge", "store_commit"):
            merge.lap(stage)
        for p in offsets:
            offsets[p] += 33
        stream.freshness.observe({p: batch_id * 33 + 40 for p in range(6)}, time.time())
        stream.committed(
            batch_id,
            merge,
            records_in=records,
            late=0,
            quarantined=1,
            state_rows=changes,
            clocks=clocks,
            offsets=offsets,
        )
    per_batch = (time.perf_counter() - started) / rounds
    scrape_rounds = max(1, rounds // 100)
    started = time.perf_counter()
    for _ in range(scrape_rounds):
        size = len(generate_latest(REGISTRY))
    per_scrape = (time.perf_counter() - started) / scrape_rounds
    return {
        "micro_batch_us": round(per_batch * 1e6, 1),
        "scrape_ms": round(per_scrape * 1e3, 2),
        "scrape_bytes": size,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=100.0, help="Events/s to each driver.")
    parser.add_argument("--seconds", type=float, default=240.0, help="Measured time.")
    parser.add_argument("--scrape-s", type=float, default=15.0, help="Scrape interval.")
    parser.add_argument("--warm-batches", type=int, default=5)
    parser.add_argument("--warm-timeout-s", type=float, default=300.0)
    parser.add_argument("--rounds", type=int, default=10_000, help="In-process rounds.")
    parser.add_argument("--logs", type=Path, default=ROOT / "out" / "bench" / "metrics")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)

    from infra.stack import stack

    report: dict[str, Any] = {"in_process": in_process(args.rounds)}
    print(f"  in process: {report['in_process']}", flush=True)
    base = get_settings()
    running = {s.name for s in stack.services(base) if s.status().running}
    try:
        stack.up(base, progress=lambda line: print(f"  {line}", flush=True))
        report["side_by_side"] = side_by_side(base, args, args.logs)
    finally:
        for service in reversed(stack.services(base)):
            if service.name not in running:
                service.stop()
    print(json.dumps(report, indent=1), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
