"""Reads of the serving store (Postgres): the merged Lambda view, the Kappa view, and `meta`.

Lambda, windowed views: the batch rows of the alias version whose window starts before the
alias's cutoff, plus the `lambda-speed` real-time rows whose window starts at or after it (all
real-time rows, and no batch row, while no alias exists). Lambda sessions: the batch sessions of
the alias version that no real-time session of the same user covers, plus every real-time
session (the speed layer already continues the sessions open at the cutoff). Kappa: the
real-time rows of stream `kappa-v<alias version>`, nothing while no alias exists.

Each merge is one SQL statement that reads the alias itself, and a request runs it together
with the `meta` queries in one read-only REPEATABLE READ transaction: one snapshot, so a reader
never sees a mix of two versions, nor rows of one version with the meta of another, however the
alias moves meanwhile.
"""

from __future__ import annotations

from typing import Any, LiteralString

import psycopg
from psycopg import sql

from core.catalog import ViewSpec
from core.store.schema import batch_table, realtime_table
from core.store.streams import (
    KAPPA_PREFIX,
    LAMBDA_SPEED,
    kappa_stream,
    to_ms,
    to_timestamp,
)
from core.timefmt import iso
from serving.filters import ViewFilters, ViewQuery
from serving.models import ReadArchitecture, Row, ViewMeta

# --- the merged rows --------------------------------------------------------------------------


def _columns(table_alias: str, spec: ViewSpec) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(table_alias, column) for column in spec.columns)


def _q(text: LiteralString, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(text).format(**parts)


def _lambda_windows(spec: ViewSpec) -> sql.Composed:
    return _q(
        "select {b_cols} from {batch} b join alias a on b.version = a.version "
        "where b.{start} < a.cutoff "
        "union all "
        "select {r_cols} from {rt} r where r.stream = %(stream)s "
        "and not exists (select 1 from alias a where r.{start} < a.cutoff)",
        b_cols=_columns("b", spec),
        r_cols=_columns("r", spec),
        batch=sql.Identifier(batch_table(spec.name)),
        rt=sql.Identifier(realtime_table(spec.name)),
        start=sql.Identifier(spec.time_fields[0]),
    )


def _lambda_sessions(spec: ViewSpec) -> sql.Composed:
    return _q(
        "select {b_cols} from {batch} b join alias a on b.version = a.version "
        "where not exists (select 1 from {rt} c where c.stream = %(stream)s "
        "and c.user_id = b.user_id and c.session_start <= b.session_start "
        "and c.session_end >= b.session_end) "
        "union all "
        "select {r_cols} from {rt} r where r.stream = %(stream)s",
        b_cols=_columns("b", spec),
        r_cols=_columns("r", spec),
        batch=sql.Identifier(batch_table(spec.name)),
        rt=sql.Identifier(realtime_table(spec.name)),
    )


def _kappa(spec: ViewSpec) -> sql.Composed:
    return _q(
        "select {r_cols} from {rt} r "
        "join alias a on r.stream = %(stream_prefix)s::text || a.version::text",
        r_cols=_columns("r", spec),
        rt=sql.Identifier(realtime_table(spec.name)),
    )


def rows_statement(
    spec: ViewSpec, architecture: ReadArchitecture, filters: ViewFilters
) -> tuple[sql.Composed, dict[str, Any]]:
    """One statement: the alias, the merge, the filters and the order; and its parameters."""
    if architecture == "kappa":
        source = _kappa(spec)
        params: dict[str, Any] = {"stream_prefix": KAPPA_PREFIX}
    else:
        source = _lambda_sessions(spec) if spec.name == "sessions" else _lambda_windows(spec)
        params = {"stream": LAMBDA_SPEED}
    params["architecture"] = architecture

    start = sql.Identifier("merged", spec.time_fields[0])
    conditions: list[sql.Composable] = []
    for i, (key, value) in enumerate(filters.keys):
        conditions.append(
            _q(
                "{key} = {value}",
                key=sql.Identifier("merged", key),
                value=sql.Placeholder(f"key{i}"),
            )
        )
        params[f"key{i}"] = value
    if filters.start_ms is not None:
        conditions.append(_q("{start} >= %(start)s", start=start))
        params["start"] = to_timestamp(filters.start_ms)
    if filters.end_ms is not None:
        conditions.append(_q("{start} < %(end)s", start=start))
        params["end"] = to_timestamp(filters.end_ms)
    where = sql.SQL(" and ").join(conditions) if conditions else sql.SQL("true")

    # Keys in code-point order, as the oracle sorts Python strings (C collation: UTF-8 bytes).
    order: list[sql.Composable] = [
        _q('{key} collate "C"', key=sql.Identifier("merged", key)) for key in spec.keys
    ]
    order += [sql.Identifier("merged", field) for field in spec.time_fields]

    statement = _q(
        "with alias as (select version, cutoff from view_alias "
        "where architecture = %(architecture)s) "
        "select {columns} from ({source}) as merged where {where} order by {order}",
        columns=_columns("merged", spec),
        source=source,
        where=where,
        order=sql.SQL(", ").join(order),
    )
    return statement, params


def _row(spec: ViewSpec, values: tuple[Any, ...]) -> Row:
    row: Row = {}
    for column, value in zip(spec.columns, values, strict=True):
        row[column] = iso(to_ms(value)) if column in spec.time_fields else value
    return row


def read_rows(
    conn: psycopg.Connection, spec: ViewSpec, architecture: ReadArchitecture, filters: ViewFilters
) -> list[Row]:
    statement, params = rows_statement(spec, architecture, filters)
    return [_row(spec, tuple(values)) for values in conn.execute(statement, params).fetchall()]


# --- meta ------------------------------------------------------------------------------------


def _progress(conn: psycopg.Connection, streams: list[str]) -> dict[str, tuple[Any, ...]]:
    rows = conn.execute(
        "select stream, watermark, late_dropped, quarantined from stream_progress "
        "where stream = any(%s)",
        (streams,),
    ).fetchall()
    return {row[0]: tuple(row[1:]) for row in rows}


def _batch_quarantined(conn: psycopg.Connection, version: int) -> int:
    row = conn.execute(
        "select quarantined from view_versions where architecture = 'lambda' and version = %s",
        (version,),
    ).fetchone()
    return 0 if row is None or row[0] is None else int(row[0])


def read_meta(conn: psycopg.Connection, architecture: ReadArchitecture) -> ViewMeta:
    """`meta` of an answer. Lambda's `quarantined` is the larger of two counts of the log's
    invalid records, each record counted once: the published batch's (the master dataset
    snapshot it read) and the speed layer's (what it has read of the log). Both count from the
    log's start; the speed layer's is the fresher one while it runs ahead of the batches, the
    batch's stands for records the speed layer never read (it started over, or retention
    removed them from the log first). Kappa's is its stream's."""
    alias = conn.execute(
        "select version, cutoff from view_alias where architecture = %s", (architecture,)
    ).fetchone()
    version = None if alias is None else int(alias[0])
    cutoff = None if alias is None or alias[1] is None else iso(to_ms(alias[1]))

    if architecture == "lambda":
        stream: str | None = LAMBDA_SPEED
    else:
        stream = None if version is None else kappa_stream(version)
        cutoff = None
    progress = _progress(conn, [stream] if stream is not None else [])
    speed = progress.get(stream or "")
    quarantined = 0 if speed is None else int(speed[2])
    if architecture == "lambda" and version is not None:
        quarantined = max(quarantined, _batch_quarantined(conn, version))
    return ViewMeta(
        architecture=architecture,
        view_version=version,
        batch_cutoff=cutoff,
        speed_watermark=None if speed is None or speed[0] is None else iso(to_ms(speed[0])),
        quarantined=quarantined,
        late_dropped=0 if speed is None else int(speed[1]),
        stream=stream,
    )


# --- one request --------------------------------------------------------------------------


def read_view(conn: psycopg.Connection, query: ViewQuery) -> tuple[list[Row], ViewMeta]:
    """Rows and meta of one request, from one snapshot. `conn` must be in autocommit mode."""
    with conn.transaction():
        conn.execute("set transaction isolation level repeatable read, read only")
        meta = read_meta(conn, query.architecture)
        rows = read_rows(conn, query.spec, query.architecture, query.filters)
    return rows, meta
