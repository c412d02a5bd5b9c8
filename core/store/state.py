"""The stream paths' keyed state, in the serving store beside the real-time views.

- `stream_state`: per stream and view, the partial aggregate's rows by key (and, under
  ``<view>:totals``, the summed contributions per view row), as JSON text (NULL fields left
  out) under the JSON of its key columns. A micro-batch reads only the keys its
  events touch (a primary-key lookup) and writes back only those.
- `stream_late`: the events a stream's watermark dropped, once each: the audit behind
  `late_dropped`.
- `stream_quarantine`: the invalid records a stream read, with the reason.

All of it is written in the micro-batch's one transaction with the view rows and the progress,
so state, views and counts move together or not at all (exactly once by design).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import psycopg

DDL = (
    """create table if not exists stream_state (
        stream text not null,
        view text not null,
        key text not null,
        value text not null,
        primary key (stream, view, key)) with (fillfactor = 70)""",
    # A micro-batch rewrites the value of keys it touches (a search's clicks, a user's
    # orders): room left in each page lets Postgres update in place, leaving the primary key's
    # index alone (a HOT update; 100,000 of them 0.7-1.2 s against 1.2-1.6 s when packed full).
    # Stores from before get it for the pages they fill from now on.
    "alter table stream_state set (fillfactor = 70)",
    """create table if not exists stream_late (
        stream text not null,
        event_id text not null,
        event_ts bigint not null,
        partition integer not null,
        "offset" bigint not null,
        batch_id bigint not null,
        primary key (stream, event_id))""",
    """create table if not exists stream_quarantine (
        stream text not null,
        topic text not null,
        partition integer not null,
        "offset" bigint not null,
        reason text not null,
        value bytea,
        batch_id bigint not null,
        primary key (stream, topic, partition, "offset"))""",
)


_LATE_COLUMNS = 'event_id, event_ts, partition, "offset"'
_QUARANTINE_COLUMNS = 'topic, partition, "offset", reason, value'


def totals_name(view: str) -> str:
    """Where a view's summed contributions per view row are kept."""
    return f"{view}:totals"


@dataclass
class StateUpdate:
    """New values for some keys of one state (a view's partial, or its totals)."""

    name: str
    upserts: Sequence[tuple[str, str]] = ()  # (key, value)
    deletes: Sequence[str] = ()


@dataclass
class StateWrites:
    updates: list[StateUpdate] = field(default_factory=list)
    late: list[tuple] = field(default_factory=list)  # as _LATE_COLUMNS
    quarantine: list[tuple] = field(default_factory=list)  # as _QUARANTINE_COLUMNS


def load(conn: psycopg.Connection, stream: str, name: str, keys: Sequence[str]) -> list[str]:
    """The values stored under `keys` (the ones that exist)."""
    if not keys:
        return []
    # %b: the keys go as a binary text[], not an array literal whose every JSON key (quotes
    # and all) is escaped, then parsed: half of a lookup of 84,000 keys.
    rows = conn.execute(
        "select value from stream_state where stream = %s and view = %s and key = any(%b)",
        (stream, name, list(keys)),
    ).fetchall()
    return [row[0] for row in rows]


def _copy(conn: psycopg.Connection, sql: str, rows: Iterable[tuple]) -> None:
    with conn.cursor().copy(sql) as copy:
        for row in rows:
            copy.write_row(row)


def apply(conn: psycopg.Connection, stream: str, batch_id: int, writes: StateWrites) -> None:
    """Write a micro-batch's state changes (inside the caller's transaction)."""
    for update in writes.updates:
        if update.deletes:
            conn.execute(
                "delete from stream_state where stream = %s and view = %s and key = any(%b)",
                (stream, update.name, list(update.deletes)),
            )
        if update.upserts:
            conn.execute(
                "create temp table if not exists _state_in (key text, value text) "
                "on commit delete rows"
            )
            conn.execute("truncate _state_in")
            _copy(conn, "copy _state_in (key, value) from stdin", update.upserts)
            conn.execute(
                "insert into stream_state (stream, view, key, value) "
                "select %s, %s, key, value from _state_in "
                "on conflict (stream, view, key) do update set value = excluded.value",
                (stream, update.name),
            )
    for columns, table, rows in (
        (_LATE_COLUMNS, "stream_late", writes.late),
        (_QUARANTINE_COLUMNS, "stream_quarantine", writes.quarantine),
    ):
        if rows:
            tagged = ((stream, *row, batch_id) for row in rows)
            _copy(conn, f"copy {table} (stream, {columns}, batch_id) from stdin", tagged)


def replace_all(
    conn: psycopg.Connection, stream: str, states: Mapping[str, Sequence[tuple[str, str]]]
) -> None:
    """Replace every state of a stream (Lambda's hand-off rebuilds them from the new cutoff
    on), inside the caller's transaction."""
    conn.execute("delete from stream_state where stream = %s", (stream,))
    _copy(
        conn,
        "copy stream_state (stream, view, key, value) from stdin",
        ((stream, name, key, value) for name, rows in states.items() for key, value in rows),
    )


def late_event_ids(conn: psycopg.Connection, stream: str) -> set[str]:
    rows = conn.execute("select event_id from stream_late where stream = %s", (stream,))
    return {row[0] for row in rows.fetchall()}


def sizes(conn: psycopg.Connection, stream: str) -> dict[str, dict[str, int]]:
    """Rows and bytes of each state of a stream (the bench reports them)."""
    rows = conn.execute(
        "select view, count(*), coalesce(sum(pg_column_size(key) + pg_column_size(value)), 0) "
        "from stream_state where stream = %s group by view order by view",
        (stream,),
    ).fetchall()
    return {name: {"rows": int(count), "bytes": int(size)} for name, count, size in rows}


def drop(conn: psycopg.Connection, stream: str) -> None:
    """Everything a stream keeps here (inside the caller's transaction)."""
    for table in ("stream_state", "stream_late", "stream_quarantine"):
        conn.execute(f"delete from {table} where stream = %s", (stream,))
