"""A view query, written once, run by either engine: Spark for the batch layer, DuckDB for a
stream's micro-batches.

The view logic (``core.views``) is Ibis expressions over named, unbound input tables. A
``Query`` compiles its expression once per process and engine:

- to Spark SQL, which ``on_spark`` runs over DataFrames (the batch layer's whole history);
- to DuckDB SQL, which ``on_duckdb`` runs in process over Arrow tables (a micro-batch's new
  events and the state of the keys they touch).

Why two engines for one logic: a Spark query costs 150-270 ms to plan and run on two cores
even on a few hundred rows, and a micro-batch merges each view in several queries, so a
micro-batch of 2,000 events took 6.5 s in Spark, nearly all of it fixed cost. The same queries
on DuckDB take a few milliseconds. The data a micro-batch merges is its own new input and the
touched keys' state: small, and in the driver already. Spark keeps what it is good at: the
streaming query (Kafka, parse, deduplication in RocksDB, checkpoints) and the batch layer's
recompute of everything. ``tests/unit/test_partial_laws.py`` checks both engines against the
oracle.

Time fields leave a view as epoch milliseconds (Ibis cannot turn milliseconds into a Spark
timestamp); ``with_timestamps`` (Spark) and ``core.views.rows`` (Arrow) dress them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from functools import cached_property
from typing import TYPE_CHECKING, Any, TypeVar

import ibis

if TYPE_CHECKING:
    import duckdb
    import ibis.expr.types as ir
    import pyarrow as pa
    from pyspark.sql import DataFrame, SparkSession

    from core.catalog import ViewSpec

SPARK = "pyspark"
DUCKDB = "duckdb"

T = TypeVar("T")


class Query:
    """An Ibis expression over unbound input tables (``ibis.table(schema, name=...)``),
    compiled once per engine."""

    def __init__(self, name: str, expr: ir.Table) -> None:
        self.name = name
        self.expr = expr
        self.inputs: tuple[str, ...] = tuple(
            sorted({table.name for table in expr.op().find(ibis.expr.operations.UnboundTable)})
        )
        self.schema = expr.schema()

    @cached_property
    def duckdb_sql(self) -> str:
        return ibis.to_sql(self.expr, dialect=DUCKDB)

    @cached_property
    def arrow_schema(self) -> pa.Schema:
        """The declared types, which a DuckDB answer is cast to: DuckDB sums 64-bit integers
        into 128-bit ones, where Ibis (and Spark) keep 64 bits."""
        return self.schema.to_pyarrow()

    @cached_property
    def spark_sql(self) -> str:
        """Spark SQL with each input as a ``{name}`` placeholder for ``spark.sql``'s DataFrame
        arguments (no temporary view shared across the session)."""
        text = ibis.to_sql(self.expr, dialect=SPARK).replace("{", "{{").replace("}", "}}")
        for name in self.inputs:  # input names (``core.views.tables``) are no column's name
            text = text.replace(f"`{name}`", f"{{{name}}}")
        return text

    def __repr__(self) -> str:
        return f"Query({self.name!r}, inputs={self.inputs})"


def _inputs(query: Query, given: dict[str, T]) -> dict[str, T]:
    """The given inputs the query reads (a view that ignores profiles is given them too)."""
    missing = set(query.inputs) - set(given)
    if missing:
        raise ValueError(f"{query.name} reads {sorted(query.inputs)}; missing {sorted(missing)}")
    return {name: given[name] for name in query.inputs}


def on_spark(spark: SparkSession, query: Query, **frames: DataFrame) -> DataFrame:
    """The query over Spark DataFrames (lazy, as any DataFrame)."""
    # The frames are its keyword arguments; `args` (the query's parameters) is none.
    return spark.sql(query.spark_sql, args=None, **_inputs(query, frames))


def on_duckdb(con: duckdb.DuckDBPyConnection, query: Query, **tables: pa.Table) -> pa.Table:
    """The query over Arrow tables, run now in process."""
    with registered(con, **_inputs(query, tables)):
        return con.sql(query.duckdb_sql).to_arrow_table().cast(query.arrow_schema)


@contextmanager
def registered(con: duckdb.DuckDBPyConnection, **tables: Any) -> Iterator[None]:
    """Arrow tables (or datasets) readable by name in `con`'s SQL for the block's length: a
    connection outlives many micro-batches, and a name left behind would pin its table."""
    for name, table in tables.items():
        con.register(name, table)
    try:
        yield
    finally:
        for name in tables:
            con.unregister(name)


def with_timestamps(frame: DataFrame, spec: ViewSpec) -> DataFrame:
    """A view's rows from Spark with its two time fields as timestamps (they are epoch ms)."""
    return timestamps_of(frame, spec.columns, spec.time_fields)


def timestamps_of(
    frame: DataFrame, columns: Sequence[str], time_fields: Sequence[str]
) -> DataFrame:
    """`columns` of a frame from Spark, in order, `time_fields` (epoch ms) as timestamps."""
    from pyspark.sql import functions as F  # deferred: pyspark

    return frame.select(
        *(F.timestamp_millis(F.col(c)).alias(c) if c in time_fields else F.col(c) for c in columns)
    )


def store_table(table: pa.Table, spec: ViewSpec) -> pa.Table:
    """A view's rows from DuckDB as the store's columns: ``spec.columns`` in order, the two
    time fields (epoch ms) as UTC timestamps (a match's event times too)."""
    import pyarrow as pa  # deferred: pyarrow

    columns = []
    for name in spec.columns:
        column = table.column(name)
        if name in spec.time_fields or name in spec.instants:
            column = column.cast(pa.timestamp("ms", tz="UTC"))
        columns.append(column)
    return pa.table(columns, names=list(spec.columns))


def store_rows(table: pa.Table, spec: ViewSpec) -> list[tuple]:
    """``store_table`` as tuples (the time fields as UTC datetimes)."""
    stored = store_table(table, spec)
    return list(zip(*(column.to_pylist() for column in stored.columns), strict=True))
