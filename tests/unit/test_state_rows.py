"""The keyed state's spelling (``stream_engine.state_rows``), property-based.

Every state in a store was written as ``orjson.dumps`` of the row as a dict, NULL fields left
out; a key spelled otherwise by a later micro-batch would miss its stored value. So on random
rows of every partial's and totals' schema (any Unicode, control characters, NULLs at the top
and inside, the int64 extremes), the vectorized encoding must be that spelling byte for byte,
and decoding must give the rows back.
"""

from __future__ import annotations

from typing import Any

import duckdb
import orjson
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.views import PARTIALS
from stream_engine import state_rows

STATES = {
    name: (schema, key)
    for aggregate in PARTIALS.values()
    if aggregate.additive
    for name, schema, key in (
        (aggregate.view, aggregate.schema.to_pyarrow(), aggregate.key),
        (f"{aggregate.view}:totals", aggregate.totals_schema.to_pyarrow(), aggregate.total_key),
    )
}


def values(data_type: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_string(data_type):
        return st.text(max_size=8)
    if pa.types.is_integer(data_type):
        bits = data_type.bit_width
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if pa.types.is_boolean(data_type):
        return st.booleans()
    if pa.types.is_list(data_type):
        return st.lists(values(data_type.value_type), max_size=3)
    assert pa.types.is_struct(data_type), data_type
    fields = [data_type.field(i) for i in range(data_type.num_fields)]
    return st.fixed_dictionaries({f.name: st.none() | values(f.type) for f in fields})


def rows(schema: pa.Schema, top_nulls: bool) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Random rows; without `top_nulls`, every row takes DuckDB's path unless a string in
    it has a control character."""
    row = st.fixed_dictionaries(
        {f.name: (st.none() | values(f.type)) if top_nulls else values(f.type) for f in schema}
    )
    return st.lists(row, max_size=12)


def reference(row: dict[str, Any], columns: tuple[str, ...] | list[str]) -> str:
    return orjson.dumps({c: row[c] for c in columns if row[c] is not None}).decode()


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


@pytest.mark.parametrize("name", sorted(STATES))
@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_keys_and_values_are_spelled_as_stored_and_read_back(
    con: duckdb.DuckDBPyConnection, name: str, data: st.DataObject
) -> None:
    schema, key = STATES[name]
    drawn = data.draw(rows(schema, top_nulls=data.draw(st.booleans())))
    table = pa.Table.from_pylist(drawn, schema=schema)
    stored = table.to_pylist()  # each row's fields, nested ones too, in the schema's order

    pairs = state_rows.pairs(con, table, key)
    assert pairs == [(reference(r, key), reference(r, schema.names)) for r in stored]
    assert state_rows.keys(con, table, key) == [k for k, _ in pairs]
    assert state_rows.table([v for _, v in pairs], schema).to_pylist() == stored


def test_an_empty_state_reads_as_an_empty_table() -> None:
    schema, _key = STATES["search_ctr"]
    assert state_rows.table([], schema).schema == schema
