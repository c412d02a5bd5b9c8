"""The batch layer's computation: the eight batch views (and a pattern view's matches) from
the whole master dataset up to a cutoff, written as a new version.

The master dataset holds the log's raw records; a batch run reads them at one pinned Delta
version (`BatchInput`) and validates them here, with the shared parsing (`core.ingestion`,
as the speed layer and the Kappa job do), once per run: the raw gate checks the new valid
events and the recompute reads them all from the same parse; the valid events are deduplicated
over all history and cached for the views, and the invalid ones are counted (the
version's `quarantined`). The views come from the shared view logic
(`core.views`), the same partial aggregates the speed layer and the Kappa job use. The run
around it (gates, `ready`, the hand-off) is `batch_layer.pipeline`, whose `run_batch` runs it in
one call.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Final

from batch_layer import inputs
from batch_layer.errors import NothingNewError
from core import ingestion
from core.catalog import LOOKAHEAD_MS, MATCH_COLUMNS, MATCH_VIEWS, VIEWS
from core.frames import empty_profiles
from core.master_dataset import PARTITION_COLUMNS, RAW_COLUMNS, MasterDataset, require_raw
from core.settings import Architecture, Settings
from core.spark import all_at_once, described
from core.store import bulk, state, state_values, versions
from core.store.schema import batch_matches_table, batch_table
from core.store.streams import batch_partials_stream
from core.times import to_timestamp
from core.views import (
    PARTIALS,
    VIEW_INPUT_COLUMNS,
    compute_matches,
    compute_partial,
    compute_view,
    keep,
)

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import Column, DataFrame, SparkSession

    from core.views.query import Query

LAMBDA = Architecture.LAMBDA


@dataclass(frozen=True)
class BatchResult:
    version: int
    cutoff_ms: int
    row_counts: dict[str, int]
    quarantined: int = 0
    """Invalid records in the master dataset snapshot the version read."""


RECOMPUTE: Final = "batch recompute"
"""How the recompute's Spark jobs are described (`core.spark.described`), stage by stage."""


def _nothing_archived(master: MasterDataset) -> NothingNewError:
    return NothingNewError(
        f"the master dataset is empty ({master.events}): nothing archived from the log yet"
    )


def read_master_events(spark: SparkSession, master: MasterDataset) -> DataFrame:
    """The master dataset's raw event records (valid or not, unparsed)."""
    if not require_raw(spark, master.events):
        raise _nothing_archived(master)
    return spark.read.format("delta").load(master.events)


def read_master_profiles(spark: SparkSession, master: MasterDataset) -> DataFrame:
    """Every profile version and tombstone of the master dataset, parsed (`PROFILE_COLUMNS`)."""
    if require_raw(spark, master.profiles):
        raw = spark.read.format("delta").load(master.profiles)
        return ingestion.parse_profiles(raw.select(*RAW_COLUMNS))
    return empty_profiles(spark)


def parse_master_events(raw: DataFrame) -> DataFrame:
    """Raw master records validated with the shared parsing, narrowed to what a batch keeps:
    `reason` (NULL when valid) and the columns the views read (NULL for an invalid record)."""
    return ingestion.parse_events(raw.select(*RAW_COLUMNS)).select("reason", *VIEW_INPUT_COLUMNS)


CHECKED_COLUMNS: Final = (
    *ingestion.EVENT_COLUMNS,
    *ingestion.LOG_POSITION,
    "timestamp",
    *PARTITION_COLUMNS,
)
"""What the raw gate checks of each valid event: the event columns, its log position, Kafka
timestamp and partition."""


def checked_events(raw: DataFrame) -> DataFrame:
    """The valid events among raw master records, as the raw gate checks them
    (`CHECKED_COLUMNS`, shared parsing)."""
    from pyspark.sql import functions as F

    parsed = ingestion.parse_events(raw.select(*RAW_COLUMNS, *PARTITION_COLUMNS))
    return parsed.where(F.col("reason").isNull()).select(*CHECKED_COLUMNS)


def in_partitions(partitions: list[inputs.Partition]) -> Column:
    """A filter Delta prunes partitions with: per date, the hours of that date."""
    from pyspark.sql import functions as F

    date, hour = PARTITION_COLUMNS
    hours: dict[str, list[int]] = {}
    for day, at in partitions:
        hours.setdefault(day, []).append(at)
    condition = F.lit(False)
    for day, day_hours in sorted(hours.items()):
        condition = condition | ((F.col(date) == day) & F.col(hour).isin(sorted(set(day_hours))))
    return condition


_NEW = "_new"
"""Column of `BatchInput`'s shared parse: the record is in a file the published batch lacked."""


class BatchInput:
    """What one batch run reads: the master events at one pinned Delta version.

    The raw gate checks the valid events of the files archived since the published batch's
    snapshot (`checked`); the recompute reads every record of the snapshot (`parsed`). Both
    read the same snapshot, so nothing reaches a version unchecked, and the snapshot is the
    one recorded with the version (the next gate starts from it).

    Parsing the raw records is the expensive part of a batch. Alone, each reader parses what
    it needs (the gate only the new files, through their partitions). After `share`, the whole
    snapshot is parsed once into a cache that both read: `run_batch` does that, since a first
    batch's gate checks everything the recompute reads. `release` drops the caches.
    """

    def __init__(self, snapshot: int, added: inputs.Added, raw: DataFrame) -> None:
        self.snapshot = snapshot
        """The master events' Delta version read."""
        self.added = added
        """Its data files that the published batch's snapshot lacks."""
        self._raw = raw
        self._shared: DataFrame | None = None
        self._parsed: DataFrame | None = None

    def share(self) -> int:
        """Parse the whole snapshot now, once, into a cache for the gate and the recompute (the
        narrow columns both read, and whether each record is new); returns its record count."""
        from pyspark.sql import functions as F

        if self._shared is not None:
            return self._shared.count()
        if self.added.everything:
            new = F.lit(True)
        else:
            new = F.col("_metadata.file_path").isin(sorted(self.added.files))
        raw = self._raw.select(*RAW_COLUMNS, *PARTITION_COLUMNS, new.alias(_NEW))
        columns = dict.fromkeys(("reason", *CHECKED_COLUMNS, *VIEW_INPUT_COLUMNS, _NEW))
        self._shared = ingestion.parse_events(raw).select(*columns).persist()
        return self._shared.count()

    def checked(self) -> DataFrame:
        """The valid events of the new files, as the raw gate checks them (`CHECKED_COLUMNS`)."""
        from pyspark.sql import functions as F

        if self._shared is not None:
            valid_new = F.col("reason").isNull() & F.col(_NEW)
            return self._shared.where(valid_new).select(*CHECKED_COLUMNS)
        raw = self._raw
        if not self.added.everything:
            files = F.col("_metadata.file_path").isin(sorted(self.added.files))
            raw = raw.where(in_partitions(self.added.partitions) & files)
        return checked_events(raw)

    def parsed(self) -> DataFrame:
        """Every record of the snapshot as `parse_master_events` gives it, cached: from the
        shared parse, else parsed here (narrow) on first use."""
        if self._shared is not None:
            return self._shared.select("reason", *VIEW_INPUT_COLUMNS)
        if self._parsed is None:
            self._parsed = parse_master_events(self._raw).persist()
        return self._parsed

    def release(self) -> None:
        """Drop the caches (the input can still be read: it parses again)."""
        for frame in (self._shared, self._parsed):
            if frame is not None:
                frame.unpersist()
        self._shared = self._parsed = None


def open_input(
    spark: SparkSession, settings: Settings, snapshot: int | None = None
) -> BatchInput | None:
    """The master events at Delta version ``snapshot`` (default: the latest, pinned now) and
    what it holds beyond the published batch's snapshot; None when nothing is archived yet."""
    master = MasterDataset.from_settings(settings)
    if not require_raw(spark, master.events):
        return None
    if snapshot is None:
        snapshot = inputs.latest_version(spark, master.events)
    added = inputs.added_since(spark, master.events, inputs.published_input(settings), snapshot)
    return BatchInput(snapshot, added, inputs.read_at(spark, master.events, snapshot))


def require_input(
    spark: SparkSession, settings: Settings, snapshot: int | None = None
) -> BatchInput:
    """`open_input`, or `NothingNewError` when nothing is archived yet."""
    found = open_input(spark, settings, snapshot)
    if found is None:
        raise _nothing_archived(MasterDataset.from_settings(settings))
    return found


@dataclass(frozen=True)
class ParseStats:
    quarantined: int
    """Invalid records: each counted once, as the API's `quarantined`."""
    max_event_ts: int | None
    """The greatest event time of a valid record (None: no valid record)."""


def parse_stats(parsed: DataFrame) -> ParseStats:
    """Counts of `parse_master_events` rows, in one pass."""
    from pyspark.sql import functions as F

    valid = F.col("reason").isNull()
    row = parsed.agg(
        F.count_if(~valid).alias("invalid"),
        F.max(F.when(valid, F.col("event_ts"))).alias("max_ts"),
    ).first()
    if row is None:
        return ParseStats(0, None)
    return ParseStats(int(row["invalid"]), None if row["max_ts"] is None else int(row["max_ts"]))


def deduplicated(parsed: DataFrame) -> DataFrame:
    """Every valid event of `parse_master_events` once (the first in log order), with only the
    columns the views read, so the whole-history shuffle stays small."""
    from pyspark.sql import functions as F

    valid = parsed.where(F.col("reason").isNull())
    return ingestion.first_in_log(valid.select(*VIEW_INPUT_COLUMNS))


def batch_views(
    events: DataFrame,
    profiles: DataFrame,
    cutoff_ms: int,
    logic: Query | None = None,
) -> dict[str, DataFrame]:
    """The batch views for event time before the cutoff, from `deduplicated` events.

    Deduplication runs over the whole history, before this (the caller caches it once for the
    views). Tumbling windows are computed on events up to the cutoff plus the lookahead, so
    that a search just before the cutoff still sees its clicks and its pattern's order
    (``core.catalog.LOOKAHEAD_MS``), and then keep only windows that start before the
    cutoff. A view whose rows straddle the cutoff (a session, a hopping window, the current
    state: ``ViewSpec.straddles_cutoff``) takes only the events before it: the
    speed layer merges what follows into it (continues the session, adds to the window, merges
    the partials per user at the hand-off).
    """
    from pyspark.sql import functions as F

    events = keep(events, logic)  # after dedup, as in the oracle
    window_input = events.where(F.col("event_ts") < cutoff_ms + LOOKAHEAD_MS)
    before_cutoff = events.where(F.col("event_ts") < cutoff_ms)
    cutoff = F.lit(to_timestamp(cutoff_ms))
    result = {}
    for name, spec in VIEWS.items():
        if spec.straddles_cutoff:
            result[name] = compute_view(name, before_cutoff, profiles)
        else:
            view = compute_view(name, window_input, profiles)
            result[name] = view.where(F.col("window_start") < cutoff)
    return result


def batch_matches(
    events: DataFrame,
    profiles: DataFrame,
    cutoff_ms: int,
    logic: Query | None = None,
) -> dict[str, DataFrame]:
    """The complex events of each pattern view (``core.catalog.MATCH_VIEWS``) whose search is
    before the cutoff, from the input of its tumbling view (events up to the cutoff plus the
    lookahead, so a search just before the cutoff sees its click and its order); the speed
    layer keeps those of later searches (``core.store.reads``)."""
    from pyspark.sql import functions as F

    window_input = keep(events, logic).where(F.col("event_ts") < cutoff_ms + LOOKAHEAD_MS)
    cutoff = F.lit(to_timestamp(cutoff_ms))
    return {
        name: compute_matches(name, window_input, profiles).where(F.col("window_start") < cutoff)
        for name in MATCH_VIEWS
    }


def write_matches(settings: Settings, matches: dict[str, DataFrame], version: int) -> None:
    """Append each pattern view's matches, tagged ``version``, to its batch matches table."""
    from pyspark.sql import functions as F

    for name, frame in matches.items():
        rows = frame.select(F.lit(version).alias("version"), *MATCH_COLUMNS)
        bulk.append(settings, batch_matches_table(name), rows)


def batch_partials(
    events: DataFrame,
    profiles: DataFrame,
    cutoff_ms: int,
    logic: Query | None = None,
) -> dict[str, DataFrame]:
    """The partial aggregates of the views of the current state, from the events before the
    cutoff: what the speed layer merges its own partials with, per key, at the hand-off (a
    user's current segment applies to the revenue on both sides of the cutoff)."""
    from pyspark.sql import functions as F

    before_cutoff = keep(events, logic).where(F.col("event_ts") < cutoff_ms)
    return {
        name: compute_partial(name, before_cutoff, profiles)
        for name, spec in VIEWS.items()
        if spec.current_state
    }


def write_version(
    conn: psycopg.Connection, settings: Settings, views: dict[str, DataFrame], version: int
) -> dict[str, int]:
    """Append each view's rows, tagged ``version``, to its batch table; their counts, as the
    store holds them.

    The writes run at once (``core.spark.all_at_once``; measured on the demo's 6,000 events,
    the recompute took 5.4-6.4 s instead of 7.6-9.1 s, warm), so a failed one raises once every
    write has ended: the version is marked failed with nothing still writing to it. Each is one
    job, not two: no cache and count before the write; the store counts what it received."""
    from pyspark.sql import functions as F

    def write(name: str) -> None:
        rows = views[name].select(F.lit(version).alias("version"), *VIEWS[name].columns)
        bulk.append(settings, batch_table(name), rows)

    if views:
        spark = next(iter(views.values())).sparkSession
        all_at_once(spark, RECOMPUTE, {name: partial(write, name) for name in views})
    counts = versions.batch_row_counts(conn, version)
    return {name: counts[name] for name in views}


def write_partials(conn: psycopg.Connection, partials: dict[str, DataFrame], version: int) -> int:
    """Keep ``batch_partials`` as the state of stream ``batch_partials_stream(version)``, keyed
    and encoded as a stream keeps its own (``core.store.state``, ``state_values``); returns the
    rows kept. A partial per user is brought to the driver whole: as many rows as users."""

    states = {}
    for name, frame in partials.items():
        columns = PARTIALS[name].schema.names
        value = state_values.on_spark(frame, columns).alias(_VALUE)
        with described(frame.sparkSession, f"{RECOMPUTE}: keep the partials of {name}"):
            rows = frame.select(*columns, value).toArrow()
        key = PARTIALS[name].key
        states[name] = state.StateRows(state.keys(rows, key), rows.column(_VALUE).to_pylist())
    with conn.transaction():
        state.replace_all(conn, batch_partials_stream(version), states)
    return sum(len(rows.values) for rows in states.values())


_VALUE = "_value"
