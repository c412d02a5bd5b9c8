"""Partial rows between Arrow (what DuckDB gives and takes) and the store's keyed state (text).

``core.store.state`` keeps each partial row as JSON under the JSON of its key: an object of the
key's columns (``{"page":"/home","_window_start_ms":...}``), and of all the row's columns for
the value, NULL fields left out. That is the spelling of ``orjson.dumps`` of the row as a dict
(``_python_objects``), which every state in a store was written with: a key spelled otherwise
would miss its stored value, and count its events twice.

A micro-batch of a replay encodes a few hundred thousand rows: one by one in Python that cost
3.6 µs a row (a tenth of a replay's time), so rows are encoded by DuckDB's ``to_json`` (84,000
`search_ctr` rows, key and value: 0.30 s in Python, 0.08 s so) and decoded by Arrow's JSON
reader (0.19 s with orjson, 0.04 s). DuckDB spells two things otherwise: a
NULL field (written, not left out) and the escape of a control character (``\\u001F`` for
``\\u001f``). The rows with either are encoded in Python, so the spelling stays the same byte
for byte (``tests/unit/test_state_rows.py`` checks it on random rows).
"""

from __future__ import annotations

import io
from collections.abc import Sequence

import duckdb
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pa_json

from core.times import to_ms
from core.views.query import registered

INTERVAL_COLUMNS = ("user_id", "session_start", "session_end", "events")
_ROWS = "_state_rows"


def _python_objects(table: pa.Table, columns: Sequence[str]) -> list[str]:
    """The reference spelling, a row at a time."""
    rows = table.select(list(columns)).to_pylist()
    return [orjson.dumps({k: v for k, v in row.items() if v is not None}).decode() for row in rows]


def _spelled_alike(data_type: pa.DataType) -> bool:
    """Whether DuckDB's JSON of a value of this type is orjson's (floats and times are not:
    their digits and formats differ; no partial has one today)."""
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return True
    if pa.types.is_integer(data_type) or pa.types.is_boolean(data_type):
        return True
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return _spelled_alike(data_type.value_type)
    if pa.types.is_struct(data_type):
        return all(_spelled_alike(data_type.field(i).type) for i in range(data_type.num_fields))
    return False


def _objects(
    con: duckdb.DuckDBPyConnection, table: pa.Table, columns: Sequence[Sequence[str]]
) -> list[list[str]]:
    """For each group of `columns`, each row's JSON object of that group's columns."""
    if table.num_rows == 0:
        return [[] for _ in columns]
    names = list(dict.fromkeys(c for group in columns for c in group))
    if not all(_spelled_alike(table.schema.field(c).type) for c in names):
        return [_python_objects(table, group) for group in columns]
    packed = ", ".join(
        f"to_json(struct_pack({', '.join(_quoted(c) for c in group)})) as j{i}"
        for i, group in enumerate(columns)
    )
    with registered(con, **{_ROWS: table.select(names)}):
        # Row order is kept: DuckDB preserves insertion order when a query has no ORDER BY.
        encoded = con.sql(f"select {packed} from {_ROWS}").to_arrow_table()
    results = []
    for i, group in enumerate(columns):
        column = encoded.column(f"j{i}")
        unlike = pc.match_substring(column, "\\u")
        for c in group:
            unlike = pc.or_(unlike, pc.is_null(table.column(c)))
        objects = column.to_pylist()
        where = pc.indices_nonzero(pc.fill_null(unlike, True)).to_pylist()
        if where:
            for index, fixed in zip(where, _python_objects(table.take(where), group), strict=True):
                objects[index] = fixed
        results.append(objects)
    return results


def _quoted(column: str) -> str:
    return '"' + column.replace('"', '""') + '"'


def keys(con: duckdb.DuckDBPyConnection, table: pa.Table, key: Sequence[str]) -> list[str]:
    """The state key of each row."""
    return _objects(con, table, [key])[0]


def pairs(
    con: duckdb.DuckDBPyConnection, table: pa.Table, key: Sequence[str]
) -> list[tuple[str, str]]:
    """(key, value) of each row, as the state keeps them."""
    encoded_keys, values = _objects(con, table, [key, table.column_names])
    return list(zip(encoded_keys, values, strict=True))


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
