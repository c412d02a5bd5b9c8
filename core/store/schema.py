"""Tables of the serving store, derived from the view catalogue.

- `view_alias`: per architecture, the view version readers see (and Lambda's batch cutoff).
  Switching it is one UPDATE, so a reader never sees half a version or a mix of two.
- `view_versions`: the history of versions: building, published, retired, failed (a batch
  version with the count of invalid records in the master dataset snapshot it read).
- `batch_<view>`: batch views, every row tagged with its version.
- `rt_<view>`: real-time views, keyed by stream (`lambda-speed`, `kappa-v3`, ...) and the
  view's key; written by idempotent keyed upserts.
- `stream_progress`: per stream, the last committed micro-batch (for exactly-once upserts),
  the watermark, and the counts of late-dropped and quarantined records.
- `stream_state`, `stream_late`, `stream_quarantine`: the streams' keyed state and audit
  (``core.store.state``).
"""

from __future__ import annotations

from core.catalog import VIEWS, ViewSpec
from core.store import state

_VALUE_TYPES = {"ctr": "double precision"}


def batch_table(view: str) -> str:
    return f"batch_{view}"


def realtime_table(view: str) -> str:
    return f"rt_{view}"


def _columns(spec: ViewSpec) -> list[str]:
    return (
        [f"{key} text not null" for key in spec.keys]
        + [f"{field} timestamptz not null" for field in spec.time_fields]
        + [f"{value} {_VALUE_TYPES.get(value, 'bigint')} not null" for value in spec.values]
    )


def primary_key(spec: ViewSpec) -> tuple[str, ...]:
    """A row's identity within a version or stream: its keys and the start of its window."""
    return (*spec.keys, spec.time_fields[0])


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
    ]
    statements += state.DDL
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
    return statements


def create_all(conn) -> None:  # type: ignore[no-untyped-def]
    """Create the store's tables if missing (idempotent); `conn` is a psycopg connection."""
    with conn.transaction():
        for statement in ddl():
            conn.execute(statement)
