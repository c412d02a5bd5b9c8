"""The keyed state's rows (``stream_engine.state_rows``), property-based.

On random rows of every partial's and totals' schema (any Unicode, control characters, NULLs at
the top and inside, the int64 extremes), each row's key is its key columns' values, typed, and
its value decodes back to the row. A key of a shape the store has no columns for is refused.
"""

from __future__ import annotations

from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.store import state
from core.store.state import NO_MS, NO_TEXT
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


SPECIAL = st.sampled_from('"\\/\x00\x08\x0b\x1f\x7f\x80\u2028\ufeff\U0001f600')
"""Characters JSON writers tend to disagree on: often drawn, beside any other."""


def values(data_type: pa.DataType) -> st.SearchStrategy[Any]:
    if pa.types.is_string(data_type):
        return st.text(SPECIAL | st.characters(codec="utf-8"), max_size=8)
    if pa.types.is_integer(data_type):
        bits = data_type.bit_width
        return st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if pa.types.is_boolean(data_type):
        return st.booleans()
    if pa.types.is_list(data_type):
        return st.lists(st.none() | values(data_type.value_type), max_size=3)
    assert pa.types.is_struct(data_type), data_type
    fields = [data_type.field(i) for i in range(data_type.num_fields)]
    return st.fixed_dictionaries({f.name: st.none() | values(f.type) for f in fields})


def rows(
    schema: pa.Schema, top_nulls: bool, max_size: int = 12
) -> st.SearchStrategy[list[dict[str, Any]]]:
    """Random rows of `schema` (with `top_nulls`, a column may be NULL too)."""
    row = st.fixed_dictionaries(
        {f.name: (st.none() | values(f.type)) if top_nulls else values(f.type) for f in schema}
    )
    return st.lists(row, max_size=max_size)


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

    text, ms = state.key_columns(schema, key)
    encoded = state_rows.rows(con, table, key)
    assert list(encoded.keys.texts) == [r[text] if text else NO_TEXT for r in stored]
    assert list(encoded.keys.ms) == [r[ms] if ms else NO_MS for r in stored]
    assert state.keys(table, key) == encoded.keys
    assert state_rows.table(encoded.values, schema).to_pylist() == stored


def test_a_key_the_store_has_no_columns_for_is_refused() -> None:
    schema = pa.schema([("a", pa.string()), ("b", pa.string()), ("t", pa.int64())])
    assert state.key_columns(schema, ("t", "a")) == ("a", "t")
    for key in (("a", "b"), ("a", "b", "t"), ()):
        with pytest.raises(ValueError, match="one string column, one integer column"):
            state.key_columns(schema, key)


def test_an_empty_state_reads_as_an_empty_table() -> None:
    schema, _key = STATES["search_ctr"]
    assert state_rows.table([], schema).schema == schema
