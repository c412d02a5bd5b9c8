"""Bench step 2 (Lambda): archive the log into the master dataset, then time the batch layer's
recompute of the five views over all of it (`batch_layer.job.run_batch`, as `lk drain` runs it:
the cutoff after the last event, so every event counts).

`run_batch` is timed as a whole and by its own parts as they happen: reading the master
dataset's Delta log, and for each view its planning (`persist`), its computation (the cached
count in `write_version`) and its JDBC write to Postgres. With `profile`, the input side is then
timed on its own, run into Spark's `noop` sink (the plan runs in full, nothing is written):
reading the master dataset, and the deduplication of whole master rows (as `batch_views` does
it) against that of only the columns the views read.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from batch_layer import archiver, job
from batch_layer.cutoff import drain_cutoff
from batch_layer.master_dataset import MasterDataset
from core.settings import Settings
from core.views import parsing
from tests.benchmarks.phases import wrapped
from tests.benchmarks.progress import QueryWatcher

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

# What the five views read of an event (core/views): the rest of a master row (raw value, key,
# Kafka timestamp, archive time) is carried for the record only.
VIEW_COLUMNS = (
    "event_id",
    "type",
    "user_id",
    "page",
    "query",
    "search_id",
    "amount_cents",
    "event_ts",
    "event_time",
    "partition",
    "offset",
)


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
    quarantined = spark.read.format("delta").load(master.quarantine).count()
    print(
        f"  archive: {records:,} log records in {seconds:.1f}s = {records / seconds:,.0f}/s "
        f"({archived:,} events in the master dataset, {quarantined:,} quarantined)",
        flush=True,
    )
    for line in QueryWatcher.printable(progress):
        print(line, flush=True)
    return {
        "log_records": records,
        "seconds": round(seconds, 2),
        "records_per_s": round(records / seconds),
        "master_events": archived,
        "quarantined": quarantined,
        "spark_batches": progress,
    }


def _noop(frame: DataFrame) -> float:
    """Seconds to run `frame`'s whole plan with nothing written."""
    started = time.monotonic()
    frame.write.format("noop").mode("overwrite").save()
    return time.monotonic() - started


def recompute(spark: SparkSession, settings: Settings, *, profile: bool) -> dict[str, Any]:
    master = MasterDataset.from_settings(settings)
    events = job.read_master_events(spark, master)
    rows = events.count()
    latest = job.max_event_ts(events)
    if latest is None:
        raise RuntimeError("the master dataset holds no event")
    cutoff = drain_cutoff(latest)

    # run_batch's own parts as they happen: reading the master dataset's Delta log, then per
    # view `write_version`'s `persist` (plans the query), its count (computes and caches the
    # view) and its JDBC write to Postgres.
    calls: list[tuple[str, float]] = []
    targets = {
        "read": (job, "read_master_events"),
        "read profiles": (job, "read_master_profiles"),
        "plan": (type(events), "persist"),
        "compute": (type(events), "count"),
        "write": (type(events.write), "jdbc"),
    }
    with wrapped(targets, lambda label, seconds, _args, _token: calls.append((label, seconds))):
        started = time.monotonic()
        result = job.run_batch(spark, settings, cutoff_ms=cutoff)
        seconds = time.monotonic() - started

    def each(label: str) -> list[float]:
        return [s for name, s in calls if name == label]

    parts = {
        name: {"plan_s": round(p, 2), "compute_s": round(c, 2), "write_s": round(w, 2)}
        for name, p, c, w in zip(
            result.row_counts, each("plan"), each("compute"), each("write"), strict=False
        )
    }
    totals = {label: sum(each(label)) for label in targets}
    rest = seconds - sum(totals.values())
    print(
        f"  batch recompute (run_batch, 5 views -> Postgres): {rows:,} events in {seconds:.1f}s "
        f"= {rows / seconds:,.0f} events/s; rows: "
        + ", ".join(f"{k} {v:,}" for k, v in result.row_counts.items()),
        flush=True,
    )
    print(
        f"    reading the master dataset (Delta log): "
        f"{totals['read'] + totals['read profiles']:.1f}s; rest (Postgres bookkeeping, "
        f"Python): {rest:.1f}s",
        flush=True,
    )
    for name, part in parts.items():
        print(
            f"    {name}: planned {part['plan_s']:.1f}s, computed {part['compute_s']:.1f}s, "
            f"written {part['write_s']:.1f}s",
            flush=True,
        )
    figures: dict[str, Any] = {
        "master_events": rows,
        "cutoff_ms": cutoff,
        "version": result.version,
        "seconds": round(seconds, 2),
        "events_per_s": round(rows / seconds),
        "row_counts": result.row_counts,
        "parts_s": parts,
        "totals_s": {k: round(v, 2) for k, v in totals.items()},
        "rest_s": round(rest, 2),
    }
    if profile:
        figures["profile_s"] = _profile(events)
    return figures


def _profile(events: DataFrame) -> dict[str, float]:
    """The recompute's input side on its own, into the `noop` sink (see the module docstring):
    what reading costs, and what carrying whole master rows through the dedup costs."""
    print("    on their own (noop sink):", flush=True)
    parts: dict[str, float] = {}
    parts["read master (view columns)"] = _noop(events.select(*VIEW_COLUMNS))
    parts["dedup, whole master rows (as batch_views)"] = _noop(parsing.first_in_log(events))
    parts["dedup, view columns only"] = _noop(parsing.first_in_log(events.select(*VIEW_COLUMNS)))
    for part, seconds in parts.items():
        print(f"    {seconds:7.1f}s  {part}", flush=True)
    return {k: round(v, 2) for k, v in parts.items()}
