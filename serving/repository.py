"""The serving layer's reads of the store: one request's state and rows, from one snapshot.

The statements are the store's own (`core.store.reads`); this module runs them. The API reads
through the pool's asynchronous connections, as prepared statements, in pipeline mode: `BEGIN
... REPEATABLE READ READ ONLY` goes out with the state statement, then the rows statement with
`COMMIT`, so reading an answer costs two round trips (after the route's one statement of state,
which alone decides a 304 or finds the answer encoded already), and a 409 never reads rows.
The quality checks and the demo read whole views the same way through a plain connection
(`read_view`).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import psycopg

from core.store import reads
from core.store.reads import State
from core.times import iso
from serving.cursor import Cursor, encode
from serving.filters import ViewQuery
from serving.models import ReadArchitecture, Row, ViewMeta


class AliasMovedError(LookupError):
    """A page cursor was read from another alias generation than the current one."""

    def __init__(self, cursor: Cursor, state: State) -> None:
        then, now = cursor.generation[0], state.version
        moved = f"from version {then} to {now}" if then != now else f"again, to version {now}"
        super().__init__(
            f"the view's alias moved {moved} since this cursor was issued: its next pages "
            "would mix two versions; start again without a cursor"
        )


@dataclass(frozen=True, slots=True)
class Page:
    rows: list[Row]
    next_cursor: str | None


def view_meta(state: State, next_cursor: str | None = None) -> ViewMeta:
    """`meta` as CONTRACT §5 spells it, from the state an answer was read from."""
    speed = state.speed
    return ViewMeta(
        architecture=state.architecture,  # type: ignore[arg-type]  # "lambda" or "kappa"
        view_version=state.version,
        batch_cutoff=None if state.cutoff_ms is None else iso(state.cutoff_ms),
        speed_watermark=(
            None if speed is None or speed.watermark_ms is None else iso(speed.watermark_ms)
        ),
        quarantined=state.quarantined,
        late_dropped=0 if speed is None else speed.late_dropped,
        stream=state.stream,
        next_cursor=next_cursor,
    )


def check_cursor(query: ViewQuery, state: State) -> None:
    """Refuse a cursor read from another alias generation: its pages would mix versions."""
    if query.cursor is not None and query.cursor.generation != state.generation:
        raise AliasMovedError(query.cursor, state)


def _page(query: ViewQuery, state: State, values: list[Any]) -> Page:
    spec = query.spec
    next_cursor = None
    if query.limit is not None and len(values) > query.limit:
        del values[query.limit :]
        after = reads.position(spec, tuple(values[-1]))
        next_cursor = encode(Cursor(state.generation, after, query.digest))
    return Page(reads.decode_rows(spec, values), next_cursor)


def _rows_statement(query: ViewQuery, state: State) -> tuple[Any, dict[str, Any]] | None:
    return reads.rows_statement(
        query.spec,
        state,
        query.filters,
        after=None if query.cursor is None else query.cursor.after,
        # One row more than asked: whether a next page exists.
        limit=None if query.limit is None else query.limit + 1,
    )


# --- the API: asynchronous, pooled ---------------------------------------------------------


async def read_state(conn: psycopg.AsyncConnection[Any], architecture: ReadArchitecture) -> State:
    """The state alone: one statement, so one snapshot without a transaction."""
    cursor = await conn.execute(reads.state_statement(architecture), prepare=True)
    values = await cursor.fetchone()
    assert values is not None  # the statement returns one row whatever exists
    return reads.decode_state(architecture, values)


class Snapshot:
    """Reads of one transaction: the state first, then the rows of the version it names."""

    def __init__(self, conn: psycopg.AsyncConnection[Any]) -> None:
        self.conn = conn

    async def state(self, architecture: ReadArchitecture) -> State:
        return await read_state(self.conn, architecture)

    async def page(self, query: ViewQuery, state: State) -> Page:
        """The rows of `query` that `state` names (the state read in this snapshot)."""
        statement = _rows_statement(query, state)
        if statement is None:
            return Page([], None)
        cursor = await self.conn.execute(*statement, prepare=True)
        return _page(query, state, await cursor.fetchall())


@asynccontextmanager
async def snapshot(conn: psycopg.AsyncConnection[Any]) -> AsyncIterator[Snapshot]:
    """A read-only REPEATABLE READ transaction (the pool's connections begin them so), in
    pipeline mode: BEGIN travels with the first statement, COMMIT with the last."""
    async with conn.pipeline(), conn.transaction():
        yield Snapshot(conn)


# --- the quality checks and the demo: a whole view, synchronously ------------------------


def read_view(conn: psycopg.Connection, query: ViewQuery) -> tuple[list[Row], ViewMeta]:
    """Every row of `query` (its limit ignored) and its meta, from one snapshot. `conn` must be
    in autocommit mode."""
    whole = ViewQuery(query.spec, query.architecture, query.filters, digest=query.digest)
    with conn.transaction():
        conn.execute("set transaction isolation level repeatable read, read only")
        state_values = conn.execute(reads.state_statement(query.architecture)).fetchone()
        assert state_values is not None
        state = reads.decode_state(query.architecture, state_values)
        statement = _rows_statement(whole, state)
        values = [] if statement is None else conn.execute(*statement).fetchall()
    return _page(whole, state, values).rows, view_meta(state)
