"""One spelling of a keyed state's values (``core.store.state_values``), whichever engine.

A micro-batch's partials are encoded on DuckDB, a replay's history and a batch's partials on
Spark, and a stream merges either into its own: on random rows of every partial's and
totals' schema, and of a schema of every type the rule spells (nested lists and structs, NULLs
anywhere, any Unicode, the integer extremes), DuckDB's bytes are the rule's (``encode``), so
are Spark's, and both read back as the rows they came from. A type the rule does not spell is
refused before either engine encodes it.
"""

from __future__ import annotations

import datetime as dt
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.store import state_values
from stream_engine import state_rows
from tests.unit.test_state_rows import STATES, rows

_ITEM = pa.struct([("flag", pa.bool_()), ("n", pa.int64()), ("tags", pa.list_(pa.string()))])
EVERY_TYPE = pa.schema(
    [
        ("text", pa.string()),
        ("i8", pa.int8()),
        ("i16", pa.int16()),
        ("i32", pa.int32()),
        ("i64", pa.int64()),
        ("flag", pa.bool_()),
        ("texts", pa.list_(pa.string())),
        ("nested", pa.list_(pa.list_(pa.int32()))),
        ("items", pa.list_(_ITEM)),
        ("record", pa.struct([("name", pa.string()), ("items", pa.list_(_ITEM))])),
    ]
)
"""Every type the rule spells, nested as no state nests them yet."""

SCHEMAS = {name: schema for name, (schema, _key) in STATES.items()} | {"every type": EVERY_TYPE}


@pytest.fixture(scope="module")
def con() -> duckdb.DuckDBPyConnection:
    return duckdb.connect()


def test_the_rule_spelled_out() -> None:
    """The rule's bytes on one row: field order, no whitespace, NULLs kept, integers, escapes
    (upper-case hex), non-ASCII and ``/`` as they are."""
    row = {
        "s": 'a"\\/\x00\x1f\x7f\b\t\n\f\ré\u2028😀',
        "n": -9223372036854775808,
        "absent": None,
        "b": False,
        "l": [1, None, 3],
        "e": [],
        "r": {"z": None, "a": [{"k": "v"}]},
    }
    assert state_values.encode(row) == (
        '{"s":"a\\"\\\\/\\u0000\\u001F\x7f\\b\\t\\n\\f\\ré\u2028😀",'
        '"n":-9223372036854775808,"absent":null,"b":false,"l":[1,null,3],"e":[],'
        '"r":{"z":null,"a":[{"k":"v"}]}}'
    )


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_duckdb_spells_a_value_by_the_rule(
    con: duckdb.DuckDBPyConnection, name: str, data: st.DataObject
) -> None:
    schema = SCHEMAS[name]
    table = pa.Table.from_pylist(data.draw(rows(schema, data.draw(st.booleans()))), schema=schema)
    stored = table.to_pylist()

    spelled = state_values.on_duckdb(con, table)
    assert spelled == [state_values.encode(row) for row in stored]
    assert state_rows.table(spelled, schema).to_pylist() == stored


@pytest.mark.parametrize("name", sorted(SCHEMAS))
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_spark_spells_a_value_as_the_rule_and_duckdb_do(
    spark: Any, con: duckdb.DuckDBPyConnection, name: str, data: st.DataObject
) -> None:
    """A replay's history and a batch's partials are encoded on Spark: the same bytes as a
    micro-batch's on DuckDB, for the same rows."""
    schema = SCHEMAS[name]
    drawn = data.draw(rows(schema, data.draw(st.booleans()), max_size=40))
    table = pa.Table.from_pylist(drawn, schema=schema)
    stored = table.to_pylist()
    numbered = table.append_column("_n", pa.array(range(table.num_rows), pa.int64()))

    frame = spark.createDataFrame(numbered)
    value = state_values.on_spark(frame, schema.names).alias("v")
    spelled = [row["v"] for row in frame.orderBy("_n").select(value).collect()]
    assert spelled == [state_values.encode(row) for row in stored]
    assert spelled == state_values.on_duckdb(con, table)
    assert state_rows.table(spelled, schema).to_pylist() == stored


REFUSED = {
    "float": (pa.float64(), 1.5),
    "decimal": (pa.decimal128(10, 2), Decimal("1.50")),
    "timestamp": (pa.timestamp("ms", tz="UTC"), dt.datetime(2026, 1, 1, tzinfo=dt.UTC)),
    "date": (pa.date32(), dt.date(2026, 1, 1)),
    "binary": (pa.binary(), b"x"),
    "map": (pa.map_(pa.string(), pa.int64()), [("k", 1)]),
    "float in a list": (pa.list_(pa.float32()), [1.5]),
    "timestamp in a struct": (
        pa.struct([("at", pa.timestamp("ms"))]),
        {"at": dt.datetime(2026, 1, 1)},
    ),
}


def _refused(name: str) -> pa.Table:
    data_type, value = REFUSED[name]
    schema = pa.schema([("k", pa.string()), ("v", data_type)])
    return pa.Table.from_pylist([{"k": "a", "v": value}], schema=schema)


_REFUSAL = r"a state value is strings, integers.*: not v \("


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_type_the_rule_does_not_spell_is_refused_on_duckdb(
    con: duckdb.DuckDBPyConnection, name: str
) -> None:
    with pytest.raises(TypeError, match=_REFUSAL):
        state_values.on_duckdb(con, _refused(name))


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_a_type_the_rule_does_not_spell_is_refused_on_spark(spark: Any, name: str) -> None:
    table = _refused(name)
    with pytest.raises(TypeError, match=_REFUSAL):
        state_values.on_spark(spark.createDataFrame(table), table.column_names)


@pytest.mark.parametrize("value", [1.5, Decimal("1.5"), dt.datetime(2026, 1, 1), b"x", {1, 2}])
def test_the_rule_spells_no_other_python_value(value: object) -> None:
    with pytest.raises(TypeError, match="a state value holds no"):
        state_values.encode({"k": "a", "v": [value]})


def test_every_state_is_spelled_by_the_rule() -> None:
    """A view whose partial or totals held a float or a timestamp would fail here, not at its
    first micro-batch."""
    for schema in SCHEMAS.values():
        state_values.check(schema)
