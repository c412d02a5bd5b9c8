"""The stream paths' keyed state, in the serving store beside the real-time views.

- `stream_state`: per stream and view, the partial aggregate's rows by key (and, under
  ``<view>:totals``, the summed contributions per view row), each row as JSON text under its
  key, spelled by one rule whichever engine computed it (``core.store.state_values``). A key
  is typed columns, compared as values, never as spelling: every partial here is keyed by an
  entity (a page, a user, a search id, a segment: ``key_text``), a time (an epoch-ms window
  start: ``key_ms``) or both (``stream_engine.state_rows`` maps a partial's key onto them,
  and refuses a key of another shape). A micro-batch reads only the keys its events touch (a
  primary-key lookup) and writes back only those; for a partial whose finish joins its rows,
  also the rows linked to those (``link_text``, indexed: ``load_linked``).
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
import pyarrow as pa

from core.store.streams import BATCH_PARTIALS_PREFIX

DDL = (
    """create table if not exists stream_state (
        stream text not null,
        view text not null,
        key_text text not null,
        key_ms bigint not null,
        value text not null,
        primary key (stream, view, key_text, key_ms)) with (fillfactor = 70)""",
    # Stores from before kept the key as the JSON of its columns (one string and one number at
    # most, as now): each becomes its typed columns, once.
    """do $$ begin
        if exists (select from information_schema.columns
                   where table_name = 'stream_state' and column_name = 'key') then
            alter table stream_state add column key_text text, add column key_ms bigint;
            update stream_state set
                key_text = coalesce((select v #>> '{}' from jsonb_each(key::jsonb) e(k, v)
                                     where jsonb_typeof(v) = 'string'), ''),
                key_ms = coalesce((select (v #>> '{}')::bigint from jsonb_each(key::jsonb) e(k, v)
                                   where jsonb_typeof(v) = 'number'), 0);
            alter table stream_state drop constraint stream_state_pkey, drop column key,
                alter column key_text set not null, alter column key_ms set not null,
                add primary key (stream, view, key_text, key_ms);
        end if;
    end $$""",
    # A micro-batch rewrites the value of keys it touches (a search's clicks, a user's
    # orders): room left in each page lets Postgres update in place, leaving the primary key's
    # index alone (a HOT update; 100,000 of them 0.7-1.2 s against 1.2-1.6 s when packed full).
    # Stores from before get it for the pages they fill from now on.
    "alter table stream_state set (fillfactor = 70)",
    # A partial whose finish joins its rows (``PartialAggregate.link``: search_conversions'
    # searches and their searcher's orders) keeps the column they meet on beside the key, so
    # that a micro-batch finds the rows linked to the ones it touches (a user's searches) by
    # an index, not by reading the JSON of every row. NULL for every other state.
    "alter table stream_state add column if not exists link_text text",
    """create index if not exists stream_state_link on stream_state (stream, view, link_text)
        where link_text is not null""",
    # A state bounded by the watermark (``PartialAggregate.expires``) keeps beside each row the
    # event time past which the least watermark leaves nothing of it, so that a micro-batch
    # deletes the rows no event touches any more (a search no one clicks) by an index, not by
    # reading every row. NULL for every other state.
    "alter table stream_state add column if not exists expires_ms bigint",
    """create index if not exists stream_state_expires on stream_state (stream, view, expires_ms)
        where expires_ms is not null""",
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


@dataclass(frozen=True)
class StateKeys:
    """Keys of one state, as two parallel columns (``NO_TEXT``/``NO_MS`` where a state's key
    has no such part)."""

    texts: Sequence[str] = ()
    ms: Sequence[int] = ()

    def __len__(self) -> int:
        return len(self.texts)


NO_TEXT, NO_MS = "", 0
"""The part of a key that a state's key does not have: the same in every row of that state."""


@dataclass(frozen=True)
class StateRows:
    """Rows of one state: their keys and, in the same order, their values (JSON text:
    ``core.store.state_values``) and, for a partial whose finish joins its rows, their links
    (``link_text``; none: all NULL)."""

    keys: StateKeys = StateKeys()
    values: Sequence[str] = ()
    links: Sequence[str | None] = ()
    expires: Sequence[int | None] = ()
    """For a state bounded by the watermark, each row's ``PartialAggregate.expires`` (none:
    all NULL)."""

    def link_column(self) -> Sequence[str | None]:
        """One link per row (NULL where the state has none)."""
        return self.links or [None] * len(self.values)

    def expires_column(self) -> Sequence[int | None]:
        return self.expires or [None] * len(self.values)


@dataclass
class StateUpdate:
    """New values for some keys of one state (a view's partial, or its totals)."""

    name: str
    upserts: StateRows = StateRows()
    deletes: StateKeys = StateKeys()


@dataclass
class StateWrites:
    updates: list[StateUpdate] = field(default_factory=list)
    late: list[tuple] = field(default_factory=list)  # as _LATE_COLUMNS
    quarantine: list[tuple] = field(default_factory=list)  # as _QUARANTINE_COLUMNS


def key_columns(schema: pa.Schema, key: Sequence[str]) -> tuple[str | None, str | None]:
    """Which of `key`'s columns is the state's ``key_text`` and which its ``key_ms``; a key of
    another shape is refused (the store has no column for it)."""
    text = [c for c in key if pa.types.is_string(schema.field(c).type)]
    ms = [c for c in key if pa.types.is_integer(schema.field(c).type)]
    if len(text) > 1 or len(ms) > 1 or len(text) + len(ms) != len(key) or not key:
        raise ValueError(
            f"a state's key is one string column, one integer column (epoch ms), or both: "
            f"not {', '.join(f'{c} {schema.field(c).type}' for c in key) or 'nothing'}"
        )
    return (text[0] if text else None), (ms[0] if ms else None)


def keys(table: pa.Table, key: Sequence[str]) -> StateKeys:
    """The state key of each row."""
    text, ms = key_columns(table.schema, key)
    n = table.num_rows
    return StateKeys(
        texts=table.column(text).to_pylist() if text else [NO_TEXT] * n,
        ms=table.column(ms).to_pylist() if ms else [NO_MS] * n,
    )


_KEYS = "unnest(%b::text[], %b::bigint[]) as k(key_text, key_ms)"
"""The keys given as two arrays, sent binary (no array literal to escape and parse)."""


def load(conn: psycopg.Connection, stream: str, name: str, keys: StateKeys) -> list[str]:
    """The values stored under `keys` (the ones that exist)."""
    if not keys:
        return []
    rows = conn.execute(
        f"select value from stream_state s join {_KEYS} using (key_text, key_ms) "
        "where s.stream = %s and s.view = %s",
        (list(keys.texts), list(keys.ms), stream, name),
    ).fetchall()
    return [row[0] for row in rows]


def load_linked(
    conn: psycopg.Connection, stream: str, name: str, links: Sequence[str]
) -> list[str]:
    """The values stored with any of `links` as their link (``link_text``)."""
    if not links:
        return []
    rows = conn.execute(
        "select value from stream_state where stream = %s and view = %s "
        "and link_text = any(%b::text[])",
        (stream, name, list(links)),
    ).fetchall()
    return [row[0] for row in rows]


def expired(conn: psycopg.Connection, stream: str, name: str, watermark_ms: int) -> StateKeys:
    """The keys of the rows of a state bounded by the watermark that `watermark_ms` (the least
    of every partition's) has passed (``expires_ms``, indexed)."""
    rows = conn.execute(
        "select key_text, key_ms from stream_state where stream = %s and view = %s "
        "and expires_ms < %s",
        (stream, name, watermark_ms),
    ).fetchall()
    return StateKeys([row[0] for row in rows], [int(row[1]) for row in rows])


def load_all(conn: psycopg.Connection, stream: str, name: str) -> list[str]:
    """Every value of one state of a stream."""
    rows = conn.execute(
        "select value from stream_state where stream = %s and view = %s", (stream, name)
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
            deletes = update.deletes
            conn.execute(
                f"delete from stream_state s using {_KEYS} where s.stream = %s "
                "and s.view = %s and s.key_text = k.key_text and s.key_ms = k.key_ms",
                (list(deletes.texts), list(deletes.ms), stream, update.name),
            )
        if update.upserts.values:
            conn.execute(
                f"create temp table if not exists _state_in ({_STATE_IN}) on commit delete rows"
            )
            conn.execute("truncate _state_in")
            _copy(conn, f"copy _state_in ({_ROW_COLUMNS}) from stdin", _rows(update.upserts))
            conn.execute(
                f"insert into stream_state (stream, view, {_ROW_COLUMNS}) "
                f"select %s, %s, {_ROW_COLUMNS} from _state_in "
                "on conflict (stream, view, key_text, key_ms) do update set value = "
                "excluded.value, link_text = excluded.link_text, expires_ms = excluded.expires_ms",
                (stream, update.name),
            )
    for columns, table, rows in (
        (_LATE_COLUMNS, "stream_late", writes.late),
        (_QUARANTINE_COLUMNS, "stream_quarantine", writes.quarantine),
    ):
        if rows:
            tagged = ((stream, *row, batch_id) for row in rows)
            _copy(conn, f"copy {table} (stream, {columns}, batch_id) from stdin", tagged)


_STATE_IN = "key_text text, key_ms bigint, value text, link_text text, expires_ms bigint"
_ROW_COLUMNS = "key_text, key_ms, value, link_text, expires_ms"
"""A state row's columns, as `_rows` gives them."""


def _rows(rows: StateRows) -> Iterable[tuple[str, int, str, str | None, int | None]]:
    return zip(
        rows.keys.texts,
        rows.keys.ms,
        rows.values,
        rows.link_column(),
        rows.expires_column(),
        strict=True,
    )


def replace_all(conn: psycopg.Connection, stream: str, states: Mapping[str, StateRows]) -> None:
    """Replace every state of a stream (Lambda's hand-off rebuilds them from the new cutoff
    on), inside the caller's transaction."""
    conn.execute("delete from stream_state where stream = %s", (stream,))
    _copy(
        conn,
        f"copy stream_state (stream, view, {_ROW_COLUMNS}) from stdin",
        ((stream, name, *row) for name, rows in states.items() for row in _rows(rows)),
    )


def late_event_ids(conn: psycopg.Connection, stream: str) -> set[str]:
    rows = conn.execute("select event_id from stream_late where stream = %s", (stream,))
    return {row[0] for row in rows.fetchall()}


def row_counts(conn: psycopg.Connection, stream: str) -> dict[str, int]:
    """Rows of each state of a stream (a view's partial, its totals): the stream's metrics
    count them at a start and after a hand-off, then follow each micro-batch's changes."""
    rows = conn.execute(
        "select view, count(*) from stream_state where stream = %s group by view", (stream,)
    ).fetchall()
    return {name: int(count) for name, count in rows}


def sizes(conn: psycopg.Connection, stream: str) -> dict[str, dict[str, int]]:
    """Rows and bytes of each state of a stream (the bench reports them)."""
    rows = conn.execute(
        "select view, count(*), coalesce(sum(pg_column_size(key_text) + pg_column_size(key_ms) "
        "+ pg_column_size(value)), 0) "
        "from stream_state where stream = %s group by view order by view",
        (stream,),
    ).fetchall()
    return {name: {"rows": int(count), "bytes": int(size)} for name, count, size in rows}


def drop_batch_partials(conn: psycopg.Connection, keep_version: int) -> None:
    """The partials kept by batch versions older than `keep_version`."""
    prefix = BATCH_PARTIALS_PREFIX
    conn.execute(
        "delete from stream_state where stream like %s and substr(stream, %s)::int < %s",
        (f"{prefix}%", len(prefix) + 1, keep_version),
    )


def drop(conn: psycopg.Connection, stream: str) -> None:
    """Everything a stream keeps here (inside the caller's transaction)."""
    for table in ("stream_state", "stream_late", "stream_quarantine"):
        conn.execute(f"delete from {table} where stream = %s", (stream,))
