"""What readers see: a view merged per architecture, a page of it, and the state it is read from.

A read is two statements in one read-only REPEATABLE READ transaction (the caller's), so one
snapshot: first the *state*, the alias and the progress of the streams a view's `meta` names,
then the rows of the version that state names. A reader never sees a mix of two versions, nor
rows of one version with the meta of another, however the alias moves meanwhile. The state is
everything an answer is read from, so it also tells whether an answer can have changed (the
serving API's version tag); alone, it is one statement, so one snapshot by itself.

Lambda, tumbling windows: the batch rows of the alias version whose window starts before the
alias's cutoff, plus the `lambda-speed` real-time rows whose window starts at or after it (all
real-time rows, and no batch row, while no alias or no cutoff exists). Hopping windows: the
same, but a window starting less than its length before the cutoff holds events of both sides,
so both sides' rows of a window are summed. Lambda sessions: the batch sessions of the alias
version that no real-time session of the same user covers, plus every real-time session (the
speed layer already continues the sessions open at the cutoff). The current state
(`segment_totals`): the real-time rows alone, since the speed layer merges the batch's
partials per key at the hand-off, before the join the view's rows come from.
Kappa: the real-time rows of stream `kappa-v<alias version>`, nothing while no alias exists.
A pattern view's matches (`core.catalog.MATCH_SPECS`) are read as a tumbling view: Lambda's
batch matches of searches before the cutoff, the speed layer's from it; Kappa's stream's.

Rows come sorted by key fields (code-point order) and window, and a page continues strictly
after the *position* (those sort values) of the previous page's last row. The version and the
cutoff are parameters of the rows statement, so the planner walks the key-order indexes of
`core.store.schema` in that order (a merge of the batch and real-time sides) and a page costs
what its own rows cost, not a sort of the whole view.

Statements only (psycopg `sql.Composed` and their parameters) and the decoding of their rows:
the caller runs them on a connection, synchronous or asynchronous.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from datetime import datetime
from typing import Any, LiteralString

from psycopg import sql

from core.catalog import ViewSpec
from core.settings import Architecture
from core.store.schema import batch_table, realtime_table, sort_columns
from core.store.streams import KAPPA_PREFIX, LAMBDA_SPEED, kappa_stream
from core.times import iso, to_ms, to_timestamp, to_us

Row = dict[str, str | int | float]
"""One row of a view as the oracle spells it: key fields, the two time fields as ISO 8601 UTC
strings, then value fields (a match's event times ISO too)."""

Position = tuple[str | int, ...]
"""Where a row sorts (`schema.sort_columns`): its key fields, then time fields in epoch ms (then
a match's search id)."""


@dataclass(frozen=True, slots=True)
class ViewFilters:
    """Equality on key fields, and `start <= window start < end` (sessions: session_start)."""

    keys: tuple[tuple[str, str], ...] = ()
    start_ms: int | None = None
    end_ms: int | None = None


@dataclass(frozen=True, slots=True)
class Progress:
    """One stream's progress row as a reader saw it."""

    stream: str
    last_batch_id: int
    updated_at_us: int  # every commit of the stream moves it
    watermark_ms: int | None
    late_dropped: int
    quarantined: int


@dataclass(frozen=True, slots=True)
class State:
    """The alias and the progress of the streams one architecture's answer is read from."""

    architecture: str
    version: int | None  # None before a first version is published
    cutoff_ms: int | None  # Lambda's batch cutoff; always None for Kappa
    switched_at_us: int | None  # the alias's last move
    stream: str | None  # the real-time stream read (Kappa: none before a first version)
    speed: Progress | None  # that stream's progress: watermark, late events
    batch_quarantined: int | None  # Lambda: the published batch's count of invalid records

    @property
    def quarantined(self) -> int:
        """The log's invalid records, each counted once. Lambda: the larger of the speed
        layer's count (what it has read of the log) and the published batch's (the master
        dataset snapshot it read); both count from the log's start, the speed layer's is the
        fresher while it runs ahead, the batch's stands for records the speed layer never read
        (it started over, or retention removed them first). Kappa: its version's stream's."""
        speed = 0 if self.speed is None else self.speed.quarantined
        return max(speed, self.batch_quarantined or 0)

    @property
    def generation(self) -> tuple[int | None, int | None]:
        """The alias as of this state: it changes exactly when readers switch versions."""
        return self.version, self.switched_at_us


# --- the merged rows --------------------------------------------------------------------------


def _columns(table_alias: str, spec: ViewSpec) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(table_alias, column) for column in spec.columns)


def _q(text: LiteralString, **parts: sql.Composable) -> sql.Composed:
    return sql.SQL(text).format(**parts)


def _in_c(table_alias: str, column: str) -> sql.Composable:
    return _q('{column} collate "C"', column=sql.Identifier(table_alias, column))


def _arm(spec: ViewSpec, table: str, where: sql.Composable) -> sql.Composed:
    """One side of a merge, sorted in reading order with its keys in the C collation (code-point
    order, as the oracle sorts Python strings). Sorted inside, so that the planner reads each
    side along its key-order index and merges the two (a WHERE inside a UNION ALL arm keeps it
    a subquery of its own, which only keeps an order it was asked for)."""
    text = (*spec.keys, *spec.order_after)
    columns = sql.SQL(", ").join(
        _q("{value} as {name}", value=_in_c("t", c), name=sql.Identifier(c))
        if c in text
        else sql.Identifier("t", c)
        for c in spec.columns
    )
    order = sql.SQL(", ").join(
        _in_c("t", c) if c in text else sql.Identifier("t", c) for c in sort_columns(spec)
    )
    return _q(
        "(select {columns} from {table} t where {where} order by {order})",
        columns=columns,
        table=sql.Identifier(table),
        where=where,
        order=order,
    )


def _merge(spec: ViewSpec, merged: bool) -> sql.Composed:
    """The real-time side alone, or merged with the batch side (`%(stream)s`, `%(version)s`,
    and for windows `%(cutoff)s`)."""
    rt = realtime_table(spec.name)
    realtime: sql.Composable = sql.SQL("t.stream = %(stream)s")
    if not merged:
        return _arm(spec, rt, realtime)
    if spec.window_ms is None:  # sessions: every real-time one, the batch ones not covered
        batch = _q(
            "t.version = %(version)s and not exists (select 1 from {rt} c "
            "where c.stream = %(stream)s and c.user_id = t.user_id "
            "and c.session_start <= t.session_start and c.session_end >= t.session_end)",
            rt=sql.Identifier(rt),
        )
        return _union(spec, batch, realtime)
    start = sql.Identifier("t", spec.time_fields[0])
    batch = _q("t.version = %(version)s and {start} < %(cutoff)s", start=start)
    if spec.hop_ms is None:  # tumbling: each window on one side of the cutoff
        realtime = _q("{realtime} and {start} >= %(cutoff)s", realtime=realtime, start=start)
        return _union(spec, batch, realtime)
    # Hopping: a window starting less than its length before the cutoff holds events of both
    # sides (the batch's before the cutoff, the speed layer's from it), so its counters are
    # the sum of both sides' rows.
    overlap = sql.Literal(f"{(spec.window_ms - spec.hop_ms) // 1000} seconds")
    realtime = _q(
        "{realtime} and {start} >= %(cutoff)s - {overlap}::interval",
        realtime=realtime,
        start=start,
        overlap=overlap,
    )
    group = sql.SQL(", ").join(sql.Identifier(c) for c in (*spec.keys, *spec.time_fields))
    sums = sql.SQL(", ").join(
        _q("sum({value})::bigint as {value}", value=sql.Identifier(v)) for v in spec.values
    )
    return _q(
        "select {group}, {sums} from ({sides}) as sides group by {group}",
        group=group,
        sums=sums,
        sides=_union(spec, batch, realtime),
    )


def _union(spec: ViewSpec, batch: sql.Composable, realtime: sql.Composable) -> sql.Composed:
    return _q(
        "{batch} union all {realtime}",
        batch=_arm(spec, batch_table(spec.name), batch),
        realtime=_arm(spec, realtime_table(spec.name), realtime),
    )


@functools.lru_cache(maxsize=512)
def _rows_sql(
    spec: ViewSpec,
    merged: bool,
    keys: tuple[str, ...],
    start: bool,
    end: bool,
    after: bool,
    limit: bool,
) -> bytes:
    """The text of a rows statement of one shape: composed once, then reused (a reader sends
    it as a prepared statement)."""
    conditions: list[sql.Composable] = [
        _q("{key} = {value}", key=sql.Identifier("merged", key), value=sql.Placeholder(key))
        for key in keys
    ]
    if start or end:  # a view with time fields only (the caller refuses them otherwise)
        start_field = sql.Identifier("merged", spec.time_fields[0])
        if start:
            conditions.append(_q("{start} >= %(start)s", start=start_field))
        if end:
            conditions.append(_q("{start} < %(end)s", start=start_field))
    # The merged key columns are in the C collation already (`_arm`): compared and sorted as
    # they are, the planner matches them with the key-order indexes.
    order = sql.SQL(", ").join(sql.Identifier("merged", c) for c in sort_columns(spec))
    if after:
        # A row comparison: each index scan starts right at the position.
        conditions.append(
            _q(
                "({order}) > ({position})",
                order=order,
                position=sql.SQL(", ").join(
                    sql.Placeholder(f"after{i}") for i in range(len(sort_columns(spec)))
                ),
            )
        )
    statement = _q(
        "select {columns} from ({merge}) as merged where {where} order by {order}",
        columns=_columns("merged", spec),
        merge=_merge(spec, merged),
        where=sql.SQL(" and ").join(conditions) if conditions else sql.SQL("true"),
        order=order,
    )
    if limit:
        statement = _q("{statement} limit %(limit)s", statement=statement)
    return statement.as_bytes(None)


def rows_statement(
    spec: ViewSpec,
    state: State,
    filters: ViewFilters,
    *,
    after: Position | None = None,
    limit: int | None = None,
) -> tuple[bytes, dict[str, Any]] | None:
    """The rows of the version `state` names, filtered, in reading order, and optionally one
    page of them (the first `limit` rows sorting strictly after `after`): a statement and its
    parameters; None when that version has no rows at all (Kappa before its first version).

    Its text depends only on the shape of the request (which filters, a cursor or not, a
    cutoff or not), never on values, so one prepared statement serves every such request."""
    if state.stream is None:
        return None
    params: dict[str, Any] = {"stream": state.stream}
    # Lambda merges the batch side once a version is published (windows: with a cutoff). The
    # current state has no time to split at: the speed layer merged the batch's partials into
    # its own, per key, at the hand-off, so its rows are the whole view.
    merged = (
        state.architecture == Architecture.LAMBDA
        and state.version is not None
        and (spec.window_ms is None or state.cutoff_ms is not None)
        and not spec.current_state
    )
    if merged:
        params["version"] = state.version
        if state.cutoff_ms is not None:
            params["cutoff"] = to_timestamp(state.cutoff_ms)
    params.update(filters.keys)
    if filters.start_ms is not None:
        params["start"] = to_timestamp(filters.start_ms)
    if filters.end_ms is not None:
        params["end"] = to_timestamp(filters.end_ms)
    if after is not None:
        for i, (column, value) in enumerate(zip(sort_columns(spec), after, strict=True)):
            is_time = column in spec.time_fields
            params[f"after{i}"] = to_timestamp(int(value)) if is_time else value
    if limit is not None:
        params["limit"] = limit
    text = _rows_sql(
        spec,
        merged,
        tuple(key for key, _ in filters.keys),
        filters.start_ms is not None,
        filters.end_ms is not None,
        after is not None,
        limit is not None,
    )
    return text, params


# A window's bounds repeat from row to row and request to request (a minute, an hour): format
# each instant once. Sessions' bounds rarely repeat, and the cache stays bounded.
@functools.lru_cache(maxsize=1 << 16)
def _iso_of(value: datetime) -> str:
    return iso(to_ms(value))


def decode_rows(spec: ViewSpec, rows: list[tuple[Any, ...]]) -> list[Row]:
    """Rows of `rows_statement` as the oracle spells them (time fields as ISO 8601 UTC)."""
    columns = spec.columns
    instants = (*spec.time_fields, *spec.instants)
    times = [i for i, column in enumerate(columns) if column in instants]
    decoded: list[Row] = []
    for values in rows:
        row = list(values)
        for i in times:
            row[i] = _iso_of(row[i])
        decoded.append(dict(zip(columns, row, strict=True)))
    return decoded


def position(spec: ViewSpec, values: tuple[Any, ...]) -> Position:
    """Where a row of `rows_statement` sorts: what the next page continues after."""
    by_column = dict(zip(spec.columns, values, strict=True))
    return tuple(
        to_ms(by_column[column]) if column in spec.time_fields else by_column[column]
        for column in sort_columns(spec)
    )


# --- the state (alias, progress) ----------------------------------------------------------------

_PROGRESS_COLUMNS = (
    "stream",
    "last_batch_id",
    "updated_at",
    "watermark",
    "late_dropped",
    "quarantined",
)


def _progress_columns(table_alias: str) -> sql.Composable:
    return sql.SQL(", ").join(sql.Identifier(table_alias, c) for c in _PROGRESS_COLUMNS)


@functools.lru_cache(maxsize=2)
def state_statement(architecture: str) -> bytes:
    """One row, whatever exists: the alias, the progress of the real-time stream, and (Lambda)
    the published batch's count of invalid records. Without parameters (the architecture's
    names are literals): a reader's most frequent statement has nothing to convert or send
    besides its prepared name."""
    speed = _progress_columns("s")
    stream: sql.Composable
    if architecture == Architecture.KAPPA:
        stream = _q("{prefix}::text || a.version::text", prefix=sql.Literal(KAPPA_PREFIX))
    else:
        stream = sql.Literal(LAMBDA_SPEED)
    return _q(
        "select a.version, a.cutoff, a.switched_at, {speed}, v.quarantined "
        "from (values (1)) as one (x) "
        "left join view_alias a on a.architecture = {architecture} "
        "left join stream_progress s on s.stream = {stream} "
        "left join view_versions v on v.architecture = 'lambda' "
        "and a.architecture = 'lambda' and v.version = a.version",
        speed=speed,
        stream=stream,
        architecture=sql.Literal(architecture),
    ).as_bytes(None)


def _progress(values: tuple[Any, ...]) -> Progress | None:
    stream, last_batch_id, updated_at, watermark, late_dropped, quarantined = values
    if stream is None:
        return None
    return Progress(
        stream=stream,
        last_batch_id=int(last_batch_id),
        updated_at_us=to_us(updated_at),
        watermark_ms=None if watermark is None else to_ms(watermark),
        late_dropped=int(late_dropped),
        quarantined=int(quarantined),
    )


def decode_state(architecture: str, values: tuple[Any, ...]) -> State:
    version, cutoff, switched_at = values[:3]
    version = None if version is None else int(version)
    if architecture == Architecture.KAPPA:
        stream = None if version is None else kappa_stream(version)
        cutoff = None  # a cutoff means nothing to Kappa
    else:
        stream = LAMBDA_SPEED
    return State(
        architecture=architecture,
        version=version,
        cutoff_ms=None if cutoff is None else to_ms(cutoff),
        switched_at_us=None if switched_at is None else to_us(switched_at),
        stream=stream,
        speed=_progress(values[3:9]),
        batch_quarantined=None if values[9] is None else int(values[9]),
    )
