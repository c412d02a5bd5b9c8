"""Partial rows between Arrow (what DuckDB gives and takes) and the store's keyed state.

``core.store.state`` keeps each partial row as JSON text under its key, typed columns: the
partial's one string column (``key_text``) and one epoch-ms column (``key_ms``), either or
both (``core.store.state.keys``). Being values, keys match however a row came to be written
(here, or by the batch layer's Spark job): no spelling must agree.

A micro-batch of a replay writes a few hundred thousand rows: one by one in Python that cost
3.6 µs a row (a tenth of a replay's time), so values are encoded by DuckDB's ``to_json``
(84,000 `search_ctr` rows: 0.30 s in Python, 0.08 s so) and decoded by Arrow's JSON reader
(0.19 s with orjson, 0.04 s).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.json as pa_json

from core.store.state import StateRows, keys
from core.times import to_ms
from core.views.query import registered

INTERVAL_COLUMNS = ("user_id", "session_start", "session_end", "events")
_ROWS = "_state_rows"


def rows(con: duckdb.DuckDBPyConnection, table: pa.Table, key: Sequence[str]) -> StateRows:
    """Each row's key and value, as the state keeps them."""
    return StateRows(keys(table, key), _values(con, table))


def _values(con: duckdb.DuckDBPyConnection, table: pa.Table) -> list[str]:
    """Each row as a JSON object of all its columns."""
    if table.num_rows == 0:
        return []
    packed = ", ".join(_quoted(c) for c in table.column_names)
    with registered(con, **{_ROWS: table}):
        # Row order is kept: DuckDB preserves insertion order when a query has no ORDER BY.
        encoded = con.sql(f"select to_json(struct_pack({packed})) as j from {_ROWS}")
        return encoded.to_arrow_table().column("j").to_pylist()


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


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
