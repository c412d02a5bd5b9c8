"""`make bench`: measured figures, printed and saved (benchmarks are not tests: nothing here
asserts a speed).

    make bench                          # 5,100,000 log records (BENCH_EVENTS): ~30 min on 2 cores
    make bench BENCH_EVENTS=200000      # a quicker run (the API step alone takes ~5 min)
    BENCH_TIME_LIMIT=5100 make bench    # the replay, last, gets what time is left
    uv run python -m tests.benchmarks.run --steps sweep --sweep-sizes 10000,30000 \
        --sweep-json out/bench/sweep-quick.json    # the sweep alone, small
    uv run python -m tests.benchmarks.run --help

Steps, each in its own module:

1. `workload`: the local stack up (`lk stack up`; whatever it starts is stopped at the end), a
   namespace of the bench's own on it (topics, buckets, database: `tests.isolation`, so the
   user's data is untouched), `lk generate` and `lk produce` of BENCH_EVENTS events;
2. `batch`: Lambda: the archiver drains the log into the master dataset, then `run_batch`
   recomputes the five views over all of it (events/s), timed by its steps (the quality gates
   apart from the recompute) and by view;
3. `duckdb_views`: DuckDB computes the same views (the same logic, `core/views`) from the same
   master-dataset files, and its answers are compared with what Spark wrote;
4. `speed`: the Lambda speed layer on a live log of its own, with a producer at a target rate:
   sustained events/s and freshness (produced -> visible in the serving API);
5. `api`: the serving API at constant request rates (`hey`) while the speed layer ingests: a
   filtered query, a 1,000-row page, 304 revalidation, the highest rate held at p99 <= 10 ms,
   and `pgbench -S` on the same Postgres for comparison (`--steps api` alone: ~5 minutes);
6. `cdc`: change data capture: Kafka Connect's idle CPU and memory, then `--cdc-changes`
   profile changes (ten to a transaction, four writers) through a connector of its own:
   commits/s, changes captured/s, and each change's time from its commit to Kafka (p50, p99);
7. `sweep`: reprocessing at several sizes of the log (`--sweep-sizes`, default 10,000, 100,000,
   1M, 5M and 20M lines; ~45 min on 2 cores, most of it the 20M point's generating, producing
   and archiving), each size in a namespace of its own: Lambda's archive, then its recompute to
   readers switched (`lk batch --drain`, `lk step publish`), and Kappa's replay from offset 0
   to the switch (`lk reprocess`), each a cold `lk` process as the chart runs it (seconds,
   CPU-seconds, cores kept busy and peak RSS of the driver and its JVM); the points also go to
   `--sweep-json` (default docs/bench/sweep-<date>.json: a quick run should write elsewhere);
8. `replay`: Kappa: `Reprocess(...).run()` from offset 0 of the same log (events/s, time to the
   switch), next to the Lambda recompute of the same history (last: the longest step, and the
   one `--replay-budget` may cut short);
9. throughout, `rss`: the stack's resident memory, sampled every second.

It ends with a table of each figure next to its aim and writes everything to
out/bench/<timestamp>.json (after every step, so an interrupted run keeps what it measured; a
SIGTERM, as from `timeout`, still tears down, prints the table and saves).
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.settings import Settings, get_settings
from tests.benchmarks import sweep
from tests.benchmarks.report import GIB, Results, cpu_lines, machine, state_lines, table
from tests.benchmarks.rss import RssSampler, stack_pids

ROOT = Path(__file__).resolve().parents[2]
STEPS = ("workload", "batch", "duckdb", "speed", "api", "cdc", "sweep", "replay")
DEFAULT_EVENTS = 5_100_000  # 1% of the lines are invalid: over 5M events still reach the master
TEARDOWN_RESERVE_S = 300.0  # stopping Spark, deleting the namespaces, stopping services


def _int_env(name: str, default: int) -> int:
    return int(os.environ.get(name, str(default)).replace("_", ""))


def _optional_float_env(name: str) -> float | None:
    value = os.environ.get(name, "").strip()
    return float(value) if value else None


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m tests.benchmarks.run", description="Measured figures (make bench)."
    )
    parser.add_argument(
        "--events",
        type=int,
        default=_int_env("BENCH_EVENTS", DEFAULT_EVENTS),
        help="lines in the generated workload (env BENCH_EVENTS; default 5,100,000, so that "
        "the master dataset holds over 5M events after the 1%% invalid ones)",
    )
    parser.add_argument(
        "--speed-seconds",
        type=float,
        default=float(os.environ.get("BENCH_SPEED_SECONDS", "90")),
        help="how long the live producer runs (env BENCH_SPEED_SECONDS; default 90)",
    )
    parser.add_argument(
        "--speed-rate",
        type=float,
        default=float(os.environ.get("BENCH_SPEED_RATE", "30000")),
        help="live producer's target events/s (env BENCH_SPEED_RATE; default 30000, the aim)",
    )
    parser.add_argument(
        "--speed-trigger", type=float, default=1.0, help="speed layer trigger, s (default 1)"
    )
    parser.add_argument(
        "--api-seconds",
        type=float,
        default=float(os.environ.get("BENCH_API_SECONDS", "10")),
        help="seconds of each constant-rate measurement of the API (env BENCH_API_SECONDS)",
    )
    parser.add_argument(
        "--api-events",
        type=int,
        default=_int_env("BENCH_API_EVENTS", 20_000),
        help="lines of the workload the API step serves (env BENCH_API_EVENTS; default 20,000)",
    )
    parser.add_argument(
        "--api-ingest-rate",
        type=float,
        default=float(os.environ.get("BENCH_API_INGEST_RATE", "200")),
        help="events/s the speed layer ingests while the API is measured (0: none; default 200)",
    )
    parser.add_argument(
        "--cdc-changes",
        type=int,
        default=_int_env("BENCH_CDC_CHANGES", 60_000),
        help="profile changes written for the change data capture step (default 60,000)",
    )
    parser.add_argument(
        "--replay-max-offsets",
        type=int,
        default=_int_env("BENCH_REPLAY_MAX_OFFSETS", 500_000),
        help="records per micro-batch of the Kappa replay (default 500,000)",
    )
    parser.add_argument(
        "--replay-budget",
        type=float,
        default=float(os.environ["BENCH_REPLAY_BUDGET"])
        if "BENCH_REPLAY_BUDGET" in os.environ
        else None,
        help="stop the replay after this many seconds and report the rate of the micro-batches "
        "done (env BENCH_REPLAY_BUDGET; default: no limit)",
    )
    parser.add_argument(
        "--sweep-sizes",
        default=os.environ.get("BENCH_SWEEP_SIZES", ",".join(map(str, sweep.DEFAULT_SIZES))),
        help="lines in the log at each size of the sweep, comma-separated; 1e6 and 1_000_000 "
        f"read too (env BENCH_SWEEP_SIZES; default {','.join(map(str, sweep.DEFAULT_SIZES))})",
    )
    parser.add_argument(
        "--sweep-json",
        type=Path,
        default=Path(os.environ["BENCH_SWEEP_JSON"]) if "BENCH_SWEEP_JSON" in os.environ else None,
        help="where the sweep's points go, in the shape the report's figure reads (env "
        "BENCH_SWEEP_JSON; default docs/bench/sweep-<date>.json, the committed record)",
    )
    parser.add_argument(
        "--time-limit",
        type=float,
        default=_optional_float_env("BENCH_TIME_LIMIT"),
        help="seconds the whole run may take: the replay (last) gets what is left, less "
        f"{TEARDOWN_RESERVE_S:.0f}s for the teardown (env BENCH_TIME_LIMIT; default: no limit)",
    )
    parser.add_argument(
        "--steps",
        default=",".join(STEPS),
        help=f"comma-separated subset of {','.join(STEPS)} (later steps need the earlier)",
    )
    parser.add_argument(
        "--no-profile", action="store_true", help="skip timing the batch's parts one by one"
    )
    parser.add_argument(
        "--keep", action="store_true", help="keep the bench's topics, buckets and databases"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "out" / "bench")
    args = parser.parse_args(argv)
    args.steps = [s.strip() for s in args.steps.split(",") if s.strip()]
    unknown = set(args.steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps: {', '.join(sorted(unknown))}")
    try:
        args.sweep_sizes = sweep.parse_sizes(args.sweep_sizes)
    except ValueError as exc:
        parser.error(f"--sweep-sizes: {exc}")
    if args.sweep_json is None:
        args.sweep_json = ROOT / "docs" / "bench" / f"sweep-{datetime.now(UTC).date()}.json"
    return args


class Bench:
    """The run: the stack, namespaces, one Spark session, and the steps in order."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.settings = get_settings()
        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        self.results = Results(
            args.out / f"{stamp}.json",
            {
                "started_at": stamp,
                "events": args.events,
                "machine": machine(),
                "note": "load averages per step show what else ran on the machine meanwhile",
                "step_seconds": {},
                "load_average": {},
            },
        )
        self.log_dir = args.out / f"{stamp}-logs"
        self.sampler = RssSampler()
        self.namespaces: list[Settings] = []
        self.started_services: list[str] = []
        self.spark: Any = None
        self.failed: set[str] = set()
        self.started = time.monotonic()
        self.hard_exit = False
        self.work = Path(tempfile.mkdtemp(prefix="lk-bench-"))  # the bench's own files

    # -- setup and teardown ---------------------------------------------------------------

    def stack_up(self) -> None:
        from infra.stack import stack

        running = set(stack_pids(self.settings))
        timings = stack.up(self.settings, progress=lambda line: print(f"  {line}", flush=True))
        self.started_services = [n for n in stack_pids(self.settings) if n not in running]
        for name, pid in stack_pids(self.settings).items():
            self.sampler.watch(name, pid)
        self.results.data["stack"] = {
            "up_seconds": {k: round(v, 1) for k, v in timings.items()},
            "started_by_bench": self.started_services,
            "already_running": sorted(running),
        }

    def namespace(self, name: str) -> Settings:
        from tests.isolation import isolated_settings

        isolated = isolated_settings(self.settings, name)
        self.namespaces.append(isolated)
        # Great Expectations keeps its project under the stack folder: the bench's own, so the
        # user's validation results stay as they were. (A new object, not `model_copy`: that
        # would keep the cached `stack_path` of the original.)
        isolated = Settings(**{**isolated.model_dump(), "stack_dir": self.work / name})
        print(
            f"  namespace: topics {isolated.events_topic}, {isolated.profiles_topic}; "
            f"database {isolated.postgres_db}",
            flush=True,
        )
        return isolated

    def spark_session(self, settings: Settings) -> Any:
        if self.spark is None:
            from core.spark import build_spark_session

            self.spark = build_spark_session(settings, "lk-bench")
            jvm = self.spark.sparkContext._jvm
            self.sampler.watch(
                "spark (bench JVM)", int(jvm.java.lang.ProcessHandle.current().pid())
            )
        return self.spark

    def stop_spark(self, wait_s: float = 180.0) -> None:
        """Stop the queries and the session; if that hangs (a micro-batch busy in Python that
        ignores even an interrupt), give up after `wait_s` and end the process at exit instead
        (the JVM exits with its parent)."""
        from tests.benchmarks.phases import PhaseTimer

        spark = self.spark
        PhaseTimer.interrupt_all()
        stopped = threading.Event()

        def stop() -> None:
            for query in spark.streams.active:
                query.stop()
            spark.stop()
            stopped.set()

        threading.Thread(target=stop, name="spark-stop", daemon=True).start()
        if stopped.wait(wait_s):
            self.sampler.forget("spark (bench JVM)")
        else:
            print(f"  Spark did not stop in {wait_s:.0f}s: the process ends hard", flush=True)
            self.hard_exit = True

    def drop_namespace(self, isolated: Settings) -> None:
        """Delete one namespace now (unless `--keep`), not at the teardown."""
        from tests.isolation import drop_isolated

        self.namespaces = [n for n in self.namespaces if n.postgres_db != isolated.postgres_db]
        if self.args.keep:
            print(f"  kept {isolated.events_topic}, {isolated.postgres_db}, buckets")
            return
        for problem in drop_isolated(self.settings, isolated):
            print(f"  could not delete {problem}", flush=True)

    def teardown(self) -> None:
        from infra.stack import stack

        if self.spark is not None:
            self.stop_spark()
        for isolated in list(self.namespaces):
            self.drop_namespace(isolated)
        for service in reversed(stack.services(self.settings)):
            if service.name in self.started_services:
                service.stop()
                print(f"  {service.name}: stopped (the bench started it)", flush=True)
        shutil.rmtree(self.work, ignore_errors=True)

    def rss(self) -> dict[str, Any]:
        report = self.sampler.report
        rss = report.as_dict()
        rss["peak_total_gib"] = round(report.peak_total_bytes / GIB, 2)
        rss["note"] = (
            "sum of RSS of Kafka, MinIO, Postgres (and children), the serving API and the "
            "bench's Spark JVM (and its Python workers), sampled every second; the bench's own "
            "Python process and the live producer are shown, not counted"
        )
        return rss

    # -- the steps ------------------------------------------------------------------------

    def run_step(self, name: str, needs: tuple[str, ...], body: Callable[[], Any]) -> Any:
        if name not in self.args.steps:
            return None
        missing = [n for n in needs if n in self.failed or n not in self.results.data]
        if missing:
            print(f"\n== {name}: skipped (needs {', '.join(missing)})", flush=True)
            self.failed.add(name)
            return None
        if _TERMINATING.is_set():
            raise Terminated("SIGTERM received")
        print(f"\n== {name}", flush=True)
        self.sampler.step(name)
        self.results.data["load_average"][name] = [round(x, 2) for x in os.getloadavg()]
        started = time.monotonic()
        try:
            value = body()
        except Exception as exc:
            if _TERMINATING.is_set():
                raise Terminated("SIGTERM received") from exc
            traceback.print_exc()
            print(f"== {name} failed: {type(exc).__name__}: {exc}", flush=True)
            self.results.data.setdefault("errors", {})[name] = f"{type(exc).__name__}: {exc}"
            self.failed.add(name)
            value = None
        else:
            self.results.data[name] = value
        self.results.data["step_seconds"][name] = round(time.monotonic() - started, 1)
        self.results.data["rss"] = self.rss()
        self.results.save()
        return value

    def workload(self, main: Settings, folder: Path) -> dict[str, Any]:
        from tests.benchmarks.workload import generate_and_produce

        return generate_and_produce(main, self.args.events, folder)

    def batch(self, main: Settings) -> dict[str, Any]:
        from tests.benchmarks import batch

        spark = self.spark_session(main)
        archived = batch.archive(spark, main)
        figures = batch.recompute(spark, main, profile=not self.args.no_profile)
        return {"archive": archived, **figures}

    def duckdb(self, main: Settings) -> dict[str, Any]:
        from core.master_dataset import MasterDataset
        from tests.benchmarks import duckdb_views

        spark = self.spark_session(main)
        master = MasterDataset.from_settings(main)
        batch = self.results.data["batch"]
        # The master dataset holds raw records, validated where they are read with the shared
        # parsing, which DuckDB has no copy of: Spark's parse (valid events, profile versions)
        # is written once as Parquet, and DuckDB computes the views from those files.
        event_files, profile_files = duckdb_views.parsed_input(spark, main, master)
        result = duckdb_views.compute(main, event_files, profile_files, batch["cutoff_ms"])
        spark_rows = duckdb_views.spark_rows(main, batch["version"])
        comparison = duckdb_views.compare(result.rows, spark_rows)
        total = result.load_seconds + result.views_seconds
        figures = {
            "note": "the batch views with the shared logic (core/views) on DuckDB, same files",
            "files": result.files,
            "events": result.events,
            "load_seconds": round(result.load_seconds, 2),
            "views_seconds": round(result.views_seconds, 2),
            "events_per_s": round(result.events / total),
            "views_events_per_s": round(result.events / result.views_seconds),
            "view_seconds": {k: round(v, 2) for k, v in result.view_seconds.items()},
            "comparison": comparison,
            "views_equal": sum(1 for c in comparison.values() if c["equal"]),
        }
        print(
            f"  DuckDB: {result.events:,} events from {result.files} files: load from MinIO "
            f"{result.load_seconds:.1f}s, dedup + 5 views {result.views_seconds:.1f}s = "
            f"{figures['events_per_s']:,} events/s ({figures['views_events_per_s']:,}/s once "
            "loaded)",
            flush=True,
        )
        for view, c in comparison.items():
            verdict = "equal" if c["equal"] else f"{c['differing_rows']:,} rows differ"
            print(
                f"    {view}: DuckDB {c['rows_duckdb']:,} rows, Spark {c['rows_spark']:,} rows: "
                f"{verdict}",
                flush=True,
            )
        return figures

    def replay(self, main: Settings) -> dict[str, Any]:
        from tests.benchmarks import replay

        budget = self.args.replay_budget
        if self.args.time_limit is not None:
            left = self.args.time_limit - (time.monotonic() - self.started) - TEARDOWN_RESERVE_S
            budget = left if budget is None else min(budget, left)
            if budget < 60:
                raise RuntimeError(f"no time left for the replay ({left:.0f}s before the limit)")
        spark = self.spark_session(main)
        return replay.run(spark, main, self.args.replay_max_offsets, budget)

    def speed(self, main: Settings) -> dict[str, Any]:
        from tests.benchmarks import speed

        live = self.namespace("benchspeed")
        config = speed.SpeedConfig(
            seconds=self.args.speed_seconds,
            rate=self.args.speed_rate,
            trigger_s=self.args.speed_trigger,
        )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return speed.run(self.spark_session(main), live, config, self.sampler, self.log_dir)

    def api(self) -> dict[str, Any]:
        from tests.benchmarks import api

        served = self.namespace("benchapi")
        config = api.ApiConfig(
            seconds=self.args.api_seconds,
            events=self.args.api_events,
            ingest_rate=self.args.api_ingest_rate,
            trigger_s=self.args.speed_trigger,
        )
        self.log_dir.mkdir(parents=True, exist_ok=True)
        return api.run(self.spark_session(served), served, config, self.sampler, self.log_dir)

    def cdc(self) -> dict[str, Any]:
        from tests.benchmarks import cdc

        own = self.namespace("benchcdc")
        return cdc.run(self.settings, own, cdc.CdcConfig(changes=self.args.cdc_changes))

    def sweep(self) -> dict[str, Any]:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        runs = sweep.Sweep(
            self.namespace,
            self.drop_namespace,
            self.sampler,
            stack_pids(self.settings),
            self.log_dir,
            self.work,
        )
        return runs.run(self.args.sweep_sizes, self.args.sweep_json)

    def run(self) -> int:
        args = self.args
        print(
            f"make bench: {args.events:,} events; steps {', '.join(args.steps)}; "
            f"results in {self.results.path}",
            flush=True,
        )
        # The bench's own Python process (generator, DuckDB, probes) is not part of the stack.
        self.sampler.watch("bench driver (not counted)", os.getpid(), counted=False, tree=False)
        self.sampler.start()
        previous = signal.signal(signal.SIGTERM, _terminated)
        try:
            print("\n== stack", flush=True)
            self.stack_up()
            uses_log = {"workload", "batch", "duckdb", "replay"} & set(args.steps)
            main = self.namespace("bench") if uses_log else self.settings
            with tempfile.TemporaryDirectory(dir=self.work) as tmp:  # gone once produced
                self.run_step("workload", (), lambda: self.workload(main, Path(tmp)))
            self.run_step("batch", ("workload",), lambda: self.batch(main))
            self.run_step("duckdb", ("batch",), lambda: self.duckdb(main))
            self.run_step("speed", (), lambda: self.speed(main))
            self.run_step("api", (), self.api)
            self.run_step("cdc", (), self.cdc)
            self.run_step("sweep", (), self.sweep)
            self.run_step("replay", ("workload",), lambda: self.replay(main))
        except Terminated as stop:
            print(f"\n== {stop}: stopping here", flush=True)
            self.results.data.setdefault("errors", {})["run"] = str(stop)
            self.failed.add("run")
        finally:
            print("\n== teardown", flush=True)
            self.sampler.step("teardown")
            try:
                self.teardown()
            finally:
                self.sampler.stop()
                self.results.data["rss"] = self.rss()
                self.results.data["cpu"] = self.sampler.cpu.as_dict()
                self.results.data["load_average"]["end"] = [round(x, 2) for x in os.getloadavg()]
                self.results.save()
                signal.signal(signal.SIGTERM, previous)
        print("\n" + table(self.results.data))
        print("\n" + state_lines(self.results.data))
        print("\n" + cpu_lines(self.results.data))
        print(
            f"\nmeasured on {machine()['cpus']} cores (load average at "
            f"the steps: {self.results.data['load_average']}); results in {self.results.path}"
        )
        return 1 if self.failed else 0


class Terminated(BaseException):  # like KeyboardInterrupt: no step's `except Exception` eats it
    """SIGTERM (as `timeout` sends): the bench stops, tears down and reports what it has."""


_TERMINATING = threading.Event()


def _terminated(signum: int, frame: object) -> None:
    # Also remembered: raised inside a py4j call, the exception comes back as a py4j error.
    _TERMINATING.set()
    raise Terminated(f"{signal.Signals(signum).name} received")


def main(argv: list[str] | None = None) -> int:
    bench = Bench(parse_args(argv))
    code = bench.run()
    if bench.hard_exit:  # a Spark thread is stuck: do not wait for it at interpreter exit
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
