"""Real-time views in the serving store: idempotent, keyed writes per micro-batch.

A micro-batch upserts the view rows its new events changed (and deletes the ones left with
no contribution), replaces the sessions of the users it touched, and writes its keyed state
(``core.store.state``) and the stream's progress, all in one transaction. The progress row
holds the last committed batch id: a batch replayed after a crash is recognised and skipped, so
the writes are exactly once even though Spark's foreachBatch is at least once.
"""

from __future__ import annotations

import io
from collections.abc import Sequence
from dataclasses import dataclass, field

import psycopg
import pyarrow as pa
import pyarrow.csv as pa_csv
from psycopg.types.json import Jsonb

from core.catalog import MATCH_SPECS, MATCH_VIEWS, VIEWS, ViewSpec
from core.event_clock import EventClocks
from core.store import state
from core.store.schema import primary_key, realtime_matches_table, realtime_table, rows_per_view
from core.store.sessions import IN_REACH, reach_parameters
from core.store.streams import archiver_stream
from core.times import HOUR_MS, optional_ms, optional_timestamp


@dataclass
class StreamProgress:
    stream: str
    last_batch_id: int = -1
    watermark_ms: int | None = None
    """The least partition's watermark (`meta.speed_watermark`), as of the last batch."""
    max_event_ts: int | None = None
    late_dropped: int = 0
    quarantined: int = 0
    checkpoint_id: str | None = None
    """The id of the checkpoint whose batches these are: batch ids count within one
    checkpoint, so progress from another one says nothing about this one's batches."""
    offsets: dict[str, int] = field(default_factory=dict)
    """The next offset to read per ``topic/partition``, after the last committed batch."""
    clocks: EventClocks = field(default_factory=EventClocks)
    """The event-time clock of each partition of `events`, after the last committed batch."""


class CheckpointMismatchError(RuntimeError):
    """A stream's checkpoint is not the one its progress in the store came from."""


@dataclass(frozen=True)
class Replacement:
    """New rows for a view, replacing the stream's rows in the given scope.

    Scope: the windows starting in `hours` (hour starts, ms), the sessions of `users` (with
    `reach`, only those ending at or after its first and starting at or before its second
    time, epoch ms, as ``core.store.sessions.stream_sessions`` reads them), or, with
    neither, every row of the stream.
    """

    view: str
    rows: pa.Table | None = None
    """The new rows, the view's columns as the store keeps them
    (``core.views.query.store_table``), written in one block: a replay's micro-batch replaces
    some 100,000 sessions. None: the scope's rows are deleted and none take their place."""
    hours: Sequence[int] | None = None
    users: Sequence[str] | None = None
    reach: tuple[int, int] | None = None


@dataclass(frozen=True)
class Upsert:
    """Changed rows of a view, by primary key, and rows (by their key) that no longer exist; or
    of a pattern view's matches (`view` is then ``MATCH_SPECS[...].name``)."""

    view: str
    rows: Sequence[tuple] = ()
    deleted: Sequence[tuple] = ()


Change = Replacement | Upsert


def load_progress(conn: psycopg.Connection, stream: str) -> StreamProgress:
    row = conn.execute(
        "select last_batch_id, watermark, max_event_time, late_dropped, quarantined, "
        "checkpoint_id, offsets, event_clocks from stream_progress where stream = %s",
        (stream,),
    ).fetchone()
    if row is None:
        return StreamProgress(stream)
    return StreamProgress(
        stream,
        int(row[0]),
        optional_ms(row[1]),
        optional_ms(row[2]),
        int(row[3]),
        int(row[4]),
        row[5],
        {tp: int(offset) for tp, offset in (row[6] or {}).items()},
        EventClocks.parse(row[7]),
    )


def claim(progress: StreamProgress, checkpoint_id: str) -> StreamProgress:
    """`progress` for batches numbered by checkpoint `checkpoint_id`.

    Progress recorded under another checkpoint is refused: its batch ids would make the new
    checkpoint's first batches look done (skipped, lost), and its offsets start again from the
    log's beginning (counted twice). Progress of no checkpoint yet (a new stream, or a store
    from before checkpoints were recorded) is adopted."""
    if progress.checkpoint_id not in (None, checkpoint_id) and progress.last_batch_id >= 0:
        raise CheckpointMismatchError(
            f"{progress.stream}: its checkpoint (query {checkpoint_id}) is not the one its "
            f"progress in the store came from (query {progress.checkpoint_id}, batch "
            f"{progress.last_batch_id}); the checkpoint was lost or replaced: restore it, or "
            "reset the stream"
        )
    progress.checkpoint_id = checkpoint_id
    return progress


def _spec(name: str) -> ViewSpec:
    """A view's spec, or a pattern view's matches' (``MATCH_SPECS``: their own table)."""
    return VIEWS.get(name) or _MATCHES[name]


_MATCHES = {spec.name: spec for spec in MATCH_SPECS.values()}


def _upsert(conn: psycopg.Connection, stream: str, change: Upsert) -> None:
    table = realtime_table(change.view)
    spec = _spec(change.view)
    key = primary_key(spec)
    positions = [spec.columns.index(column) for column in key]
    if change.deleted:
        match = " and ".join(f"{column} = %s" for column in key)
        with conn.cursor() as cursor:
            cursor.executemany(
                f"delete from {table} where stream = %s and {match}",
                [(stream, *(row[i] for i in positions)) for row in change.deleted],
            )
    if not change.rows:
        return
    staging = f"_in_{change.view}"
    conn.execute(f"create temp table if not exists {staging} (like {table}) on commit delete rows")
    conn.execute(f"truncate {staging}")
    columns = ", ".join(spec.columns)
    with conn.cursor().copy(f"copy {staging} (stream, {columns}) from stdin") as copy:
        for row in change.rows:
            copy.write_row((stream, *row))
    updates = ", ".join(f"{c} = excluded.{c}" for c in spec.columns if c not in key)
    conn.execute(
        f"insert into {table} (stream, {columns}) select stream, {columns} from {staging} "
        f"on conflict (stream, {', '.join(key)}) do update set {updates}"
    )


def _apply(conn: psycopg.Connection, stream: str, change: Change) -> None:
    if isinstance(change, Upsert):
        _upsert(conn, stream, change)
    else:
        _replace(conn, stream, change)


def _replace(conn: psycopg.Connection, stream: str, change: Replacement) -> None:
    table = realtime_table(change.view)
    spec = _spec(change.view)
    if change.users is not None and change.reach is not None:
        conn.execute(
            f"delete from {table} where stream = %s and user_id = any(%s) and {IN_REACH}",
            (stream, list(change.users), *reach_parameters(change.reach)),
        )
    elif change.users is not None:
        conn.execute(
            f"delete from {table} where stream = %s and user_id = any(%s)",
            (stream, list(change.users)),
        )
    elif change.hours is not None:
        for hour in change.hours:
            conn.execute(
                f"delete from {table} where stream = %s and window_start >= %s "
                "and window_start < %s",
                (stream, optional_timestamp(hour), optional_timestamp(hour + HOUR_MS)),
            )
    else:
        conn.execute(f"delete from {table} where stream = %s", (stream,))
    if change.rows is not None and change.rows.num_rows > 0:
        _copy_csv(conn, table, stream, change.rows.select(list(spec.columns)))


def _copy_csv(conn: psycopg.Connection, table: str, stream: str, rows: pa.Table) -> None:
    """`rows` (and the stream) into `table` as one CSV block, formatted by Arrow in C++ rather
    than a Python tuple at a time. Arrow quotes every string and leaves a NULL empty, which is
    how Postgres's CSV tells them apart; timestamps are ISO 8601 with their zone."""
    tagged = rows.add_column(0, "stream", pa.repeat(pa.scalar(stream), rows.num_rows))
    block = io.BytesIO()
    pa_csv.write_csv(tagged, block, write_options=pa_csv.WriteOptions(include_header=False))
    columns = ", ".join(tagged.column_names)
    with conn.cursor().copy(f"copy {table} ({columns}) from stdin (format csv)") as copy:
        copy.write(block.getbuffer())


def commit_batch(
    conn: psycopg.Connection,
    progress: StreamProgress,
    batch_id: int,
    changes: Sequence[Change],
    writes: state.StateWrites | None = None,
) -> bool:
    """Apply a micro-batch's view changes, state and progress atomically; False if already
    applied."""
    with conn.transaction():
        conn.execute(
            "insert into stream_progress (stream) values (%s) on conflict do nothing",
            (progress.stream,),
        )
        row = conn.execute(
            "select last_batch_id, checkpoint_id from stream_progress where stream = %s for update",
            (progress.stream,),
        ).fetchone()
        if row is not None:
            if progress.checkpoint_id is not None:  # another writer may have claimed it since
                stored = StreamProgress(progress.stream, int(row[0]), checkpoint_id=row[1])
                claim(stored, progress.checkpoint_id)
            if int(row[0]) >= batch_id:
                return False
        for change in changes:
            _apply(conn, progress.stream, change)
        if writes is not None:
            state.apply(conn, progress.stream, batch_id, writes)
        conn.execute(
            "update stream_progress set last_batch_id = %s, watermark = %s, max_event_time = %s, "
            "late_dropped = %s, quarantined = %s, checkpoint_id = %s, offsets = %s, "
            "event_clocks = %s, updated_at = now() where stream = %s",
            (
                batch_id,
                optional_timestamp(progress.watermark_ms),
                optional_timestamp(progress.max_event_ts),
                progress.late_dropped,
                progress.quarantined,
                progress.checkpoint_id,
                Jsonb(progress.offsets),
                Jsonb(progress.clocks.stored()),
                progress.stream,
            ),
        )
    return True


def replace_all(conn: psycopg.Connection, stream: str, changes: Sequence[Change]) -> None:
    """Replace rows without touching progress (the hand-off, inside the caller's transaction)."""
    for change in changes:
        _apply(conn, stream, change)


def drop_stream(conn: psycopg.Connection, stream: str) -> None:
    """Delete every real-time row (views and matches) and the progress of a stream (a retired
    Kappa version)."""
    with conn.transaction():
        for view in VIEWS:
            conn.execute(f"delete from {realtime_table(view)} where stream = %s", (stream,))
        for view in MATCH_VIEWS:
            table = realtime_matches_table(view)
            conn.execute(f"delete from {table} where stream = %s", (stream,))
        conn.execute("delete from stream_progress where stream = %s", (stream,))
        state.drop(conn, stream)


def row_counts(conn: psycopg.Connection, stream: str) -> dict[str, int]:
    """The number of real-time rows of each view the stream wrote."""
    return rows_per_view(conn, realtime_table, "stream", stream)


def archived(conn: psycopg.Connection) -> dict[str, int]:
    """The offsets the archive has recorded, per ``topic/partition`` of both topics."""
    return {
        **load_progress(conn, archiver_stream("events")).offsets,
        **load_progress(conn, archiver_stream("profiles")).offsets,
    }
