"""The one spelling of a keyed state's values (``stream_state.value``), whichever engine
computed them.

Four writers encode partial rows: a stream's micro-batch and Lambda's hand-off on DuckDB
(``stream_engine.state_rows``), a Kappa replay's history and the batch layer's partials on
Spark (``stream_engine.history``, ``batch_layer.job.write_partials``). Each engine spells with
its own ``to_json`` (the fastest way either has: a few hundred thousand rows a micro-batch),
and both are held to one rule, which ``encode`` is in plain Python and
``tests/unit/test_state_values.py`` checks them against, byte for byte, on generated rows of
every state's schema. A value is read back by Arrow's JSON reader (``stream_engine.state_rows
.table``), with the state's schema.

The rule:

- a row is a JSON object of all its columns, in the schema's order; a struct likewise, its
  fields in their order; no whitespace anywhere;
- NULL is ``null``, as a column, a struct's field or a list's element: no field is left out
  (Spark's ``to_json`` drops NULL fields unless told not to);
- an integer of any width is its decimal digits, ``-`` before a negative one (no ``+``, no
  exponent, no leading zero); a boolean is ``true`` or ``false``;
- a string is its UTF-8 text between ``"``, with ``"`` and ``\\`` escaped by a backslash and
  U+0000 to U+001F as ``\\b \\t \\n \\f \\r`` or else ``\\u00XX`` (upper-case hex); nothing else
  is escaped (not ``/``, U+007F, U+2028, U+2029, nor any other non-ASCII character);
- a list is a JSON array of its elements in the list's order. The order is part of the value
  as the engine computed it: a partial's lists of facts (a search's clicks, a user's orders
  and profile versions) are merged by concatenation and read as multisets, so two equal
  states may list their facts in different orders; nothing compares stored values as text;
- no other type: a float (Spark writes ``1.0E10``, DuckDB ``10000000000.0``), a decimal, a
  timestamp or date (a zone and a precision to agree on), a map, binary. A partial keeps
  times as epoch milliseconds and money as cents, exact integers; ``check`` refuses a schema
  with anything else before either engine encodes it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

if TYPE_CHECKING:
    import duckdb
    from pyspark.sql import Column, DataFrame

_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}
_ESCAPED = re.compile('["\\\\\x00-\x1f]')


def _escape(found: re.Match[str]) -> str:
    char = found.group()
    return _ESCAPES.get(char) or f"\\u{ord(char):04X}"


def _spelled(value: Any) -> Iterable[str]:
    if value is None:
        yield "null"
    elif isinstance(value, bool):  # before int: a bool is an int to Python
        yield "true" if value else "false"
    elif isinstance(value, int):
        yield str(value)
    elif isinstance(value, str):
        yield f'"{_ESCAPED.sub(_escape, value)}"'
    elif isinstance(value, Mapping):
        yield "{"
        for n, (name, field) in enumerate(value.items()):
            yield f'{"," if n else ""}"{_ESCAPED.sub(_escape, name)}":'
            yield from _spelled(field)
        yield "}"
    elif isinstance(value, list | tuple):
        yield "["
        for n, element in enumerate(value):
            if n:
                yield ","
            yield from _spelled(element)
        yield "]"
    else:
        raise TypeError(f"a state value holds no {type(value).__name__} ({value!r})")


def encode(row: Mapping[str, Any]) -> str:
    """`row` (a column name -> its value, as ``pyarrow.Table.to_pylist`` gives it, in the
    schema's order) spelled by the rule: what either engine writes for it."""
    return "".join(_spelled(row))


def _refused(data_type: pa.DataType) -> str | None:
    """Why `data_type` has no spelling under the rule, None if it has one."""
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return None
    if pa.types.is_integer(data_type) or pa.types.is_boolean(data_type):
        return None
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return _refused(data_type.value_type)
    if pa.types.is_struct(data_type):
        fields = (data_type.field(i) for i in range(data_type.num_fields))
        return next((why for f in fields if (why := _refused(f.type)) is not None), None)
    return str(data_type)


def check(schema: pa.Schema) -> None:
    """Refuse a state whose columns hold a type the rule does not spell alike on both engines."""
    refused = [(f.name, why) for f in schema if (why := _refused(f.type)) is not None]
    if refused:
        raise TypeError(
            "a state value is strings, integers, booleans, lists and structs of them (times "
            "in epoch ms, money in cents): not "
            + ", ".join(f"{name} ({why})" for name, why in refused)
        )


_ENCODED = "_state_value_rows"


def on_duckdb(con: duckdb.DuckDBPyConnection, table: pa.Table) -> list[str]:
    """Each row of `table` spelled by the rule, on DuckDB (a micro-batch's merged partials)."""
    check(table.schema)
    if table.num_rows == 0:
        return []
    packed = ", ".join('"' + c.replace('"', '""') + '"' for c in table.column_names)
    con.register(_ENCODED, table)
    try:
        # Row order is kept: DuckDB preserves insertion order when a query has no ORDER BY.
        encoded = con.sql(f"select to_json(struct_pack({packed})) as j from {_ENCODED}")
        return encoded.to_arrow_table().column("j").to_pylist()
    finally:
        con.unregister(_ENCODED)


def on_spark(frame: DataFrame, columns: Sequence[str]) -> Column:
    """`columns` of each row of `frame` spelled by the rule, as a Spark column (a replay's
    history, a batch's partials)."""
    from pyspark.sql import functions as F  # deferred: pyspark
    from pyspark.sql.pandas.types import to_arrow_schema

    # Any zone: a timestamp is refused whichever.
    check(to_arrow_schema(frame.select(*columns).schema, timezone="UTC"))
    return F.to_json(F.struct(*columns), {"ignoreNullFields": "false"})
