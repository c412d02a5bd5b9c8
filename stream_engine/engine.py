"""The stream engine: the log, micro-batch by micro-batch, into real-time views.

The Lambda speed layer and the Kappa job are both this engine, with different settings (a
stream name, and for Lambda the batch cutoff it must stay after). The streaming query parses
every record with the shared parsing and keeps the first occurrence of each event with Spark's
own deduplication (``dropDuplicates`` on the event id, its keys in the RocksDB state store of
the query's checkpoint): a keyed lookup per event, so a re-sent copy of an event is never seen
again, whether that event was accepted or dropped as late. Each micro-batch then:

1. sends invalid records to the stream's quarantine (with the reason);
2. drops the events behind the event-time watermark (the greatest event time of the earlier
   micro-batches less the delay, moving only between micro-batches as in Spark) and records
   each one, so `late_dropped` is a true count and the dropped events can be listed;
3. for every view, computes the partial aggregate of its new events (and new profile
   versions) with the shared view definitions (``core.views.PARTIALS``), looks up the state of
   the keys they touch, merges, and derives the changed view rows from the difference of the
   touched keys' contributions before and after (sessions: merges the touched users'
   sessions);
4. writes the changed view rows, the touched keys' state, the audit rows and its progress in
   one transaction.

The work of a micro-batch follows its new input: nothing scans the history.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core import ingestion
from core.catalog import VIEWS
from core.checkpoints import batch_offsets, checkpoint_id
from core.kafka_io import lost_records
from core.settings import Settings
from core.spark import SMALL_FRAME_ROWS, small_frames_session
from core.store import realtime, sessions, state
from core.store.connection import connect, stream_lock
from core.store.realtime import Change, Replacement, StreamProgress, Upsert
from core.store.state import StateUpdate, StateWrites, totals_name
from core.times import HOUR_MS
from core.views import PARTIALS
from core.views.partials import ROWS, PartialAggregate
from stream_engine.accepted_log import AcceptedLog

if TYPE_CHECKING:
    import psycopg
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from core.views.logic_versions import LogicFilter

SessionSeeds = Callable[["psycopg.Connection", list[str], int | None], list[tuple]]
"""Sessions of other layers the stream must continue: (conn, users, cutoff) -> intervals."""

SESSIONS_SCHEMA = "user_id string, session_start timestamp, session_end timestamp, events long"


@dataclass(frozen=True)
class StreamSpec:
    stream: str
    checkpoint: str
    watermark_delay_ms: int
    accepted_log: AcceptedLog | None = None
    """Lambda only: the log of the events the stream accepted, which a hand-off to a new
    batch cutoff (or logic version) recomputes the real-time views from."""
    cutoff: Callable[[psycopg.Connection], int | None] = lambda conn: None
    """Event time before which another layer is responsible (Lambda: the batch cutoff)."""
    session_seeds: SessionSeeds = lambda conn, users, cutoff: []
    max_offsets_per_trigger: int = 200_000
    logic_filter: Callable[[psycopg.Connection], LogicFilter | None] = lambda conn: None
    """The logic version's filter on the events the views see, read at every micro-batch and
    hand-off (Kappa: its version's; Lambda: the published batch's, so that a logic change
    applies on both sides of the cutoff). Applied after deduplication, as in the batch layer."""
    writable: Callable[[psycopg.Connection], bool] = lambda conn: True
    """False once the stream's output is retired: its micro-batches must stop committing."""


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
    skipped: bool = False


def _json_rows(frame: DataFrame, key: tuple[str, ...]) -> list[tuple[str, str]]:
    """(key, value) JSON pairs of a partial's rows, as the state store keeps them (through
    Arrow: no Python object per row on the way out of the JVM)."""
    from pyspark.sql import functions as F

    pairs = frame.select(
        F.to_json(F.struct(*key)).alias("k"), F.to_json(F.struct(*frame.columns)).alias("v")
    ).toArrow()
    return list(zip(pairs.column("k").to_pylist(), pairs.column("v").to_pylist(), strict=True))


def _json_keys(frame: DataFrame, key: tuple[str, ...]) -> list[str]:
    return [k for k, _ in _json_rows(frame.select(*key), key)]


class StreamEngine:
    def __init__(self, spark: SparkSession, settings: Settings, spec: StreamSpec) -> None:
        self.spark = spark
        self.settings = settings
        self.spec = spec
        self.outcomes: list[BatchOutcome] = []
        self._query_id: str | None = None
        self._failure: Exception | None = None
        self._small: SparkSession | None = None

    # -- the query ------------------------------------------------------------------------

    def start(self, *, available_now: bool, trigger_seconds: float = 2.0):  # type: ignore[no-untyped-def]
        raw = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.settings.kafka_bootstrap)
            .option("subscribe", f"{self.settings.events_topic},{self.settings.profiles_topic}")
            .option("startingOffsets", "earliest")
            # Compaction of `profiles` leaves offset gaps by design, which this option would
            # take for loss; each micro-batch checks `events` itself (`lost_records`).
            .option("failOnDataLoss", "false")
            .option("maxOffsetsPerTrigger", self.spec.max_offsets_per_trigger)
            .load()
        )
        deduplicated = ingestion.first_occurrences(
            ingestion.parse_events(raw), self.settings.events_topic
        )
        writer = (
            deduplicated.writeStream.queryName(self.spec.stream)
            .option("checkpointLocation", self.spec.checkpoint)
            .foreachBatch(self.process_batch)
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
        return writer.start()

    # -- one micro-batch ----------------------------------------------------------------------

    def _checkpoint_id(self) -> str:
        """The id of the query numbering the batches (Spark wrote it before the first one)."""
        if self._query_id is None:
            self._query_id = checkpoint_id(self.spark, self.spec.checkpoint)
        return self._query_id

    def failure(self, query: StreamingQuery) -> str | None:
        """Why `query` stopped, None if it did not fail: the micro-batch's own error when it
        raised one (a sentence, not Spark's wrapping of a Python traceback), else Spark's."""
        if query.exception() is None:
            return None
        return str(self._failure) if self._failure is not None else str(query.exception())

    def process_batch(self, batch: DataFrame, batch_id: int) -> None:
        try:
            self._process_batch(batch, batch_id)
        except Exception as exc:
            self._failure = exc
            raise

    def _process_batch(self, batch: DataFrame, batch_id: int) -> None:
        with connect(self.settings) as conn, stream_lock(conn, self.spec.stream):
            if not self.spec.writable(conn):
                raise StreamRetiredError(f"{self.spec.stream} is retired; its job stops here")
            progress = realtime.claim(
                realtime.load_progress(conn, self.spec.stream), self._checkpoint_id()
            )
            if batch_id <= progress.last_batch_id:
                # Committed here before a crash, not yet in Spark's commit log: nothing to
                # write, but the plan must still run to the end so that its deduplication
                # state commits this batch (Spark refuses a batch whose state stores did not).
                batch.write.format("noop").mode("overwrite").save()
                self.outcomes.append(BatchOutcome(batch_id, skipped=True))
                return
            lost = lost_records(self.settings, self.settings.events_topic, progress.offsets)
            if lost is not None:
                raise DataLossError(f"{self.spec.stream}: {lost}")
            end = batch_offsets(self.spark, self.spec.checkpoint, batch_id)
            batch = batch.persist()  # the plan holds the parse and the stateful dedup: once
            try:
                outcome, changes, writes = self._compute(conn, batch, batch_id, progress)
            finally:
                batch.unpersist()
            progress.offsets = {**progress.offsets, **end}
            realtime.commit_batch(conn, progress, batch_id, changes, writes)
            self.outcomes.append(outcome)

    def _compute(
        self, conn: psycopg.Connection, batch: DataFrame, batch_id: int, progress: StreamProgress
    ) -> tuple[BatchOutcome, list[Change], StateWrites]:
        from pyspark.sql import functions as F

        outcome = BatchOutcome(batch_id)
        writes = StateWrites()
        events_topic = F.col("topic") == self.settings.events_topic
        is_valid = F.col("reason").isNull()

        watermark = progress.watermark_ms
        is_late = F.col("event_ts") < F.lit(watermark) if watermark is not None else F.lit(False)
        valid = ingestion.valid_events(batch.where(events_topic & is_valid))
        # One pass over the batch for the small answers: the invalid records, the late events
        # and the greatest event time.
        invalid = ingestion.quarantine(batch.where(events_topic & ~is_valid))
        writes.quarantine = [
            (r["topic"], r["partition"], r["offset"], r["reason"], r["value"])
            for r in invalid.collect()
        ]
        late = valid.where(is_late).select("event_id", "event_ts", "partition", "offset")
        writes.late = [tuple(r) for r in late.collect()]
        stats = valid.agg(F.max("event_ts").alias("max_ts")).first()
        outcome.invalid, outcome.late = len(writes.quarantine), len(writes.late)

        cutoff = self.spec.cutoff(conn)
        on_time = valid.where(~is_late)
        if cutoff is not None:
            on_time = on_time.where(F.col("event_ts") >= cutoff)
        profile_records = batch.where(F.col("topic") == self.settings.profiles_topic)
        profiles = ingestion.parse_profiles(profile_records.select(*ingestion.KAFKA_COLUMNS))
        if self.spec.accepted_log is not None:  # Lambda: the log a hand-off recomputes from
            log = self.spec.accepted_log
            # Partitioned by the start (epoch ms) of the event's hour window. The column is named
            # `event_hour` because existing accepted logs are: Delta refuses an append that
            # partitions by another column. (The master dataset no longer has a column of that
            # name: its partitions are the records' `record_date`/`record_hour`.)
            hour_start = (F.floor(F.col("event_ts") / HOUR_MS) * HOUR_MS).cast("long")
            query = self._checkpoint_id()
            events = on_time.withColumn("event_hour", hour_start)
            log.append(events, log.events, batch_id, query, ("event_hour",))
            if not profiles.isEmpty():  # most micro-batches carry no profile change
                log.append(profiles, log.profiles, batch_id, query)

        new = _kept(on_time, self.spec.logic_filter(conn)).persist()
        profiles = profiles.persist()
        try:
            changes: list[Change] = []
            for aggregate in PARTIALS.values():
                if aggregate.additive:
                    touched = self._additive(conn, aggregate, new, profiles, changes, writes)
                else:
                    touched = self._sessions(conn, aggregate, new, cutoff, changes)
                outcome.keys[aggregate.view] = touched
            outcome.new_events = new.count()
        finally:
            new.unpersist()
            profiles.unpersist()

        max_ts = stats["max_ts"] if stats is not None else None
        if max_ts is not None:
            progress.max_event_ts = max(int(max_ts), progress.max_event_ts or int(max_ts))
            progress.watermark_ms = progress.max_event_ts - self.spec.watermark_delay_ms
        progress.late_dropped += outcome.late
        progress.quarantined += outcome.invalid
        return outcome, changes, writes

    # -- merging partials into keyed state ---------------------------------------------------

    def _session_for(self, rows: int) -> SparkSession:
        """Where to merge `rows` touched keys: the small-frames session (``core.spark``) unless
        they are many, as in a replay's large micro-batches."""
        if rows > SMALL_FRAME_ROWS:
            return self.spark
        if self._small is None:
            self._small = small_frames_session(self.spark)
        return self._small

    @staticmethod
    def _frame(session: SparkSession, values: list[str], schema: str) -> DataFrame:
        """Stored JSON rows back as a DataFrame of the partial's schema."""
        import pyarrow as pa
        from pyspark.sql import functions as F

        text = session.createDataFrame(pa.table({"v": pa.array(values, pa.string())}))
        return text.select(F.from_json("v", schema).alias("r")).select("r.*")

    def _additive(
        self,
        conn: psycopg.Connection,
        aggregate: PartialAggregate,
        events: DataFrame,
        profiles: DataFrame,
        changes: list[Change],
        writes: StateWrites,
    ) -> int:
        """Merge the new events' partial into the view's state; the changed view rows."""
        from pyspark.sql import functions as F

        stream = self.spec.stream
        fresh = _json_rows(aggregate.partial(events, profiles), aggregate.key)
        if not fresh:
            return 0
        # The touched keys' merge, delta and totals: small frames, whatever the history.
        session = self._session_for(len(fresh))
        stored = state.load(conn, stream, aggregate.view, [key for key, _ in fresh])
        before = self._frame(session, stored, aggregate.schema)
        after = aggregate.merge(
            before, self._frame(session, [v for _, v in fresh], aggregate.schema)
        )
        writes.updates.append(StateUpdate(aggregate.view, _json_rows(after, aggregate.key)))

        totals_schema = _totals_schema(aggregate, after)
        delta = aggregate.delta(before, after).persist()
        try:
            keys = _json_keys(delta, aggregate.total_key)
            stored = state.load(conn, stream, totals_name(aggregate.view), keys)
            old = self._frame(session, stored, totals_schema)
            totals = aggregate.add_totals(old, delta).persist()
        finally:
            delta.unpersist()
        try:
            kept = totals.where(F.col(ROWS) > 0)
            gone = totals.where(F.col(ROWS) <= 0)
            writes.updates.append(
                StateUpdate(
                    totals_name(aggregate.view),
                    upserts=_json_rows(kept, aggregate.total_key),
                    deletes=_json_keys(gone, aggregate.total_key),
                )
            )
            assert aggregate.finish_totals is not None
            columns = VIEWS[aggregate.view].columns
            rows = [tuple(r) for r in aggregate.finish_totals(kept).select(*columns).collect()]
            deleted = [tuple(r) for r in aggregate.finish_totals(gone).select(*columns).collect()]
        finally:
            totals.unpersist()
        changes.append(Upsert(aggregate.view, rows, deleted))
        return len(fresh)

    def _sessions(
        self,
        conn: psycopg.Connection,
        aggregate: PartialAggregate,
        events: DataFrame,
        cutoff: int | None,
        changes: list[Change],
    ) -> int:
        """Sessions of the users with new events: their current real-time sessions (and the
        sessions another layer leaves open, if not yet continued) merged with the new ones."""
        fresh = aggregate.partial(events, None).toArrow()
        users = sorted(set(fresh.column("user_id").to_pylist()))
        if not users:
            return 0
        known = sessions.stream_sessions(conn, self.spec.stream, users)
        rows = self._merged_sessions(conn, users, cutoff, known, fresh)
        changes.append(Replacement("sessions", rows, users=users))
        return len(users)

    def _merged_sessions(
        self,
        conn: psycopg.Connection,
        users: list[str],
        cutoff: int | None,
        known: list[tuple],
        fresh: pa.Table,
    ) -> list[tuple]:
        """`known` sessions and the sessions another layer leaves open for `users`, merged
        with `fresh` ones (the new events' sessions) by the shared session logic, as rows."""
        seeds = _dedupe_seeds(known + self.spec.session_seeds(conn, users, cutoff))
        session = self._session_for(len(seeds) + fresh.num_rows)
        frame = session.createDataFrame(seeds, SESSIONS_SCHEMA)
        merged = PARTIALS["sessions"].merge(frame, session.createDataFrame(fresh))
        return [tuple(r) for r in merged.select(*VIEWS["sessions"].columns).collect()]

    # -- Lambda's hand-off: recompute everything after a new cutoff ----------------------

    def recompute_all(
        self, conn: psycopg.Connection, cutoff: int | None
    ) -> tuple[list[Change], dict[str, list[tuple[str, str]]]]:
        """Every real-time row and state of the stream from its event log, for event time from
        `cutoff` on, under the logic version now in force: ``finish(partial(events))``."""
        from pyspark.sql import functions as F

        log = self.spec.accepted_log
        assert log is not None, "only a stream that keeps its event log can recompute"
        logic = self.spec.logic_filter(conn)
        events = log.read(self.spark, log.events)
        profiles = log.read(self.spark, log.profiles)
        if events is None:
            return [Replacement(view) for view in VIEWS], {}
        if cutoff is not None:
            events = events.where(F.col("event_ts") >= cutoff)
        events = _kept(events, logic).persist()
        profiles_frame = profiles.drop("batch_id") if profiles is not None else None
        changes: list[Change] = []
        states: dict[str, list[tuple[str, str]]] = {}
        try:
            for aggregate in PARTIALS.values():
                if not aggregate.additive:
                    continue
                partial = aggregate.partial(events, profiles_frame).persist()
                states[aggregate.view] = _json_rows(partial, aggregate.key)
                totals = aggregate.totals(partial)
                states[totals_name(aggregate.view)] = _json_rows(totals, aggregate.total_key)
                assert aggregate.finish_totals is not None
                frame = aggregate.finish_totals(totals).select(*VIEWS[aggregate.view].columns)
                changes.append(Replacement(aggregate.view, [tuple(r) for r in frame.collect()]))
                partial.unpersist()
            fresh = PARTIALS["sessions"].partial(events, None).toArrow()
            users = sorted(set(fresh.column("user_id").to_pylist()))
            rows = self._merged_sessions(conn, users, cutoff, [], fresh) if users else []
            changes.append(Replacement("sessions", rows))
        finally:
            events.unpersist()
        return changes, states


def _totals_schema(aggregate: PartialAggregate, like: DataFrame) -> str:
    """The DDL of a view's totals rows: its total key's types, then long counters."""
    empty = aggregate.contributions(like.limit(0)) if aggregate.contributions else like
    types = dict(empty.dtypes)
    key = ", ".join(f"{column} {types[column]}" for column in aggregate.total_key)
    counters = ", ".join(f"{column} bigint" for column in (*aggregate.counters, ROWS))
    return f"{key}, {counters}"


def _kept(events: DataFrame, logic: LogicFilter | None) -> DataFrame:
    return events if logic is None else logic(events)


def _dedupe_seeds(seeds: list[tuple]) -> list[tuple]:
    """Drop a seed that lies inside another (a batch session the stream already continued):
    merging it again would count its events twice. Exact copies are kept once.

    Per user, seeds sorted by start (and longest first): a seed is covered exactly when an
    earlier one with a different interval reaches at least as far, so one pass suffices.
    """
    by_user: dict[str, list[tuple]] = {}
    for seed in dict.fromkeys(seeds):
        by_user.setdefault(seed[0], []).append(seed)
    kept = []
    for user_seeds in by_user.values():
        user_seeds.sort(key=lambda seed: seed[2], reverse=True)
        user_seeds.sort(key=lambda seed: seed[1])  # stable: by start, then longest first
        reach = None  # the furthest end among earlier seeds with another interval
        previous: tuple | None = None
        group_reach = None  # reach before the current run of equal intervals
        for seed in user_seeds:
            interval = (seed[1], seed[2])
            if previous is None or interval != (previous[1], previous[2]):
                group_reach = reach
            if group_reach is None or group_reach < seed[2]:
                kept.append(seed)
            reach = seed[2] if reach is None else max(reach, seed[2])
            previous = seed
    return kept
