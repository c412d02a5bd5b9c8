"""Partial rows between Arrow (what DuckDB gives and takes) and the store's keyed state (text).

``core.store.state`` keeps each partial row as JSON under the JSON of its key: an object of the
key's columns (``{"page":"/home","_window_start_ms":...}``), and of all the row's columns for
the value, NULL fields left out. That is the spelling of Spark's ``to_json``, which wrote the
state before micro-batches were merged on DuckDB, so a store written then reads the same.
"""

from __future__ import annotations

from collections.abc import Sequence

import orjson
import pyarrow as pa

from core.times import to_ms

INTERVAL_COLUMNS = ("user_id", "session_start", "session_end", "events")


def _objects(table: pa.Table, columns: Sequence[str]) -> list[bytes]:
    rows = table.select(list(columns)).to_pylist()
    return [orjson.dumps({k: v for k, v in row.items() if v is not None}) for row in rows]


def keys(table: pa.Table, key: Sequence[str]) -> list[str]:
    """The state key of each row."""
    return [k.decode() for k in _objects(table, key)]


def pairs(table: pa.Table, key: Sequence[str]) -> list[tuple[str, str]]:
    """(key, value) of each row, as the state keeps them."""
    values = _objects(table, table.column_names)
    return [(k, v.decode()) for k, v in zip(keys(table, key), values, strict=True)]


def table(values: Sequence[str], schema: pa.Schema) -> pa.Table:
    """Stored values back as rows of `schema` (a field the JSON leaves out is NULL)."""
    return pa.Table.from_pylist([orjson.loads(v) for v in values], schema=schema)


def intervals(sessions: Sequence[tuple], schema: pa.Schema) -> pa.Table:
    """Stored sessions (``user_id``, start and end as datetimes, events) as intervals in ms."""
    rows = [
        dict(zip(INTERVAL_COLUMNS, (user, to_ms(start), to_ms(end), events), strict=True))
        for user, start, end, events in sessions
    ]
    return pa.Table.from_pylist(rows, schema=schema)
