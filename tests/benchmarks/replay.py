"""Bench step 4 (Kappa): reprocessing by replay, timed.

`kappa.job.Reprocess(spark, settings).run(logic_version)` is what `lk reprocess` runs:
a new version of the Kappa views from offset 0 of the same log the Lambda steps archived, its
check, and the atomic switch of readers. Its replay rate is the `events` topic's records over
the replay's seconds; "to the switch" is the whole run from its start until readers switched.
The replay reads up to `max_offsets_per_trigger` records per micro-batch (a larger value than
the live default: fewer, bigger micro-batches, each with the engine's fixed costs once).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import psutil

from core.catalog import DEFAULT_LOGIC_VERSION
from core.kafka_io import end_offsets
from core.settings import Settings
from tests.benchmarks.cpu import machine_seconds
from tests.benchmarks.phases import PhaseTimer, phase_lines
from tests.benchmarks.progress import QueryWatcher

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _records(settings: Settings, topic: str) -> int:
    return sum(high - low for low, high in end_offsets(settings, topic).values())


def plain_consumer(settings: Settings, topic: str) -> dict[str, Any]:
    """A plain Kafka consumer reading the whole topic and doing nothing else: the physical
    limit a replay on this machine can be compared with."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

    ends = end_offsets(settings, topic)
    total = sum(high - low for low, high in ends.values())
    consumer = Consumer(
        {
            "bootstrap.servers": settings.kafka_bootstrap,
            "group.id": "lk-bench-plain",
            "enable.auto.commit": False,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in ends])
    me = psutil.Process()
    own_before, busy_before = sum(me.cpu_times()[:2]), machine_seconds()[0]
    started, seen = time.monotonic(), 0
    try:
        while seen < total and time.monotonic() - started < 600:
            seen += len(consumer.consume(num_messages=10_000, timeout=1.0))
    finally:
        consumer.close()
    seconds = time.monotonic() - started
    busy = machine_seconds()[0] - busy_before
    return {
        "records": seen,
        "seconds": round(seconds, 1),
        "records_per_s": round(seen / seconds),
        # What reading alone costs, the consumer (librdkafka's threads are this process's) and
        # the machine (the broker too; nothing else runs then): the CPU left for the work itself.
        "consumer_cpu_s": round(sum(me.cpu_times()[:2]) - own_before, 1),
        "machine_busy_cpu_s": round(busy, 1),
        "machine_cpu_us_per_record": round(busy / max(seen, 1) * 1e6, 2),
    }


def state_sizes(settings: Settings, stream: str) -> dict[str, Any]:
    """The stream's keyed state per view (serving store) and its deduplication state (the
    RocksDB files in its checkpoint on MinIO)."""
    from core.store import state
    from core.store.connection import connect
    from infra.stack.minio import s3_client

    with connect(settings) as conn:
        views = state.sizes(conn, stream)
    client = s3_client(settings)
    dedup = 0
    for page in client.get_paginator("list_objects_v2").paginate(
        Bucket=settings.checkpoints_bucket, Prefix=f"{stream}/state/"
    ):
        dedup += sum(item["Size"] for item in page.get("Contents", []))
    return {"views": views, "dedup_checkpoint_bytes": dedup}


def run(
    spark: SparkSession,
    settings: Settings,
    max_offsets_per_trigger: int,
    budget_s: float | None = None,
) -> dict[str, Any]:
    """The reprocess, timed; with `budget_s`, its queries are stopped once that is spent and the
    rate is Spark's input rows over the micro-batches that finished (`complete`: False)."""
    from core.store.streams import KAPPA_PREFIX, kappa_stream
    from kappa.reprocess import Reprocess

    replay_settings = settings.model_copy(
        update={"stream_max_offsets_per_trigger": max_offsets_per_trigger}
    )
    events = _records(settings, settings.events_topic)
    profiles = _records(settings, settings.profiles_topic)
    timer = PhaseTimer()
    error = None
    watcher = QueryWatcher(spark, budget_s=budget_s, on_expiry=timer.interrupt)
    with timer.installed(), watcher:
        started = time.monotonic()
        try:
            result = Reprocess(spark, replay_settings, echo=lambda line: print(f"  {line}")).run(
                DEFAULT_LOGIC_VERSION
            )
        except Exception as exc:
            if not watcher.expired:
                raise
            result, error = None, f"{type(exc).__name__}: {exc}"
        seconds = time.monotonic() - started
    spark_rate = QueryWatcher.rate(watcher.of(KAPPA_PREFIX))
    figures: dict[str, Any] = {
        "max_offsets_per_trigger": max_offsets_per_trigger,
        "events_records": events,
        "profiles_records": profiles,
        "complete": not watcher.expired,
        "budget_s": budget_s,
        "seconds_total": round(seconds, 1),
        "spark_progress": spark_rate,
        "engine_phases": timer.summary(),
        "engine_batches": [b.as_dict() for b in timer.batches],
    }
    for line in QueryWatcher.printable(watcher.of(KAPPA_PREFIX)):
        print(line, flush=True)
    if watcher.expired or result is None:
        # Stopped by the budget: only what Spark reports of the finished micro-batches counts.
        figures["replay_events_per_s"] = spark_rate["rows_per_s"]
        figures["error"] = error
        print(
            f"  replay stopped after its {budget_s:.0f}s budget: {spark_rate['input_rows']:,} "
            f"of {events + profiles:,} records in {spark_rate['span_s']:.1f}s = "
            f"{spark_rate['rows_per_s']:,} records/s (no switch measured)",
            flush=True,
        )
    else:
        replay_s = result.timings.get("replay", seconds)
        figures.update(
            {
                "replay_seconds": round(replay_s, 1),
                "replay_events_per_s": round(events / replay_s) if replay_s else 0,
                "seconds_to_switch": round(result.seconds_to_switch, 1),
                "timings_s": result.timings,
                "rounds": result.catch_up.rounds,
                "micro_batches": result.catch_up.micro_batches,
                "version": result.version,
                "row_counts": result.row_counts,
                "state": state_sizes(settings, kappa_stream(result.version)),
            }
        )
        plain = plain_consumer(settings, settings.events_topic)
        figures["plain_consumer"] = plain
        figures["replay_vs_plain_consumer"] = round(
            figures["replay_events_per_s"] / plain["records_per_s"], 3
        )
        print(
            f"  replay: {events:,} events (+{profiles:,} profile records) in {replay_s:.1f}s = "
            f"{figures['replay_events_per_s']:,} events/s, {result.catch_up.micro_batches} "
            f"micro-batches of up to {max_offsets_per_trigger:,}; start to switch "
            f"{result.seconds_to_switch:.1f}s; a plain consumer reads the topic at "
            f"{plain['records_per_s']:,} records/s (replay = "
            f"{figures['replay_vs_plain_consumer']:.0%} of it), for "
            f"{plain['machine_cpu_us_per_record']} CPU-µs of the machine a record",
            flush=True,
        )
    for line in phase_lines(figures["engine_phases"]):
        print(line, flush=True)
    return figures
