"""Tables of the serving store, derived from the view catalogue.

- `view_alias`: per architecture, the view version readers see (and Lambda's batch cutoff).
  Switching it is one UPDATE, so a reader never sees half a version or a mix of two.
- `view_versions`: the history of versions: building, published, retired, failed (a batch
  version with the count of invalid records in the master dataset snapshot it read).
- `batch_<view>`: batch views, every row tagged with its version.
- `rt_<view>`: real-time views, keyed by stream (`lambda-speed`, `kappa-v3`, ...) and the
  view's key; written by idempotent keyed upserts.
- `batch_<view>_matches`, `rt_<view>_matches`: a pattern view's complex events
  (``core.catalog.MATCH_VIEWS``: `search_conversions`), one per converted search, tagged like
  the view's rows (version; stream) and read in the same snapshot.
- `stream_progress`: per stream, the last committed micro-batch (for exactly-once upserts),
  the watermark, and the counts of late-dropped and quarantined records.
- `stream_state`, `stream_late`, `stream_quarantine`: the streams' keyed state and audit
  (``core.store.state``).
- `step_runs`: each pipeline step's last run, for the serving API's `/metrics`
  (``core.store.step_runs``).

Views with key fields also get a *key-order* index per version or stream: the keys in the C
collation (the order readers get, ``core.store.reads``), then the window start, so that a page
of a view starts right where the previous one ended instead of sorting the whole view.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from core.catalog import (
    MATCH_COLUMNS,
    MATCH_SPECS,
    MATCH_TIME_FIELDS,
    MATCH_VIEWS,
    VIEWS,
    ViewSpec,
)
from core.store import batch_inputs, comparison_reports, quality_results, state, step_runs

if TYPE_CHECKING:
    import psycopg

_VALUE_TYPES = {"ctr": "double precision", "conversion_rate": "double precision"}


def batch_table(view: str) -> str:
    return f"batch_{view}"


def realtime_table(view: str) -> str:
    return f"rt_{view}"


def batch_matches_table(view: str) -> str:
    return batch_table(MATCH_SPECS[view].name)


def realtime_matches_table(view: str) -> str:
    return realtime_table(MATCH_SPECS[view].name)


def rows_per_view(
    conn: psycopg.Connection, table: Callable[[str], str], tag: str, value: object
) -> dict[str, int]:
    """How many rows each view's table holds under one tag (a batch table's `version`, a
    real-time table's `stream`), in one statement."""
    counts = " union all ".join(
        f"select '{view}', count(*) from {table(view)} where {tag} = %s" for view in VIEWS
    )
    found: dict[str, int] = dict(conn.execute(counts, [value] * len(VIEWS)).fetchall())
    return {view: int(found[view]) for view in VIEWS}  # in the catalogue's order


def _columns(spec: ViewSpec) -> list[str]:
    return (
        [f"{key} text not null" for key in spec.keys]
        + [f"{field} timestamptz not null" for field in spec.time_fields]
        + [f"{value} {_VALUE_TYPES.get(value, 'bigint')} not null" for value in spec.values]
    )


def _match_columns() -> list[str]:
    return [
        f"{c} {'timestamptz' if c in MATCH_TIME_FIELDS else 'text'} not null" for c in MATCH_COLUMNS
    ]


def _match_tables(view: str) -> list[str]:
    """A pattern view's matches, per version and per stream: keyed by the search, with an index
    in reading order (query in the C collation, window, search id), as a view's key order."""
    columns = ", ".join(_match_columns())
    key = ", ".join(primary_key(MATCH_SPECS[view]))
    statements = []
    for table, tag, tag_type in (
        (batch_matches_table(view), "version", "integer"),
        (realtime_matches_table(view), "stream", "text"),
    ):
        statements += [
            f"create table if not exists {table} "
            f"({tag} {tag_type} not null, {columns}, primary key ({tag}, {key}))",
            key_order_index(table, tag, MATCH_SPECS[view]),
        ]
    return statements


def primary_key(spec: ViewSpec) -> tuple[str, ...]:
    """A row's identity within a version or stream: its keys and the start of its window (or
    session), if it has one, and what tells its rows apart there (a match's search id)."""
    return (*spec.keys, *spec.time_fields[:1], *spec.order_after)


def sort_columns(spec: ViewSpec) -> tuple[str, ...]:
    """The order readers get rows in: key fields, then the window's start (its end follows from
    it) and the text columns that tell its rows apart (``order_after``: a match's search id),
    or a session's start and end (two sessions of a user may start together); a view of the
    current state has its keys alone."""
    if spec.window_ms is not None:
        return (*spec.keys, spec.time_fields[0], *spec.order_after)
    return (*spec.keys, *spec.time_fields)


def key_order_index(table: str, tag: str, spec: ViewSpec) -> str:
    """A btree in reading order (text in the C collation); the primary key's own is in the
    database's collation, and stops at the window's start."""
    columns = [c if c in spec.time_fields else f'{c} collate "C"' for c in sort_columns(spec)]
    return f"create index if not exists {table}_key_order on {table} ({tag}, {', '.join(columns)})"


def ddl() -> list[str]:
    statements = [
        """create table if not exists view_alias (
            architecture text primary key,
            version integer not null,
            cutoff timestamptz,
            switched_at timestamptz not null default now())""",
        """create table if not exists view_versions (
            architecture text not null,
            version integer not null,
            status text not null,
            cutoff timestamptz,
            logic_version text,
            row_counts jsonb,
            created_at timestamptz not null default now(),
            published_at timestamptz,
            retired_at timestamptz,
            quarantined bigint,
            primary key (architecture, version))""",
        # Stores created before batch versions counted the quarantine.
        "alter table view_versions add column if not exists quarantined bigint",
        """create table if not exists stream_progress (
            stream text primary key,
            last_batch_id bigint not null default -1,
            watermark timestamptz,
            max_event_time timestamptz,
            late_dropped bigint not null default 0,
            quarantined bigint not null default 0,
            updated_at timestamptz not null default now())""",
        # Stores created before progress knew its checkpoint and its offsets.
        "alter table stream_progress add column if not exists checkpoint_id text",
        "alter table stream_progress add column if not exists offsets jsonb",
        # Stores created before the event-time clock was kept per partition (CONTRACT §3).
        "alter table stream_progress add column if not exists event_clocks jsonb",
    ]
    statements += state.DDL
    statements += batch_inputs.DDL
    statements += quality_results.DDL
    statements += comparison_reports.DDL
    statements += step_runs.DDL
    for spec in VIEWS.values():
        columns = ", ".join(_columns(spec))
        key = ", ".join(primary_key(spec))
        statements.append(
            f"create table if not exists {batch_table(spec.name)} "
            f"(version integer not null, {columns}, primary key (version, {key}))"
        )
        statements.append(
            f"create table if not exists {realtime_table(spec.name)} "
            f"(stream text not null, {columns}, primary key (stream, {key}))"
        )
        if spec.keys:  # without keys the primary key is already in reading order
            statements.append(key_order_index(batch_table(spec.name), "version", spec))
            statements.append(key_order_index(realtime_table(spec.name), "stream", spec))
    for view in MATCH_VIEWS:
        statements += _match_tables(view)
    return statements


def schema_fingerprint() -> str:
    """What the DDL creates, as a short hash: a store marked with it is complete."""
    return hashlib.sha256("\n".join(ddl()).encode()).hexdigest()[:16]


def create_all(conn) -> None:  # type: ignore[no-untyped-def]
    """Create the store's tables if missing (idempotent); `conn` is a psycopg connection.

    A store marked with the current fingerprint is left alone: the DDL's `alter table ... if
    not exists` takes an exclusive lock even when there is nothing to do, and a process that
    connects while its other connection holds a transaction on that table would deadlock.
    Otherwise serialised by a lock, so that processes starting together (serving replicas, the
    stream jobs) do not race on the same `create table if not exists`."""
    fingerprint = schema_fingerprint()
    if _marked(conn, fingerprint):
        return
    with conn.transaction():
        conn.execute("select pg_advisory_xact_lock(hashtext('lk-store-schema'))")
        for statement in ddl():
            conn.execute(statement)
        conn.execute("create table if not exists store_schema (fingerprint text primary key)")
        conn.execute("insert into store_schema values (%s) on conflict do nothing", (fingerprint,))


def _marked(conn, fingerprint: str) -> bool:  # type: ignore[no-untyped-def]
    if conn.execute("select to_regclass('store_schema')").fetchone()[0] is None:
        return False
    found = conn.execute("select 1 from store_schema where fingerprint = %s", (fingerprint,))
    return found.fetchone() is not None


def grant_reader(conn, reader: str) -> None:  # type: ignore[no-untyped-def]
    """Let role `reader` (if it exists) read every table of the store, present and future, and
    write none: the serving layer's login. Future tables: those the connecting role creates."""
    from psycopg import sql

    if conn.execute("select 1 from pg_roles where rolname = %s", (reader,)).fetchone() is None:
        return
    role = sql.Identifier(reader)
    with conn.transaction():
        conn.execute("select pg_advisory_xact_lock(hashtext('lk-store-schema'))")
        conn.execute(sql.SQL("grant usage on schema public to {}").format(role))
        conn.execute(sql.SQL("grant select on all tables in schema public to {}").format(role))
        conn.execute(
            sql.SQL(
                "alter default privileges in schema public grant select on tables to {}"
            ).format(role)
        )


def create_reader(conn, reader: str, password: str) -> None:  # type: ignore[no-untyped-def]
    """Create (or give a new password to) the login role `reader`, which may read the store
    and nothing else (no superuser, no role or database creation), then grant it its reads."""
    from psycopg import errors, sql

    role, secret = sql.Identifier(reader), sql.Literal(password)
    try:
        conn.execute(
            sql.SQL(
                "create role {} login password {} nosuperuser nocreatedb nocreaterole noinherit"
            ).format(role, secret)
        )
    except errors.DuplicateObject:  # it exists, or a process starting beside us just made it
        conn.execute(sql.SQL("alter role {} login password {}").format(role, secret))
    grant_reader(conn, reader)
