"""Partial rows between Arrow (what DuckDB gives and takes) and the store's keyed state.

``core.store.state`` keeps each partial row as JSON text under its key, typed columns: the
partial's one string column (``key_text``) and one epoch-ms column (``key_ms``), either or
both (``core.store.state.keys``). Being values, keys match however a row came to be written
(here, or by a replay's or the batch layer's Spark job), and so do values: either engine spells
a value the same, byte for byte (``core.store.state_values``: the rule, and each engine's
encoder).

A micro-batch writes up to a few hundred thousand rows: one by one in Python that cost 3.6 µs
a row, so values are encoded by DuckDB's ``to_json`` (84,000 `search_ctr` rows: 0.30 s in
Python, 0.08 s so) and decoded by Arrow's JSON reader (0.19 s with orjson, 0.04 s).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.json as pa_json

from core.store import state_values
from core.store.state import StateRows, keys
from core.times import to_ms

INTERVAL_COLUMNS = ("user_id", "session_start", "session_end", "events")


def rows(
    con: duckdb.DuckDBPyConnection,
    table: pa.Table,
    key: Sequence[str],
    link: str | None = None,
    expires: pa.ChunkedArray | None = None,
) -> StateRows:
    """Each row's key and value, as the state keeps them, its `link` column's value when the
    partial has one (``core.views.partials.PartialAggregate.link``), and its `expires` (one
    per row) for a state bounded by the watermark."""
    links = table.column(link).to_pylist() if link is not None else []
    ends = expires.to_pylist() if expires is not None else []
    return StateRows(keys(table, key), state_values.on_duckdb(con, table), links, ends)


def key_list(table: pa.Table, key: Sequence[str]) -> list[tuple]:
    """Each row's key, as a tuple of its key columns' values."""
    return list(zip(*(table.column(c).to_pylist() for c in key), strict=True))


def table(values: Sequence[str], schema: pa.Schema) -> pa.Table:
    """Stored values back as rows of `schema` (a field the JSON leaves out is NULL)."""
    if not values:
        return schema.empty_table()
    data = "\n".join(values).encode()
    read = pa_json.read_json(
        io.BytesIO(data),
        # Blocks are parsed in parallel; a row (at most 4 bytes a character) must fit in one.
        read_options=pa_json.ReadOptions(block_size=max(1 << 18, 4 * max(map(len, values)) + 1)),
        parse_options=pa_json.ParseOptions(
            explicit_schema=schema, unexpected_field_behavior="ignore"
        ),
    )
    return read.select(schema.names).cast(schema)


def intervals(sessions: Sequence[tuple], schema: pa.Schema) -> pa.Table:
    """Stored sessions (``user_id``, start and end as datetimes, events) as intervals in ms."""
    rows = [
        dict(zip(INTERVAL_COLUMNS, (user, to_ms(start), to_ms(end), events), strict=True))
        for user, start, end, events in sessions
    ]
    return pa.Table.from_pylist(rows, schema=schema)
