"""Bench step 4 (Kappa): reprocessing by replay, timed.

`speed_layer.kappa.Reprocess(spark, settings).run(logic_version)` is what `lk reprocess` runs:
a new version of the Kappa views from offset 0 of the same log the Lambda steps archived, its
check, and the atomic switch of readers. Its replay rate is the `events` topic's records over
the replay's seconds; "to the switch" is the whole run from its start until readers switched.
The replay reads up to `max_offsets_per_trigger` records per micro-batch (a larger value than
the live default: fewer, bigger micro-batches, each with the engine's fixed costs once).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from core.catalog import DEFAULT_LOGIC_VERSION
from core.kafka_io import end_offsets
from core.settings import Settings
from tests.benchmarks.phases import PhaseTimer, phase_lines
from tests.benchmarks.progress import QueryWatcher

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def _records(settings: Settings, topic: str) -> int:
    return sum(high - low for low, high in end_offsets(settings, topic).values())


def run(
    spark: SparkSession,
    settings: Settings,
    max_offsets_per_trigger: int,
    budget_s: float | None = None,
) -> dict[str, Any]:
    """The reprocess, timed; with `budget_s`, its queries are stopped once that is spent and the
    rate is Spark's input rows over the micro-batches that finished (`complete`: False)."""
    from core.store.streams import KAPPA_PREFIX
    from speed_layer.kappa import Reprocess

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
            }
        )
        print(
            f"  replay: {events:,} events (+{profiles:,} profile records) in {replay_s:.1f}s = "
            f"{figures['replay_events_per_s']:,} events/s, {result.catch_up.micro_batches} "
            f"micro-batches of up to {max_offsets_per_trigger:,}; start to switch "
            f"{result.seconds_to_switch:.1f}s",
            flush=True,
        )
    for line in phase_lines(figures["engine_phases"]):
        print(line, flush=True)
    return figures
