"""The stream engine: the log, micro-batch by micro-batch, into real-time views.

The Lambda speed layer and the Kappa job are both this engine, with different settings (a
stream name, and for Lambda the batch cutoff it must stay after). The streaming query (Spark
Structured Streaming) parses every record with the shared parsing and keeps the first
occurrence of each event with Spark's own deduplication (``dropDuplicates`` on the event id,
its keys in the RocksDB state store of the query's checkpoint): a keyed lookup per event, so a
re-sent copy of an event is never seen again, whether that event was accepted or dropped as
late. Each micro-batch reaches the driver as one Arrow table (one Spark job), is written to the
inbox (``stream_engine.inbox``) and handed to the merge thread; Spark then starts the next
micro-batch while the merge thread, in batch order:

1. sends invalid records to the stream's quarantine (with the reason);
2. drops the events behind the event-time watermark of their own partition, record by record
   in offset order (the greatest event time of the events before it in that partition, in the
   earlier micro-batches or earlier in this one, less the delay: ``core.event_clock``) and
   records each one, so `late_dropped` is a true count, the same however the log is cut into
   micro-batches, and the dropped events can be listed; a partition read ahead of another
   never makes the other's events late;
3. merges the partial aggregate of its new events (and new profile versions) into the keyed
   state of the keys they touch, on DuckDB, with the shared view definitions
   (``stream_engine.keyed_merge``, ``core.views.PARTIALS``);
4. writes the changed view rows, the touched keys' state, the audit rows and its progress in
   one transaction, then deletes the batch from the inbox.

Spark may commit a batch in its checkpoint before the store does (at most two behind: one
merging, one waiting): a restart first merges the inbox's batches after the store's last one.
The store's progress says what readers see; `finish` waits for the merges after a query stops.

The work of a micro-batch follows its new input: nothing scans the history.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from core import ingestion
from core.checkpoints import Offsets, batch_offsets, checkpoint_id, last_committed
from core.event_clock import EventClocks, split_late
from core.events import profile_from_record
from core.kafka_io import lost_records
from core.object_store import object_store
from core.settings import Settings
from core.spark import start_checkpointed, wait_stopped
from core.store import realtime
from core.store import state as stored_state
from core.store.connection import connect, stream_lock
from core.store.realtime import Change, StreamProgress
from core.store.state import StateRows, StateWrites
from core.times import to_ms
from core.views import tables
from core.views.query import Query
from stream_engine import accepted_log
from stream_engine import metrics as stream_metrics
from stream_engine.accepted_log import AcceptedLog
from stream_engine.inbox import Inbox, PendingBatch, inbox_root
from stream_engine.keyed_merge import KeyedMerge, PartialSeeds
from stream_engine.log_bounds import StreamLogBounds
from stream_engine.merge_thread import MergeThread
from stream_engine.metrics import Stopwatch, StreamMetrics
from stream_engine.session_seeds import SessionSeeds

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

RECORD_COLUMNS = ("topic", "partition", "offset", "reason")
"""What a micro-batch brings to the driver of every record, beside the event columns (and the
key, value and timestamp of the records that need them: a quarantined one keeps its value, a
profile is read from all three)."""

EVENTS = tables.EVENTS.to_pyarrow()
PROFILES = tables.PROFILES.to_pyarrow()


@dataclass(frozen=True)
class StreamSpec:
    stream: str
    checkpoint: str
    watermark_delay_ms: int
    architecture: str
    """`lambda` (the speed layer) or `kappa`: the label of the stream's metrics."""
    accepted_log: AcceptedLog | None = None
    """Lambda only: the log of the events the stream accepted, which a hand-off to a new
    batch cutoff (or logic version) recomputes the real-time views from."""
    cutoff: Callable[[psycopg.Connection], int | None] = lambda conn: None
    """Event time before which another layer is responsible (Lambda: the batch cutoff)."""
    session_seeds: SessionSeeds = lambda conn, users, cutoff: []
    partial_seeds: PartialSeeds = lambda conn, view: []
    """Lambda: the published batch's partials of the views of the current state, merged per key
    into the stream's own at a hand-off (``KeyedMerge.recompute``)."""
    max_offsets_per_trigger: int = 200_000
    logic: Callable[[psycopg.Connection], Query | None] = lambda conn: None
    """The logic version's query on the events the views see, read at every micro-batch and
    hand-off (Kappa: its version's; Lambda: the published batch's, so that a logic change
    applies on both sides of the cutoff). Applied after deduplication, as in the batch layer."""
    writable: Callable[[psycopg.Connection], bool] = lambda conn: True
    """False once the stream's output is retired: its micro-batches must stop committing."""
    history_on_spark: bool = False
    """Kappa: a start with nothing committed first reads the whole log as one micro-batch,
    computed on Spark's executors (``stream_engine.history``), then goes on as asked."""


class StreamRetiredError(RuntimeError):
    """The stream's output was retired (a newer Kappa version took over): stop this job."""


class DataLossError(RuntimeError):
    """Events the stream had not read left the log: its views would silently miss them."""


@dataclass
class BatchOutcome:
    batch_id: int
    new_events: int = 0
    late: int = 0
    invalid: int = 0
    keys: dict[str, int] = field(default_factory=dict)
    """Per view, the partial keys this micro-batch touched."""
    state_rows: dict[str, int] = field(default_factory=dict)
    """Per view, the net change of the stream's keyed state rows in the store."""
    skipped: bool = False


@dataclass(frozen=True)
class MicroBatch:
    """One micro-batch's records on the driver, split by what becomes of them."""

    quarantine: list[tuple]
    """Invalid event records: (topic, partition, offset, reason, value)."""
    events: pa.Table
    """Valid first occurrences (``core.views.tables.EVENTS``)."""
    profiles: pa.Table
    """Profile versions and tombstones (``core.views.tables.PROFILES``)."""


def split(records: pa.Table, events_topic: str, profiles_topic: str) -> MicroBatch:
    """A micro-batch's records (``RECORD_COLUMNS``, the event columns, ``value``, ``key`` and
    ``timestamp``) split into quarantine, events and profile versions. A profile record is
    read with the rules of ``core.events.profile_from_record`` (micro-batches carry few); one
    it refuses is left out, as ``core.ingestion.parse_profiles`` leaves it out."""
    topic = records.column("topic")
    is_event = pc.equal(topic, events_topic)
    valid = pc.is_null(records.column("reason"))
    invalid = records.filter(pc.and_(is_event, pc.invert(valid)))
    quarantine = list(
        zip(
            *(invalid.column(c).to_pylist() for c in ("topic", "partition", "offset", "reason")),
            invalid.column("value").to_pylist(),
            strict=True,
        )
    )
    events = records.filter(pc.and_(is_event, valid)).select(EVENTS.names).cast(EVENTS)
    versions = []
    for record in records.filter(pc.equal(topic, profiles_topic)).to_pylist():
        try:
            change = profile_from_record(record["key"], record["value"], to_ms(record["timestamp"]))
        except (ValueError, TypeError, RecursionError):
            continue
        if not _LONG_MIN <= change.updated_ts <= _LONG_MAX:  # Spark's parse reads a long
            continue
        versions.append(
            {
                "user_id": change.user_id,
                "segment": change.segment,
                "updated_ts": change.updated_ts,
                "partition": record["partition"],
                "offset": record["offset"],
            }
        )
    return MicroBatch(quarantine, events, pa.Table.from_pylist(versions, schema=PROFILES))


_LONG_MIN, _LONG_MAX = -(2**63), 2**63 - 1


class StreamEngine:
    def __init__(self, spark: SparkSession, settings: Settings, spec: StreamSpec) -> None:
        self.spark = spark
        self.settings = settings
        self.spec = spec
        self.outcomes: list[BatchOutcome] = []
        self.keyed = KeyedMerge(spec.stream, spec.session_seeds)
        self._query_id: str | None = None
        self._failure: Exception | None = None
        self.inbox = Inbox(object_store(settings), inbox_root(spec.checkpoint))
        self._merges: MergeThread[PendingBatch] | None = None
        self._log_bounds = StreamLogBounds(settings)
        """The data-loss check's, asked at every micro-batch (and by a scrape, for the metrics)."""
        self.metrics = StreamMetrics(
            spec.architecture, settings, spec.watermark_delay_ms, ask_log_end=self._log_bounds
        )
        self._log_bounds.observe_ends(self.metrics.freshness.observe)
        self._last_end: tuple[int, Offsets] | None = None
        """The last micro-batch and where it read up to (its checkpoint's offsets log, read
        once: the next micro-batch starts there)."""
        self._history = False
        """The running query reads the history as one micro-batch (`history_on_spark`)."""

    # -- the query ------------------------------------------------------------------------

    def start(self, *, available_now: bool, trigger_seconds: float = 2.0):  # type: ignore[no-untyped-def]
        """Start the query (`availableNow`: up to the log's end as it stands now, then stop; else
        a micro-batch every `trigger_seconds`). A stream with ``history_on_spark`` and nothing
        committed first replays the log up to its end on Spark, and returns that stopped query
        if it failed."""
        if self.spec.history_on_spark and last_committed(self.spark, self.spec.checkpoint) is None:
            history = self._start(available_now=True, history=True)
            wait_stopped(history)
            if history.exception() is not None:
                return history  # the caller's `finish` says why
            self.finish(history)
        return self._start(available_now=available_now, trigger_seconds=trigger_seconds)

    def _start(self, *, available_now: bool, trigger_seconds: float = 2.0, history: bool = False):  # type: ignore[no-untyped-def]
        raw = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.settings.kafka_bootstrap)
            .option("subscribe", f"{self.settings.events_topic},{self.settings.profiles_topic}")
            .option("startingOffsets", "earliest")
            # Compaction of `profiles` leaves offset gaps by design, which this option would
            # take for loss; each micro-batch checks `events` itself (`lost_records`).
            .option("failOnDataLoss", "false")
        )
        if not history:  # the history is one micro-batch: the whole log up to its end
            raw = raw.option("maxOffsetsPerTrigger", self.spec.max_offsets_per_trigger)
        deduplicated = ingestion.first_occurrences(
            self._narrowed(ingestion.parse_events(raw.load())), self.settings.events_topic
        )
        self._history = history
        writer = deduplicated.writeStream.queryName(self.spec.stream).foreachBatch(
            self.process_batch
        )
        if self._merges is not None:
            self._merges.finish()  # a query started before: its merges are done first
        self._last_end = None  # batch ids of a checkpoint that may have been replaced since
        self._log_bounds.reopen()  # closed by `finish` of a query started before
        if self.settings.metrics_port is not None:  # served: start from what the store has
            self.count_state()
        stream_metrics.watch(self.metrics)
        self._merges = MergeThread(self._merge, f"{self.spec.stream}-merge")
        self._recover(self._merges)
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
        partitions = {"spark.sql.shuffle.partitions": str(self.settings.stream_state_partitions)}
        return start_checkpointed(self.spark, writer, self.spec.checkpoint, partitions)

    # -- one micro-batch ----------------------------------------------------------------------

    def count_state(self) -> None:
        """The metrics' state rows counted in the store, and where the stream's commits stand
        (at a start, or after a hand-off replaced the state): under the stream's lock, so that
        no micro-batch's change is counted twice or missed."""
        with connect(self.settings) as conn, stream_lock(conn, self.spec.stream):
            progress = realtime.load_progress(conn, self.spec.stream)
            self.metrics.count_state(stored_state.row_counts(conn, self.spec.stream))
            self.metrics.resume(progress.clocks, progress.offsets)

    def _checkpoint_id(self) -> str:
        """The id of the query numbering the batches (Spark wrote it before the first one)."""
        if self._query_id is None:
            self._query_id = checkpoint_id(self.spark, self.spec.checkpoint)
        return self._query_id

    def finish(self, query: StreamingQuery) -> str | None:
        """Once `query` has stopped: wait until the micro-batches it handed over are merged
        and committed, then why the stream stopped, None if it did not fail: the micro-batch's
        own error when it raised one (a sentence, not Spark's wrapping of a Python
        traceback), else Spark's."""
        merges_failed = self._merges.finish() if self._merges is not None else None
        self.keyed.close()  # the merge thread is done with it
        self._log_bounds.close()  # and the query's thread with this
        if merges_failed is not None:
            return str(merges_failed)
        if query.exception() is None:
            return None
        return str(self._failure) if self._failure is not None else str(query.exception())

    def process_batch(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self._process_batch(batch, batch_id)
        except Exception as exc:
            self._failure = exc
            raise

    def _progress(self, conn: psycopg.Connection) -> StreamProgress:
        """The stream's progress in the store, claimed for this query's checkpoint; refused
        once the stream's output is retired. Both sides of a micro-batch ask: Spark's side so
        as not to run a batch for nothing, the merge because it is the one that writes."""
        if not self.spec.writable(conn):
            raise StreamRetiredError(f"{self.spec.stream} is retired; its job stops here")
        return realtime.claim(realtime.load_progress(conn, self.spec.stream), self._checkpoint_id())

    def _process_batch(self, batch: DataFrame, batch_id: int) -> None:
        """Spark's side of a micro-batch, in the query's thread: its one Spark job (parse and
        deduplication) into the inbox, then handed to the merge. Spark commits the batch when
        this returns, possibly before the merge has: the inbox holds it meanwhile."""
        started = time.perf_counter()
        watch = Stopwatch()
        with connect(self.settings) as conn:
            progress = self._progress(conn)
        if batch_id <= progress.last_batch_id:
            # Committed here before a crash, not yet in Spark's commit log: nothing to
            # write, but the plan must still run to the end so that its deduplication
            # state commits this batch (Spark refuses a batch whose state stores did not).
            batch.write.format("noop").mode("overwrite").save()
            self.outcomes.append(BatchOutcome(batch_id, skipped=True))
            return
        end = self._read_range(batch_id, progress)
        watch.lap("offsets")
        # Its size, by where it ends (the same at a re-run of the batch, so the same path).
        if self._history and sum(end.values()) >= self.settings.stream_history_min_records:
            self._history_batch(batch, batch_id, progress, end, started, watch)
            return
        merges = self._merges
        assert merges is not None, "a micro-batch runs only in a started query"
        pending = PendingBatch(batch_id, self._collect(batch), end)
        watch.lap("spark_job")
        self.inbox.put(pending, self._checkpoint_id())
        watch.lap("inbox_write")
        merges.hand(pending)
        watch.lap("queue_wait")
        self.metrics.handed(batch_id, started, watch)

    def _read_range(self, batch_id: int, progress: StreamProgress) -> Offsets:
        """Where micro-batch `batch_id` reads up to; refused when records it should have read
        first left the log unread (`DataLossError`)."""
        checkpoint = self.spec.checkpoint
        last = self._last_end
        if last is not None and last[0] == batch_id - 1:
            before = last[1]
        else:  # the query's first micro-batch
            before = batch_offsets(self.spark, checkpoint, batch_id - 1)
        start = {**progress.offsets, **before}
        lost = lost_records(self.settings, self.settings.events_topic, start, self._log_bounds)
        if lost is not None:
            raise DataLossError(f"{self.spec.stream}: {lost}")
        end = batch_offsets(self.spark, checkpoint, batch_id)
        self._last_end = (batch_id, end)
        return end

    def _history_batch(
        self,
        batch: DataFrame,
        batch_id: int,
        progress: StreamProgress,
        end: Offsets,
        started: float,
        watch: Stopwatch,
    ) -> None:
        """The whole log up to `end` as one micro-batch, computed and written by Spark's
        executors (``stream_engine.history``), then the progress in one transaction, before
        Spark commits the batch (no inbox: the store has it first)."""
        from stream_engine.history import compute_history

        with connect(self.settings) as conn:
            logic = self.spec.logic(conn)
        outcome = compute_history(
            self.settings,
            self.spec.stream,
            batch.drop(ingestion.STREAM_DEDUP_KEY),
            progress,
            batch_id,
            self.spec.watermark_delay_ms,
            logic,
            partitions_of(end, self.settings.events_topic),
        )
        watch.lap("history")
        progress.offsets = {**progress.offsets, **end}
        with connect(self.settings) as conn, stream_lock(conn, self.spec.stream):
            self._progress(conn)  # still ours to write
            realtime.commit_batch(conn, progress, batch_id, [])
            watch.lap("store_commit")
            self.metrics.handed(batch_id, started, Stopwatch())
            self.metrics.committed(
                batch_id,
                watch,
                records_in={
                    self.settings.events_topic: outcome.events + outcome.quarantined,
                    self.settings.profiles_topic: outcome.profiles,
                },
                late=outcome.late,
                quarantined=outcome.quarantined,
                state_rows={},
                clocks=progress.clocks,
                offsets=progress.offsets,
            )
        self.count_state()  # the state rows the executors wrote
        self.outcomes.append(
            BatchOutcome(
                batch_id,
                new_events=outcome.kept,
                late=outcome.late,
                invalid=outcome.quarantined,
            )
        )

    def _recover(self, merges: MergeThread[PendingBatch]) -> None:
        """Before the query starts: hand over the inbox's batches that Spark committed and the
        store did not (a crash came between), in order; drop the rest (the store has them,
        or Spark runs them again)."""
        numbers = self.inbox.batch_ids()
        committed = last_committed(self.spark, self.spec.checkpoint)
        if committed is None:  # a new checkpoint, or nothing committed: Spark reruns it all
            for number in numbers:
                self.inbox.remove(number)
            return
        query = self._checkpoint_id()
        with connect(self.settings) as conn:
            progress = realtime.load_progress(conn, self.spec.stream)
        if progress.checkpoint_id not in (None, query):
            return  # another checkpoint's progress: the first micro-batch refuses it (`claim`)
        last = progress.last_batch_id
        found = {}
        for number in numbers:
            if last < number <= committed:
                pending, written_by = self.inbox.get(number)
                if written_by == query:
                    found[number] = pending
                    continue
            self.inbox.remove(number)
        missing = [n for n in range(last + 1, committed + 1) if n not in found]
        if missing and progress.checkpoint_id == query:
            raise DataLossError(
                f"{self.spec.stream}: micro-batches {missing[0]} to {missing[-1]} are committed "
                "in the checkpoint but neither in the serving store nor in the inbox"
            )
        for number in sorted(found):
            merges.hand(found[number])

    def _merge(self, pending: PendingBatch) -> None:
        """The driver's side of a micro-batch, in the merge thread, in batch order: the
        records into keyed state and real-time views, committed in one transaction."""
        batch_id = pending.batch_id
        with connect(self.settings) as conn, stream_lock(conn, self.spec.stream):
            progress = self._progress(conn)
            if batch_id <= progress.last_batch_id:  # committed before a crash
                self.outcomes.append(BatchOutcome(batch_id, skipped=True))
            else:
                watch = Stopwatch()
                settings = self.settings
                records = split(pending.records, settings.events_topic, settings.profiles_topic)
                watch.lap("split")
                partitions = partitions_of(pending.end, settings.events_topic)
                outcome, changes, writes = self._compute(
                    conn, records, batch_id, progress, watch, partitions
                )
                progress.offsets = {**progress.offsets, **pending.end}
                if realtime.commit_batch(conn, progress, batch_id, changes, writes):
                    watch.lap("store_commit")
                    events_in = records.events.num_rows + len(records.quarantine)
                    self.metrics.committed(
                        batch_id,
                        watch,
                        records_in={
                            settings.events_topic: events_in,
                            settings.profiles_topic: pending.records.num_rows - events_in,
                        },
                        late=outcome.late,
                        quarantined=outcome.invalid,
                        state_rows=outcome.state_rows,
                        clocks=progress.clocks,
                        offsets=progress.offsets,
                    )
                self.outcomes.append(outcome)
        self.inbox.remove(batch_id)

    def _narrowed(self, parsed: DataFrame) -> DataFrame:
        """What the micro-batch keeps of each parsed record, before the deduplication's
        shuffle (the fewer bytes it moves and later bring to the driver, the faster): the
        event columns; the value only of the records that need it (quarantined ones,
        profiles), the key and the timestamp only of profiles."""
        from pyspark.sql import functions as F

        settings = self.settings
        is_profile = F.col("topic") == settings.profiles_topic
        is_valid_event = (F.col("topic") == settings.events_topic) & F.col("reason").isNull()
        return parsed.select(
            *RECORD_COLUMNS,
            *(c for c in EVENTS.names if c not in RECORD_COLUMNS),
            F.when(~is_valid_event, F.col("value")).alias("value"),
            F.when(is_profile, F.col("key")).alias("key"),
            F.when(is_profile, F.col("timestamp")).alias("timestamp"),
        )

    def _collect(self, batch: DataFrame) -> pa.Table:
        """The micro-batch on the driver, as Arrow (``_narrowed``'s columns)."""
        return batch.drop(ingestion.STREAM_DEDUP_KEY).toArrow()

    def _compute(
        self,
        conn: psycopg.Connection,
        records: MicroBatch,
        batch_id: int,
        progress: StreamProgress,
        watch: Stopwatch,
        partitions: Collection[int] = (),
    ) -> tuple[BatchOutcome, list[Change], StateWrites]:
        """The micro-batch's outcome, view changes and state writes; `partitions`: every
        partition of `events` the stream reads (those it has not read an event from yet hold
        back the expiry of a state bounded by the least watermark)."""
        outcome = BatchOutcome(batch_id)
        writes = StateWrites(quarantine=records.quarantine)
        on_time, late = behind_watermark(
            records.events, progress.clocks, self.spec.watermark_delay_ms
        )
        watch.lap("watermark")
        writes.late = list(zip(*(late.column(c).to_pylist() for c in _LATE_COLUMNS), strict=True))
        outcome.invalid, outcome.late = len(writes.quarantine), len(writes.late)

        cutoff = self.spec.cutoff(conn)
        if cutoff is not None:
            after = pc.greater_equal(on_time["event_ts"], cutoff)
            on_time = on_time.filter(pc.fill_null(after, False))
        if self.spec.accepted_log is not None:  # Lambda: the log a hand-off recomputes from
            self._append_accepted(on_time, records.profiles, batch_id)
            watch.lap("accepted_log")

        # The clocks have read this micro-batch: what they passed, no later event can change.
        watermarks = progress.clocks.thresholds(self.spec.watermark_delay_ms, partitions)
        merged = self.keyed.merge(
            conn, on_time, records.profiles, cutoff, self.spec.logic(conn), watermarks
        )
        watch.lap("keyed_merge")
        writes.updates = merged.updates
        outcome.keys = merged.keys
        outcome.state_rows = merged.state_rows
        outcome.new_events = merged.new_events

        progress.watermark_ms = progress.clocks.watermark(self.spec.watermark_delay_ms)
        progress.max_event_ts = progress.clocks.latest()
        progress.late_dropped += outcome.late
        progress.quarantined += outcome.invalid
        return outcome, merged.changes, writes

    def _append_accepted(self, events: pa.Table, profiles: pa.Table, batch_id: int) -> None:
        """Lambda: the micro-batch's accepted events and profile versions, once, in the log
        the hand-off recomputes from."""
        log = self.spec.accepted_log
        assert log is not None
        query = self._checkpoint_id()
        for topic, rows in ((accepted_log.EVENTS, events), (accepted_log.PROFILES, profiles)):
            if rows.num_rows:  # most micro-batches carry no profile change
                log.append(rows, topic, batch_id, query)


def recompute_accepted(
    spec: StreamSpec, conn: psycopg.Connection, cutoff: int | None, events_topic: str
) -> tuple[list[Change], dict[str, StateRows]]:
    """Lambda's hand-off: every real-time row and state of the stream from its accepted log,
    for event time from `cutoff` on, under the logic version now in force, as
    ``finish(partial(events))`` on DuckDB (no Spark: the publish step runs without one); the
    views of the current state from the batch's partials merged with the stream's; a state
    bounded by the watermark as the stream's clocks have left it."""
    log = spec.accepted_log
    assert log is not None, "only a stream that keeps its event log can recompute"
    events = log.read(accepted_log.EVENTS, EVENTS, since_ms=cutoff)
    profiles = log.read(accepted_log.PROFILES, PROFILES)
    progress = realtime.load_progress(conn, spec.stream)
    watermarks = progress.clocks.thresholds(
        spec.watermark_delay_ms, partitions_of(progress.offsets, events_topic)
    )
    keyed = KeyedMerge(spec.stream, spec.session_seeds, spec.partial_seeds)
    try:
        return keyed.recompute(conn, events, profiles, cutoff, spec.logic(conn), watermarks)
    finally:
        keyed.close()


def partitions_of(offsets: Offsets, topic: str) -> set[int]:
    """The partitions of `topic` among offsets per ``topic/partition``."""
    prefix = f"{topic}/"
    return {int(name[len(prefix) :]) for name in offsets if name.startswith(prefix)}


def behind_watermark(
    events: pa.Table, clocks: EventClocks, delay_ms: int
) -> tuple[pa.Table, pa.Table]:
    """A micro-batch's valid first occurrences split into (on time, late) by the rule of
    ``core.event_clock``, record by record in each partition's offset order (the earlier
    micro-batches' clocks and the rows before it in this one); the clocks advance with it."""
    is_late = split_late(events, clocks, delay_ms)
    return events.filter(pc.invert(is_late)), events.filter(is_late)


_LATE_COLUMNS = ("event_id", "event_ts", "partition", "offset")
