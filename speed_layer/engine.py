"""The stream engine: the log, micro-batch by micro-batch, into real-time views.

The Lambda speed layer and the Kappa job are both this engine, with different settings (a
stream name, and for Lambda the batch cutoff it must stay after). Each micro-batch:

1. validates the records with the shared parsing; invalid ones go to the stream's quarantine;
2. drops events behind the event-time watermark (the greatest event time of the earlier
   micro-batches less the delay, moving only between micro-batches as in Spark) and records
   each one, so `late_dropped` is a true count and the dropped events can be listed;
   (a re-sent copy of an event already accepted or dropped is a duplicate, not late);
3. keeps the first occurrence of each event (in log order within the batch, and against the
   events the stream accepted before) and appends the new ones to the stream's state;
4. recomputes, with the shared view functions on the events the logic version keeps, every
   window the new events or new profile versions touch (whole hours) and the sessions of
   every user who has new events;
5. replaces those rows in the serving store together with its progress, in one transaction.

Recomputing whole windows with the batch layer's own functions is what keeps one business
logic: the speed path is the batch computation applied to the windows that are still open.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.catalog import CLICK_WINDOW_MS, VIEWS
from core.frames import empty_profiles
from core.settings import Settings
from core.store import realtime
from core.store.connection import connect, stream_lock
from core.store.realtime import Replacement, StreamProgress
from core.timefmt import HOUR_MS
from core.views import compute_view, parsing
from core.views.sessions import event_intervals, merge_sessions
from speed_layer.state import StreamState

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import DataFrame, SparkSession

    from core.views.logic_versions import EventFilter

WINDOW_VIEWS = tuple(name for name, spec in VIEWS.items() if spec.window_ms is not None)

SessionSeeds = Callable[["psycopg.Connection", list[str], int | None], list[tuple]]
"""Sessions of other layers the stream must continue: (conn, users, cutoff) -> intervals."""


@dataclass(frozen=True)
class StreamSpec:
    stream: str
    state: StreamState
    checkpoint: str
    watermark_delay_ms: int
    cutoff: Callable[[psycopg.Connection], int | None] = lambda conn: None
    """Event time before which another layer is responsible (Lambda: the batch cutoff)."""
    session_seeds: SessionSeeds = lambda conn, users, cutoff: []
    max_offsets_per_trigger: int = 200_000
    view_filter: Callable[[psycopg.Connection], EventFilter | None] = lambda conn: None
    """The logic version's filter on the events the views see, read at every micro-batch and
    hand-off (Kappa: its version's; Lambda: the published batch's, so that a logic change
    applies on both sides of the cutoff). Applied after deduplication, as in the batch layer:
    the state keeps every event, whatever the logic."""
    writable: Callable[[psycopg.Connection], bool] = lambda conn: True
    """False once the stream's output is retired: its micro-batches must stop committing."""


class StreamRetiredError(RuntimeError):
    """The stream's output was retired (a newer Kappa version took over): stop this job."""


@dataclass
class BatchOutcome:
    batch_id: int
    new_events: int = 0
    late: int = 0
    invalid: int = 0
    hours: list[int] = field(default_factory=list)
    users: int = 0
    skipped: bool = False


def _hour(column: str = "event_ts"):  # type: ignore[no-untyped-def]
    from pyspark.sql import functions as F

    return (F.floor(F.col(column) / HOUR_MS) * HOUR_MS).cast("long")


class StreamEngine:
    def __init__(self, spark: SparkSession, settings: Settings, spec: StreamSpec) -> None:
        self.spark = spark
        self.settings = settings
        self.spec = spec
        self.outcomes: list[BatchOutcome] = []

    # -- the query ------------------------------------------------------------------------

    def start(self, *, available_now: bool, trigger_seconds: float = 2.0):  # type: ignore[no-untyped-def]
        raw = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", self.settings.kafka_bootstrap)
            .option("subscribe", f"{self.settings.events_topic},{self.settings.profiles_topic}")
            .option("startingOffsets", "earliest")
            .option("failOnDataLoss", "false")
            .option("maxOffsetsPerTrigger", self.spec.max_offsets_per_trigger)
            .load()
        )
        writer = (
            raw.writeStream.queryName(self.spec.stream)
            .option("checkpointLocation", self.spec.checkpoint)
            .foreachBatch(self.process_batch)
        )
        if available_now:
            writer = writer.trigger(availableNow=True)
        else:
            writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
        return writer.start()

    # -- one micro-batch ----------------------------------------------------------------------

    def process_batch(self, raw: DataFrame, batch_id: int) -> None:
        with connect(self.settings) as conn, stream_lock(conn, self.spec.stream):
            if not self.spec.writable(conn):
                raise StreamRetiredError(f"{self.spec.stream} is retired; its job stops here")
            progress = realtime.load_progress(conn, self.spec.stream)
            if batch_id <= progress.last_batch_id:
                self.outcomes.append(BatchOutcome(batch_id, skipped=True))
                return
            raw = raw.persist()
            try:
                outcome, changes = self._compute(conn, raw, batch_id, progress)
            finally:
                raw.unpersist()
            realtime.commit_batch(conn, progress, batch_id, changes)
            self.outcomes.append(outcome)

    def _compute(
        self, conn: psycopg.Connection, raw: DataFrame, batch_id: int, progress: StreamProgress
    ) -> tuple[BatchOutcome, list[Replacement]]:
        from pyspark.sql import functions as F

        state = self.spec.state
        outcome = BatchOutcome(batch_id)
        topic = F.col("topic")

        profiles = parsing.parse_profiles(raw.where(topic == self.settings.profiles_topic))
        profiles = profiles.persist()
        if not profiles.isEmpty():  # most micro-batches carry no profile change
            state.append(profiles, state.profiles, batch_id)

        parsed = parsing.parse_events(raw.where(topic == self.settings.events_topic)).persist()
        invalid = parsing.quarantine(parsed)
        valid = parsing.valid_events(parsed)
        watermark = progress.watermark_ms
        is_late = F.col("event_ts") < F.lit(watermark) if watermark is not None else F.lit(False)
        if not invalid.isEmpty():  # an empty Delta commit still costs a round of the log
            state.append(invalid, state.quarantine, batch_id)

        # A late record is dropped and counted once per event: a re-sent copy of an event the
        # stream already accepted, or already dropped, is a duplicate, not more late data.
        before = F.col("batch_id") < batch_id
        accepted = state.read(self.spark, state.events, valid)
        earlier_ids = accepted.where(before).select("event_id")
        dropped_ids = state.read(self.spark, state.late, valid).where(before).select("event_id")
        late = (
            parsing.first_in_log(valid.where(is_late))
            .join(earlier_ids, "event_id", "left_anti")
            .join(dropped_ids, "event_id", "left_anti")
        )
        state.append(late, state.late, batch_id)

        stats = parsed.agg(
            F.count_if(F.col("reason").isNotNull()).alias("invalid"),
            F.max(F.when(F.col("reason").isNull(), F.col("event_ts"))).alias("max_ts"),
        ).first()
        assert stats is not None
        outcome.invalid = int(stats["invalid"])
        outcome.late = state.read(
            self.spark, state.late, valid, F.col("batch_id") == batch_id
        ).count()

        cutoff = self.spec.cutoff(conn)
        on_time = valid.where(~is_late)
        if cutoff is not None:
            on_time = on_time.where(F.col("event_ts") >= cutoff)
        new_events = (
            parsing.first_in_log(on_time)
            .join(earlier_ids, "event_id", "left_anti")
            .withColumn("event_hour", _hour())
        )
        state.append(new_events, state.events, batch_id, partition_by=("event_hour",))
        parsed.unpersist()

        # What changed: the hours of new events (and, for a click, the hour of the searches it
        # may count for), the users with new events, and the hours of orders a new profile
        # version re-attributes.
        new = state.read(self.spark, state.events, on_time).where(F.col("batch_id") == batch_id)
        touched = new.select(
            _hour().alias("h"),
            F.when(
                F.col("type") == "click",
                (F.floor((F.col("event_ts") - CLICK_WINDOW_MS) / HOUR_MS) * HOUR_MS).cast("long"),
            ).alias("hc"),
            "user_id",
        )
        # One scan of the new rows for the three (small) answers.
        found = touched.agg(
            F.collect_set("h").alias("h"),
            F.collect_set("hc").alias("hc"),
            F.collect_set("user_id").alias("users"),
        ).first()
        assert found is not None
        hours = set(found["h"]) | set(found["hc"])  # collect_set leaves NULLs out
        users = sorted(found["users"])
        hours |= self._hours_reattributed(profiles, cutoff)
        profiles.unpersist()
        if cutoff is not None:
            hours = {h for h in hours if h >= cutoff}
        outcome.new_events = new.count()
        outcome.hours, outcome.users = sorted(hours), len(users)

        keep = self.spec.view_filter(conn)
        changes = self._window_changes(sorted(hours), cutoff, keep)
        changes += self._session_changes(conn, _kept(new, keep), users, cutoff)

        max_ts = stats["max_ts"]
        if max_ts is not None:
            progress.max_event_ts = max(int(max_ts), progress.max_event_ts or int(max_ts))
            progress.watermark_ms = progress.max_event_ts - self.spec.watermark_delay_ms
        progress.late_dropped += outcome.late
        progress.quarantined += outcome.invalid
        return outcome, changes

    def _hours_reattributed(self, profiles: DataFrame, cutoff: int | None) -> set[int]:
        from pyspark.sql import functions as F

        changed = profiles.select("user_id", F.col("updated_ts").alias("changed_ts"))
        events = self._store_events(cutoff)
        if events is None or changed.isEmpty():
            return set()
        orders = events.where(F.col("type") == "order")
        affected = orders.join(changed, "user_id").where(F.col("event_ts") >= F.col("changed_ts"))
        return {r["h"] for r in affected.select(_hour().alias("h")).distinct().collect()}

    def _exists(self, path: str) -> bool:
        from delta.tables import DeltaTable

        return bool(DeltaTable.isDeltaTable(self.spark, path))

    # -- recomputation with the shared view functions ------------------------------------

    def _store_events(self, cutoff: int | None) -> DataFrame | None:
        from pyspark.sql import functions as F

        if not self._exists(self.spec.state.events):
            return None
        events = self.spark.read.format("delta").load(self.spec.state.events)
        return events if cutoff is None else events.where(F.col("event_ts") >= cutoff)

    def _store_profiles(self, like: DataFrame) -> DataFrame:
        return self.spec.state.read(self.spark, self.spec.state.profiles, like).drop("batch_id")

    def _window_changes(
        self,
        hours: list[int],
        cutoff: int | None,
        keep: EventFilter | None,
        everything: bool = False,
    ) -> list[Replacement]:
        from pyspark.sql import functions as F

        if not hours and not everything:
            return []
        events = self._store_events(cutoff)
        if events is None:
            return [Replacement(view, hours=None if everything else hours) for view in WINDOW_VIEWS]
        if not everything:
            # A window's events lie within its hour; a search's clicks up to 30 min after it.
            span = F.lit(False)
            for hour in hours:
                span = span | F.col("event_hour").isin(hour, hour + HOUR_MS)
            events = events.where(span)
        events = _kept(events, keep)
        profiles = self._store_profiles(empty_profiles(self.spark))
        changes = []
        for view in WINDOW_VIEWS:
            frame = compute_view(view, events, profiles)
            start_ms = F.unix_millis(F.col("window_start"))
            if not everything:
                frame = frame.where((F.floor(start_ms / HOUR_MS) * HOUR_MS).isin(*hours))
            if cutoff is not None:
                frame = frame.where(start_ms >= cutoff)
            rows = [tuple(r) for r in frame.select(*VIEWS[view].columns).collect()]
            changes.append(Replacement(view, rows, hours=None if everything else hours))
        return changes

    def _session_changes(
        self, conn: psycopg.Connection, new: DataFrame, users: list[str], cutoff: int | None
    ) -> list[Replacement]:
        """Sessions of `users`: their current real-time sessions (and the sessions another
        layer leaves open, if not yet continued) merged with the new events."""
        if not users:
            return []
        seeds = _current_sessions(conn, self.spec.stream, users)
        seeds += self.spec.session_seeds(conn, users, cutoff)
        return [Replacement("sessions", self._merged_sessions(seeds, new), users=users)]

    def _merged_sessions(self, seeds: list[tuple], events: DataFrame) -> list[tuple]:
        """Known sessions and new events merged by the shared session logic, as rows."""
        schema = "user_id string, session_start timestamp, session_end timestamp, events long"
        known = self.spark.createDataFrame(_dedupe_seeds(seeds), schema)
        merged = merge_sessions(known.unionByName(event_intervals(events)))
        return [tuple(row) for row in merged.select(*VIEWS["sessions"].columns).collect()]

    # -- Lambda's hand-off: recompute everything after a new cutoff ----------------------

    def recompute_all(self, conn: psycopg.Connection, cutoff: int | None) -> list[Replacement]:
        """Every real-time row from the stream's state, for event time from `cutoff` on."""
        keep = self.spec.view_filter(conn)
        changes = self._window_changes([], cutoff, keep, everything=True)
        events = self._store_events(cutoff)
        if events is None:
            return [*changes, Replacement("sessions")]
        events = _kept(events, keep)
        users = sorted(r["user_id"] for r in events.select("user_id").distinct().collect())
        seeds = self.spec.session_seeds(conn, users, cutoff) if users else []
        rows = self._merged_sessions(seeds, events) if users else []
        return [*changes, Replacement("sessions", rows)]


def _kept(events: DataFrame, keep: EventFilter | None) -> DataFrame:
    return events if keep is None else keep(events)


def _current_sessions(conn: psycopg.Connection, stream: str, users: list[str]) -> list[tuple]:
    return [
        tuple(row)
        for row in conn.execute(
            "select user_id, session_start, session_end, events from rt_sessions "
            "where stream = %s and user_id = any(%s)",
            (stream, users),
        ).fetchall()
    ]


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
