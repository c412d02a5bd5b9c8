"""A stream's first micro-batch over the whole retained log, computed on Spark's executors.

A new Kappa version replays the log from offset 0. Merged on the driver, micro-batch after
micro-batch (``stream_engine.engine``), that replay would run on one thread of one process
while Lambda's batch layer recomputes the same history on every core and executor: the
comparison would measure two implementations, not two architectures. So a stream that starts
with nothing committed reads the log up to its end as **one micro-batch** of its own
streaming query (`availableNow`, no rate limit: the same source, parsing and deduplication
state as every later micro-batch), and computes it as Lambda's batch does, with Spark:

1. the late rule record by record, per partition in offset order (``core.event_clock``'s
   window form), and each partition's clock;
2. each view's partial aggregate of the on-time events (``core.views``, compiled for Spark),
   its totals, and its rows; the sessions;
3. the keyed state (partials and totals, encoded as the stream's own state; a state bounded by
   the watermark without what the replay's end has passed, as a micro-batch leaves it), the
   rows, a pattern view's matches, the late and quarantined records, written in bulk from the
   executors (``core.store.bulk``);
4. the stream's progress (the batch's end offsets, the clocks, the counts) in one transaction,
   which is what makes the rest visible to the next micro-batch and to the switch.

The query's deduplication state then holds every event id of the history, so a copy of a
replayed event arriving later is dropped as it would be by a stream that ran all along; the
next micro-batches merge on the driver from exactly those offsets, as Lambda's speed layer
continues from the batch's partials. Nothing here brings an event or a key to the driver.

Exactly once: nothing of a stream with no committed batch is visible to readers (a Kappa
version is switched to only after its replay). A run killed before the progress commit left
rows behind, which the re-run of the same batch (Spark replans it from its offsets log)
deletes before writing; a run killed after it is recognised by its batch id, as every
micro-batch is.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING

from core import ingestion
from core.catalog import MATCH_COLUMNS, MATCH_SPECS, MATCH_TIME_FIELDS, VIEWS
from core.event_clock import late_column
from core.settings import Settings
from core.spark import all_at_once, described
from core.store import bulk, realtime, state_values
from core.store.connection import connect
from core.store.schema import realtime_matches_table, realtime_table
from core.store.state import NO_MS, NO_TEXT, key_columns, totals_name
from core.views import PARTIALS, keep
from core.views.partials import EXPIRES, ROWS, PartialAggregate
from core.views.query import Query, on_spark, timestamps_of, with_timestamps
from core.views.tables import VIEW_INPUT_COLUMNS, watermarks_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from core.store.realtime import StreamProgress


HISTORY = "replay history"
"""How the history's Spark jobs are described (`core.spark.described`), stage by stage."""


@dataclass(frozen=True)
class HistoryOutcome:
    """What the history's micro-batch counted."""

    events: int
    """Valid first occurrences read from `events`."""
    kept: int
    """The on-time events the logic version lets the views see."""
    late: int
    quarantined: int
    profiles: int
    """Profile records read."""


def compute_history(
    settings: Settings,
    stream: str,
    records: DataFrame,
    progress: StreamProgress,
    batch_id: int,
    delay_ms: int,
    logic: Query | None,
    partitions: Collection[int] = (),
) -> HistoryOutcome:
    """Write the history's micro-batch (`records`: the engine's narrowed, deduplicated records
    of both topics) into `stream`'s state, rows and audit; `progress` is updated in memory for
    the caller's commit (clocks, watermark, counts). `partitions`: every partition of `events`
    the stream reads (one with no event yet holds back the expiry of a state bounded by the
    least watermark, as in a micro-batch)."""
    from pyspark.sql import functions as F  # deferred: pyspark

    with connect(settings) as conn:  # what a killed run of this batch left
        realtime.drop_stream(conn, stream)
    is_events = F.col("topic") == settings.events_topic
    is_profile = F.col("topic") == settings.profiles_topic
    # Every frame several jobs read is materialized once on the executors (`_materialized`):
    # the first reads the log, parses and deduplicates it (committing the query's
    # deduplication state).
    spark = records.sparkSession
    with described(spark, f"{HISTORY}: read the log, parse, deduplicate"):
        records = _materialized(records)
        counts = records.agg(
            F.count_if(is_events & F.col("reason").isNotNull()).alias("quarantined"),
            F.count_if(is_profile).alias("profiles"),
        ).first()
    assert counts is not None
    # The query's own session shuffles into as many partitions as its state has; the
    # history's aggregations take the batch layer's number, for every task slot.
    spark.conf.set("spark.sql.shuffle.partitions", str(settings.spark_shuffle_partitions))
    valid = records.where(is_events & F.col("reason").isNull()).select(*VIEW_INPUT_COLUMNS)
    # The late rule needs each partition's history in offset order: one sort, whose result
    # every later job reads (the on-time events) or writes (the late ones).
    with described(spark, f"{HISTORY}: the late rule, each partition's clock"):
        judged = _materialized(valid.withColumn("late", late_column(delay_ms)))
        per_partition = (
            judged.groupBy("partition")
            .agg(
                F.max("event_ts").alias("greatest"),
                F.count(F.lit(1)).alias("events"),
                F.count_if("late").alias("late"),
            )
            .collect()  # a row per partition of `events`
        )
    late = judged.where("late").select("event_id", "event_ts", "partition", "offset")
    events = keep(judged.where(~F.col("late")).select(*VIEW_INPUT_COLUMNS), logic)
    with described(spark, f"{HISTORY}: the on-time events, the profiles"):
        if logic is not None:  # a filter of the materialized events otherwise
            events = _materialized(events)
        kept = events.count()
        profiles = _materialized(
            ingestion.parse_profiles(records.where(is_profile).select(*ingestion.KAFKA_COLUMNS))
        )
    quarantine = records.where(is_events & F.col("reason").isNotNull()).select(
        "topic", "partition", "offset", "reason", "value"
    )
    # The clocks once the history is read: what a state bounded by the watermark keeps.
    for row in per_partition:
        progress.clocks.advance(int(row["partition"]), int(row["greatest"]))
    marks = spark.createDataFrame(
        watermarks_table(progress.clocks.thresholds(delay_ms, partitions))
    )
    writes: dict[str, Callable[[], None]] = {
        "late events": lambda: bulk.append(
            settings, "stream_late", _tagged(late, stream, batch_id)
        ),
        "quarantine": lambda: bulk.append(
            settings, "stream_quarantine", _tagged(quarantine, stream, batch_id)
        ),
        **{
            aggregate.view: partial(
                _write_view, settings, stream, aggregate, events, profiles, marks
            )
            for aggregate in PARTIALS.values()
        },
    }
    all_at_once(spark, HISTORY, writes)

    outcome = HistoryOutcome(
        events=sum(int(row["events"]) for row in per_partition),
        kept=kept,
        late=sum(int(row["late"]) for row in per_partition),
        quarantined=int(counts["quarantined"]),
        profiles=int(counts["profiles"]),
    )
    progress.watermark_ms = progress.clocks.watermark(delay_ms)
    progress.max_event_ts = progress.clocks.latest()
    progress.late_dropped += outcome.late
    progress.quarantined += outcome.quarantined
    return outcome


def _materialized(frame: DataFrame) -> DataFrame:
    """`frame` computed now, its rows kept on the executors' disks and read by every later job,
    which starts from them: its lineage is cut. Not `persist`: Spark reuses a cached frame
    only when a later plan matches its plan, and the views' plans (SQL over temporary views of
    a micro-batch's frames) matched none, so each recomputed the log's parse and deduplication.
    On disk, not in memory: the heap stays the engine's whatever the history (in a local
    driver the executors share it), and the garbage collector has less to do (the figures:
    docs/BENCHMARKS.md, a replay on Spark's task slots). A lost executor loses its part: the
    micro-batch fails and runs again."""
    from pyspark import StorageLevel

    return frame.localCheckpoint(eager=True, storageLevel=StorageLevel.DISK_ONLY)


def _tagged(frame: DataFrame, stream: str, batch_id: int) -> DataFrame:
    from pyspark.sql import functions as F

    return frame.select(F.lit(stream).alias("stream"), "*", F.lit(batch_id).alias("batch_id"))


def _write_view(
    settings: Settings,
    stream: str,
    aggregate: PartialAggregate,
    events: DataFrame,
    profiles: DataFrame,
    watermarks: DataFrame,
) -> None:
    """One view's keyed state and rows from the history's events: for an additive view its
    partial (the state a micro-batch looks keys up in; for a state bounded by the watermark,
    without what `watermarks` passed, after the totals took it), the totals per view row, the
    rows they finish into, and a pattern view's matches; the sessions, whose rows are their
    state."""
    from pyspark.sql import functions as F

    spark = events.sparkSession
    spec = VIEWS[aggregate.view]
    if not aggregate.additive:
        rows = on_spark(spark, aggregate.partial_query, in_events=events)
        _append_rows(settings, stream, aggregate.view, with_timestamps(rows, spec))
        return
    partial = on_spark(spark, aggregate.partial_query, in_events=events, in_profiles=profiles)
    partial = _materialized(partial)
    totals = on_spark(spark, aggregate.totals_query, in_partial=partial)
    totals = _materialized(totals.where(F.col(ROWS) > 0))
    if aggregate.matches_query is not None:  # of every search, an expired one's included
        found = on_spark(spark, aggregate.matches_query, in_partial=partial)
        _append_matches(settings, stream, aggregate.view, found)
    state, expires = partial, None
    if aggregate.expire_query is not None and aggregate.expires_query is not None:
        state = on_spark(
            spark, aggregate.expire_query, in_partial=partial, in_watermarks=watermarks
        )
        state = on_spark(spark, aggregate.expires_query, in_partial=state)
        expires = EXPIRES
    _append_state(
        settings,
        stream,
        aggregate.view,
        state.select(*aggregate.schema.names, *([expires] if expires else [])),
        aggregate.key,
        aggregate.link,
        expires,
    )
    _append_state(settings, stream, totals_name(aggregate.view), totals, aggregate.total_key)
    rows = on_spark(spark, aggregate.finish_totals_query, in_totals=totals)
    _append_rows(settings, stream, aggregate.view, with_timestamps(rows, spec))


def _append_rows(settings: Settings, stream: str, view: str, rows: DataFrame) -> None:
    from pyspark.sql import functions as F

    tagged = rows.select(F.lit(stream).alias("stream"), *VIEWS[view].columns)
    bulk.append(settings, realtime_table(view), tagged)


def _append_matches(settings: Settings, stream: str, view: str, found: DataFrame) -> None:
    from pyspark.sql import functions as F

    rows = timestamps_of(found, MATCH_COLUMNS, MATCH_TIME_FIELDS)
    tagged = rows.select(F.lit(stream).alias("stream"), *MATCH_SPECS[view].columns)
    bulk.append(settings, realtime_matches_table(view), tagged)


def _append_state(
    settings: Settings,
    stream: str,
    name: str,
    rows: DataFrame,
    key: tuple[str, ...],
    link: str | None = None,
    expires: str | None = None,
) -> None:
    """Rows of one state, keyed and encoded as ``core.store.state`` keeps a stream's own (with
    their `link` column's value, for a partial whose finish joins its rows, and their
    `expires` column's, not part of the value, for a state bounded by the watermark)."""
    from pyspark.sql import functions as F

    text, ms = _key_columns(rows, key)
    values = [c for c in rows.columns if c != expires]
    state = rows.select(
        F.lit(stream).alias("stream"),
        F.lit(name).alias("view"),
        (F.col(text) if text else F.lit(NO_TEXT)).alias("key_text"),
        (F.col(ms).cast("bigint") if ms else F.lit(NO_MS).cast("bigint")).alias("key_ms"),
        state_values.on_spark(rows, values).alias("value"),
        (F.col(link) if link else F.lit(None).cast("string")).alias("link_text"),
        (F.col(expires) if expires else F.lit(None).cast("bigint")).alias("expires_ms"),
    )
    bulk.append(settings, "stream_state", state)


def _key_columns(rows: DataFrame, key: tuple[str, ...]) -> tuple[str | None, str | None]:
    """``core.store.state.key_columns`` for a Spark frame (its schema as Arrow's)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return key_columns(to_arrow_schema(rows.schema), key)
