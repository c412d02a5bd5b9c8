"""Bench step 2 (Lambda): archive the log into the master dataset (raw records, no parse: the
archive rate in records/s), then time the batch layer's run over all of it
(`batch_layer.pipeline.run_batch`, as `lk drain` runs it: the cutoff after the last event, so
every event counts), which parses the master dataset once and recomputes the five views.

`run_batch` is timed as a whole and by its steps as they happen (`batch_layer.pipeline`): the
parse of the master dataset, once per run (`job.BatchInput.share`: the cache that both the raw
gate and the recompute read), the raw quality gate, the recompute (views computed and written:
the headline figure), the views' quality gate; inside the recompute, the five views' writes
(`write_version`: five Spark jobs at once, one per view, computed as they are written to
Postgres by JDBC), each timed from its start to its end (they overlap). With `profile`, the
input side is then timed on its own, run into Spark's `noop` sink (the plan runs in full,
nothing is written): reading the raw master dataset, parsing it with the shared parsing, and
the deduplication of the columns the views read (`job.deduplicated`, parse included).
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from batch_layer import archiver, job
from core.master_dataset import RAW_COLUMNS, MasterDataset
from core.settings import Settings
from core.store.schema import batch_table
from tests.benchmarks.phases import wrapped
from tests.benchmarks.progress import QueryWatcher

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession


def archive(spark: SparkSession, settings: Settings) -> dict[str, Any]:
    """`archiver.drain`: the whole log into the master dataset; its rate in log records/s."""
    from core.kafka_io import end_offsets

    records = sum(high - low for low, high in end_offsets(settings, settings.events_topic).values())
    with QueryWatcher(spark) as watcher:
        started = time.monotonic()
        archiver.drain(spark, settings)
        seconds = time.monotonic() - started
    progress = watcher.of("archiver-")
    master = MasterDataset.from_settings(settings)
    archived = spark.read.format("delta").load(master.events).count()
    profiles = spark.read.format("delta").load(master.profiles).count()
    print(
        f"  archive: {records:,} event records in {seconds:.1f}s = {records / seconds:,.0f} "
        f"records/s ({archived:,} event and {profiles:,} profile records in the master "
        "dataset, raw: validated where they are read)",
        flush=True,
    )
    for line in QueryWatcher.printable(progress):
        print(line, flush=True)
    return {
        "log_records": records,
        "seconds": round(seconds, 2),
        "records_per_s": round(records / seconds),
        "master_records": archived,
        "master_profile_records": profiles,
        "spark_batches": progress,
    }


def _noop(frame: DataFrame) -> float:
    """Seconds to run `frame`'s whole plan with nothing written."""
    started = time.monotonic()
    frame.write.format("noop").mode("overwrite").save()
    return time.monotonic() - started


class _Calls:
    """Wrapped calls, each with the wrapped call it ran inside: the innermost one open on its
    own thread, else on run_batch's (`write_version` writes the views from threads of its own),
    and its arguments."""

    def __init__(self) -> None:
        self.main = threading.get_ident()
        self.stacks: dict[int, list[str]] = {}
        self.calls: list[tuple[str, float, str | None, tuple[Any, ...]]] = []
        self.lock = threading.Lock()

    def enter(self, label: str) -> str | None:
        with self.lock:
            stack = self.stacks.setdefault(threading.get_ident(), [])
            outer = stack or self.stacks.get(self.main, [])
            parent = outer[-1] if outer else None
            stack.append(label)
            return parent

    def exit(self, label: str, seconds: float, args: tuple[Any, ...], parent: Any) -> None:
        with self.lock:
            self.stacks[threading.get_ident()].pop()
            self.calls.append((label, seconds, parent, args))

    def each(self, label: str, parent: str | None) -> list[float]:
        return [s for name, s, inside, _ in self.calls if name == label and inside == parent]

    def writes(self) -> dict[str, float]:
        """Seconds of each JDBC write (`DataFrameWriter.jdbc(url, table, ...)`), by table."""
        return {args[2]: s for name, s, _, args in self.calls if name == WRITE}


PARSE = "parse, once (shared parsing, cached for the gate and the recompute)"
RAW_GATE = "raw quality gate (Great Expectations)"
VIEWS = "views computed and written (pipeline.compute)"
VIEWS_GATE = "views quality gate (Great Expectations)"
READY = "mark ready"
WRITES = "the views written, at once (job.write_version)"
WRITE = "one view's JDBC write"


def recompute(spark: SparkSession, settings: Settings, *, profile: bool) -> dict[str, Any]:
    """`run_batch` with the cutoff after the last event, timed by its steps; the headline rate
    is that of the recompute itself (views computed and written), the parse and the gates shown
    beside."""
    from batch_layer import pipeline

    master = MasterDataset.from_settings(settings)
    events = job.read_master_events(spark, master)
    rows = events.count()  # raw records, valid or not: what the batch reads and parses

    # run_batch's steps, and inside the recompute, `write_version` and each view's JDBC write.
    targets = {
        PARSE: (job.BatchInput, "share"),
        RAW_GATE: (pipeline, "validate_raw"),
        VIEWS: (pipeline, "compute"),
        VIEWS_GATE: (pipeline, "validate_views"),
        READY: (pipeline, "mark_ready"),
        WRITES: (pipeline, "write_version"),
        WRITE: (type(events.write), "jdbc"),
    }
    calls = _Calls()
    with wrapped(targets, calls.exit, calls.enter):
        started = time.monotonic()
        result = pipeline.run_batch(spark, settings, drain=True)
        seconds = time.monotonic() - started

    labels = (PARSE, RAW_GATE, VIEWS, VIEWS_GATE, READY)
    step_s = {label: sum(calls.each(label, None)) for label in labels}
    views_s, parse_s = step_s[VIEWS], step_s[PARSE]
    writes = calls.writes()
    parts = {name: {"write_s": round(writes[batch_table(name)], 2)} for name in result.row_counts}
    inside = sum(calls.each(WRITES, VIEWS))
    print(
        f"  parse of the master dataset, once per run (shared parsing, cached): {rows:,} records "
        f"in {parse_s:.1f}s = {rows / parse_s:,.0f} records/s; {result.quarantined:,} invalid",
        flush=True,
    )
    print(
        f"  batch recompute (5 views computed, written to Postgres): {rows:,} records in "
        f"{views_s:.1f}s = {rows / views_s:,.0f} records/s (with the parse: "
        f"{parse_s + views_s:.1f}s); rows: "
        + ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items()),
        flush=True,
    )
    print(
        f"    the five views computed and written at once: {inside:.1f}s ("
        + ", ".join(f"{name} {part['write_s']:.1f}s" for name, part in parts.items())
        + ")",
        flush=True,
    )
    print(
        f"    rest of the recompute (deduplication, reading the Delta log, building plans, "
        f"Postgres bookkeeping): {views_s - inside:.1f}s",
        flush=True,
    )
    print(
        f"  run_batch in all, with its quality gates: {seconds:.1f}s = "
        f"{rows / seconds:,.0f} records/s ("
        + ", ".join(f"{label} {s:.1f}s" for label, s in step_s.items())
        + ")",
        flush=True,
    )
    figures: dict[str, Any] = {
        "master_records": rows,
        "quarantined": result.quarantined,
        "cutoff_ms": result.cutoff_ms,
        "version": result.version,
        "seconds": round(views_s, 2),
        "events_per_s": round(rows / views_s),
        "parse_seconds": round(parse_s, 2),
        "parse_records_per_s": round(rows / parse_s) if parse_s else None,
        "run_batch_seconds": round(seconds, 2),
        "run_batch_events_per_s": round(rows / seconds),
        "steps_s": {k: round(v, 2) for k, v in step_s.items()},
        "row_counts": result.row_counts,
        "views_written_s": round(inside, 2),
        "views_s": parts,
        "recompute_rest_s": round(views_s - inside, 2),
    }
    if profile:
        figures["profile_s"] = _profile(events)
    return figures


def _profile(events: DataFrame) -> dict[str, float]:
    """The recompute's input side on its own, into the `noop` sink (see the module docstring):
    what reading the raw records costs, what the shared parsing adds, and the deduplication."""
    print("    on their own (noop sink):", flush=True)
    parsed = job.parse_master_events(events)
    parts: dict[str, float] = {}
    parts["read master (raw records)"] = _noop(events.select(*RAW_COLUMNS))
    parts["parse (job.parse_master_events)"] = _noop(parsed)
    parts["parse + dedup, view columns (job.deduplicated)"] = _noop(job.deduplicated(parsed))
    for part, seconds in parts.items():
        print(f"    {seconds:7.1f}s  {part}", flush=True)
    return {k: round(v, 2) for k, v in parts.items()}
