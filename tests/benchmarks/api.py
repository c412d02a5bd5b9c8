"""Bench step `api`: the serving API at constant request rates while the speed layer ingests.

Setup, in a namespace of its own: a generated workload (`--api-events` lines) in its log; the
Lambda speed layer (`SpeedLayer`, what `lk stream` runs) takes that backlog in, then keeps
ingesting a live producer (`--api-ingest-rate` events/s) for the whole step; `lk serve
--architecture lambda` with its default workers (one per core), over HTTP.

Load: Debian's `hey` at a constant rate, for `--api-seconds` per measurement (`-o csv` gives
every request's latency). `hey -q` paces each of its `-c` connections with a ticker, and the
tickers start together, so requests come in bursts of `-c`: a connection here sends one
request per *aim* interval (10 ms for a p99 aim of 10 ms, ...), as few connections as the
rate needs. A connection holds its pace exactly when its answers come within the aim; slower
answers show as a rate answered below the rate asked.

- a filtered view query (`page_views` of one page over one hour: the issue's kind of query) at
  the aim's 1,000 requests/s, then a sweep upwards for the highest rate held with p99 <= 10 ms
  (held: at least 95% of the asked rate answered, every answer a 200);
- a 1,000-row page (`page_views?limit=1000`) at 200 requests/s;
- 304 revalidation (`If-None-Match` with the answer's ETag) at 2,000 requests/s. Any
  micro-batch moves the tag of what it changes, and `hey` sends one fixed header: the
  revalidated query is Kappa's, whose state no stream moves in this step, so every request is
  a 304 that reads the state and no row, on the machine the speed layer keeps busy;
- `GET /health` (no store access) at 2,000 requests/s: the floor of the machine as it is then;
- `pgbench -S` (select-only, 4 clients) on the same Postgres, in the same run, as the ceiling
  of one indexed read per request: the API's highest rate held is reported as a share of it.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
import multiprocessing
import os
import queue
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from core.settings import Settings
from tests.benchmarks.live_producer import produce_live
from tests.benchmarks.speed import _stop_between_batches, start_api, stop_process
from tests.benchmarks.workload import generate_and_produce

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from tests.benchmarks.rss import RssSampler

FILTERED_AIM = (1_000, 10.0)  # requests/s, p99 ms
PAGE_AIM = (200, 50.0)
REVALIDATION_AIM = (2_000, 5.0)
SWEEP_RATES = (50, 100, 250, 500, 750, 1_000, 1_250, 1_500, 2_000, 2_500, 3_000, 4_000)
SWEEP_P99_MS = 10.0
HELD_SHARE = 0.95  # of the asked rate, answered, for a rate to count as held


@dataclass
class ApiConfig:
    seconds: float = 10.0
    events: int = 20_000
    ingest_rate: float = 200.0
    trigger_s: float = 1.0
    page: str = "/cart"
    warmup_timeout_s: float = 600.0


# --- hey ---------------------------------------------------------------------------------


def _run_client(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
    """A load generator, in a session of its own as a client would be on its own machine.

    Linux's autogroup scheduling (on by default) shares the CPU between sessions first: a client
    left in the bench's session competes with the Spark driver's JVM for that session's share,
    and its own waits count as the API's latency (measured: `hey` beside two busy loops in one
    session, p99 151 ms and a quarter of the asked rate; in a session of its own, p99 3.8 ms).
    """
    return subprocess.run(command, capture_output=True, text=True, start_new_session=True, **kwargs)


def _hey() -> str:
    found = shutil.which("hey")
    if found is None:
        raise RuntimeError("hey is missing: apt-get install hey (Debian's HTTP load generator)")
    return found


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def cpu_seconds(root: int) -> float:
    """CPU time (user + system) of a process and its descendants so far."""
    from tests.benchmarks.rss import _tree

    ticks = 0
    for pid in _tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def constant_rate(
    url: str,
    rate: float,
    seconds: float,
    interval_ms: float,
    headers: dict[str, str] | None = None,
    server: int | None = None,
) -> dict[str, Any]:
    """`rate` requests/s for `seconds`, each connection sending one request per `interval_ms`;
    latencies in ms of every answer, the rate answered, and the CPU the `server` process tree
    spent on each (what the rate costs on cores of its own, whatever else runs)."""
    connections = max(1, math.ceil(rate * interval_ms / 1000))
    command = [_hey(), "-z", f"{seconds}s", "-c", str(connections), "-q", f"{rate / connections}"]
    for name, value in (headers or {}).items():
        command += ["-H", f"{name}: {value}"]
    command += ["-o", "csv", url]
    cpu_before = None if server is None else cpu_seconds(server)
    run = _run_client(command, check=False, timeout=seconds + 120)
    if run.returncode != 0:
        raise RuntimeError(f"hey failed: {run.stderr.strip()[-300:]}")
    latencies: list[float] = []
    codes: dict[str, int] = {}
    for record in csv.DictReader(io.StringIO(run.stdout)):
        latencies.append(float(record["response-time"]) * 1000)
        codes[record["status-code"]] = codes.get(record["status-code"], 0) + 1
    if not latencies:
        raise RuntimeError(f"hey got no answer from {url}")
    answered = len(latencies) / seconds
    cpu_ms = None
    if server is not None and cpu_before is not None:
        cpu_ms = round((cpu_seconds(server) - cpu_before) * 1000 / len(latencies), 3)
    return {
        "server_cpu_ms_per_request": cpu_ms,
        "asked_per_s": rate,
        "answered_per_s": round(answered, 1),
        "connections": connections,
        "requests": len(latencies),
        "codes": codes,
        "p50_ms": round(_percentile(latencies, 0.50), 2),
        "p90_ms": round(_percentile(latencies, 0.90), 2),
        "p99_ms": round(_percentile(latencies, 0.99), 2),
        "max_ms": round(max(latencies), 2),
    }


def _held(result: dict[str, Any], expected_code: str, p99_ms: float) -> bool:
    only_expected = set(result["codes"]) == {expected_code}
    enough = result["answered_per_s"] >= HELD_SHARE * result["asked_per_s"]
    return only_expected and enough and result["p99_ms"] <= p99_ms


def _line(name: str, result: dict[str, Any]) -> str:
    return (
        f"  {name}: asked {result['asked_per_s']:,.0f}/s, answered "
        f"{result['answered_per_s']:,.0f}/s; p50 {result['p50_ms']} ms, p99 {result['p99_ms']} "
        f"ms, max {result['max_ms']} ms; {result['codes']}; API CPU "
        f"{result['server_cpu_ms_per_request']} ms/request"
    )


# --- pgbench -S ----------------------------------------------------------------------------


def pgbench_select_only(settings: Settings, seconds: float, clients: int = 4) -> dict[str, Any]:
    """`pgbench -S` on the bench's database: transactions/s and p99 latency (from its log)."""
    from infra.stack.postgres import postgres_bin_dir

    binary = shutil.which("pgbench") or str(postgres_bin_dir(settings) / "pgbench")
    connection = [
        "-h",
        settings.postgres_host or settings.host,
        "-p",
        str(settings.postgres_port),
        "-U",
        settings.postgres_user,
    ]
    env = {**os.environ, "PGPASSWORD": settings.postgres_password}
    db = settings.postgres_db
    init = [binary, "-i", "-s", "1", "-q", "-n", *connection, db]
    subprocess.run(init, env=env, capture_output=True, text=True, check=True, timeout=300)
    with tempfile.TemporaryDirectory(prefix="lk-pgbench-") as logs:
        command = [binary, "-S", "-n", "-c", str(clients), "-j", str(min(clients, 2))]
        command += ["-T", str(math.ceil(seconds)), "-l", f"--log-prefix={logs}/tx", *connection, db]
        run = _run_client(command, env=env, check=True, timeout=seconds + 120)
        latencies = [
            int(line.split()[2]) / 1000
            for log in Path(logs).glob("tx*")
            for line in log.read_text().splitlines()
            if line.strip()
        ]
    tps = next(
        float(line.split("=")[1].split()[0])
        for line in run.stdout.splitlines()
        if line.startswith("tps =")
    )
    return {
        "clients": clients,
        "tps": round(tps),
        "p50_ms": round(_percentile(latencies, 0.50), 3),
        "p99_ms": round(_percentile(latencies, 0.99), 3),
    }


# --- the step --------------------------------------------------------------------------------


def _rows(settings: Settings, stream: str) -> int:
    from core.store.connection import connect

    with connect(settings) as conn:
        row = conn.execute(
            "select count(*) from rt_page_views where stream = %s", (stream,)
        ).fetchone()
    return int(row[0]) if row else 0


def _etag(url: str) -> str:
    import httpx

    response = httpx.get(url, timeout=10)
    response.raise_for_status()
    return response.headers["etag"]


def run(
    spark: SparkSession,
    settings: Settings,
    config: ApiConfig,
    sampler: RssSampler,
    log_dir: Path,
) -> dict[str, Any]:
    from core.store.streams import LAMBDA_SPEED
    from speed_layer.lambda_speed import SpeedLayer

    _hey()  # fail before the setup if the load generator is missing
    with tempfile.TemporaryDirectory(prefix="lk-bench-api-") as folder:
        workload = generate_and_produce(settings, config.events, Path(folder))
    context = multiprocessing.get_context("spawn")  # no fork of a process that runs a JVM
    stop = context.Event()
    markers: multiprocessing.Queue[tuple[int, float]] = context.Queue()
    results: multiprocessing.Queue[dict[str, Any]] = context.Queue()
    producer = context.Process(
        target=produce_live,
        args=(
            settings.kafka_bootstrap,
            settings.events_topic,
            config.ingest_rate,
            24 * 3600.0,  # until stopped
            0.2,  # markers are the freshness bench's: a few, unread
            markers,
            results,
            stop,
        ),
        name="api-live-producer",
    )
    api = query = None
    figures: dict[str, Any] = {"workload_lines": workload["lines"]}
    engine = SpeedLayer(spark, settings).engine
    try:
        query = engine.start(available_now=False, trigger_seconds=config.trigger_s)
        deadline = time.monotonic() + config.warmup_timeout_s
        while _rows(settings, LAMBDA_SPEED) < 1_000:  # the backlog is in: pages to read
            if query.exception() is not None:
                raise RuntimeError(f"speed layer failed: {query.exception()}")
            if time.monotonic() > deadline:
                raise RuntimeError("the speed layer did not take the backlog in time")
            time.sleep(1)
        if config.ingest_rate > 0:
            producer.start()
            assert producer.pid is not None
            sampler.watch("live producer (load, not counted)", producer.pid, counted=False)
        api, url = start_api(settings, log_dir / "serve-api.log")
        sampler.watch("serving API", api.pid)
        figures |= _measure(settings, url, config, api.pid)
        figures["view_rows"] = _rows(settings, LAMBDA_SPEED)
        figures["load_average"] = [round(x, 2) for x in os.getloadavg()]
    finally:
        stop.set()
        if producer.is_alive():
            producer.join(timeout=30)
            with contextlib.suppress(queue.Empty):
                figures["ingested_events"] = results.get(timeout=5)["events"]
        sampler.forget("live producer (load, not counted)")
        if api is not None:
            stop_process(api)
            sampler.forget("serving API")
        if query is not None and query.isActive:
            from tests.benchmarks.phases import PhaseTimer

            _stop_between_batches(query, PhaseTimer(), engine)
    figures["ingest_rate"] = config.ingest_rate
    return figures


def _measure(settings: Settings, url: str, config: ApiConfig, server: int) -> dict[str, Any]:
    seconds = config.seconds
    hour = "start=2026-11-01T09:00:00Z&end=2026-11-01T10:00:00Z"  # the workload's second hour
    filtered = f"{url}/v1/views/page_views?page={config.page}&{hour}"
    page = f"{url}/v1/views/page_views?limit=1000"
    revalidated = f"{url}/v1/views/page_views?architecture=kappa&page={config.page}&{hour}"
    figures: dict[str, Any] = {}

    for warm in (filtered, page, revalidated):  # prepared statements, pools, caches
        constant_rate(warm, 100, 2, 50)

    rate, aim_ms = FILTERED_AIM
    figures["filtered"] = constant_rate(filtered, rate, seconds, aim_ms, server=server)
    figures["filtered"]["p99_aim_ms"] = aim_ms
    print(_line("filtered view query", figures["filtered"]), flush=True)

    rate, aim_ms = PAGE_AIM
    figures["page_1000"] = constant_rate(page, rate, seconds, aim_ms, server=server)
    figures["page_1000"]["p99_aim_ms"] = aim_ms
    print(_line("1,000-row page", figures["page_1000"]), flush=True)

    rate, aim_ms = REVALIDATION_AIM
    tag = _etag(revalidated)
    figures["revalidation_304"] = constant_rate(
        revalidated, rate, seconds, aim_ms, {"If-None-Match": tag}, server
    )
    figures["revalidation_304"]["p99_aim_ms"] = aim_ms
    print(_line("304 revalidation", figures["revalidation_304"]), flush=True)

    # The floor of this machine now: an answer with no store access at the 304 aim's rate.
    health = f"{url}/health"
    figures["health_floor"] = constant_rate(health, rate, seconds, aim_ms, server=server)
    print(_line("GET /health (no store, the floor)", figures["health_floor"]), flush=True)

    sweep: list[dict[str, Any]] = []
    held = 0.0
    for rate in SWEEP_RATES:
        result = constant_rate(filtered, rate, seconds, SWEEP_P99_MS, server=server)
        result["held"] = _held(result, "200", SWEEP_P99_MS)
        sweep.append(result)
        print(_line(f"sweep {rate:,}/s", result) + (" held" if result["held"] else ""), flush=True)
        if not result["held"]:
            break
        held = rate
    figures["sweep"] = sweep
    figures["highest_rate_held_p99_10ms"] = held

    figures["pgbench_select_only"] = pgbench_select_only(settings, seconds)
    tps = figures["pgbench_select_only"]["tps"]
    figures["ratio_to_pgbench"] = round(held / tps, 4) if tps else None
    print(
        f"  pgbench -S: {tps:,} transactions/s, p99 "
        f"{figures['pgbench_select_only']['p99_ms']} ms; the API held {held:,.0f}/s at p99 <= "
        f"{SWEEP_P99_MS:g} ms = {100 * (figures['ratio_to_pgbench'] or 0):.1f}% of it",
        flush=True,
    )
    return figures
