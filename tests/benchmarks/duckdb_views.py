"""The batch views on DuckDB, from the master dataset's files: the same view logic as Spark's.

The views are written once (`core/views`, Ibis) and compiled for both engines; the stream
engine runs them on DuckDB for each micro-batch, the batch layer on Spark over all history.
This step runs the batch layer's computation on DuckDB instead, over the same files, so that
`make bench` can say how fast a single-node engine computes the same answer, and check that
the answers agree. It follows the batch layer's rules (`batch_layer.job`): deduplicate over
all history (first in log order wins), window views on events before cutoff + 30 min then cut
at the cutoff, sessions on events before the cutoff.

Input: the master dataset's valid events and profile versions as the shared parsing gives them
(the master dataset holds raw records, and the parse is Spark's), written once by Spark as
Parquet (`parsed_input`; DuckDB's `delta` extension cannot be downloaded here), read from MinIO
through pyarrow's S3 file system into DuckDB tables.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow.compute as pc

from core.catalog import LOOKAHEAD_MS, VIEWS
from core.ingestion import PROFILE_COLUMNS
from core.object_store import object_store
from core.settings import Settings
from core.views import PARTIALS, VIEW_INPUT_COLUMNS
from core.views.query import on_duckdb, registered

if TYPE_CHECKING:
    import duckdb
    from pyspark.sql import SparkSession

    from core.master_dataset import MasterDataset

EVENT_COLUMNS = VIEW_INPUT_COLUMNS


@dataclass
class DuckResult:
    load_seconds: float
    views_seconds: float
    events: int
    files: int
    rows: dict[str, list[tuple[Any, ...]]] = field(default_factory=dict)
    view_seconds: dict[str, float] = field(default_factory=dict)


def parsed_input(
    spark: SparkSession, settings: Settings, master: MasterDataset
) -> tuple[list[str], list[str]]:
    """Parquet files of the master dataset's valid events (the view columns) and profile
    versions, parsed by Spark with the shared parsing; their URIs (events, profiles)."""
    from pyspark.sql import functions as F

    from batch_layer import job

    root = f"s3a://{settings.views_bucket}/bench/duckdb-input"
    parsed = job.parse_master_events(job.read_master_events(spark, master))
    events = parsed.where(F.col("reason").isNull()).select(*EVENT_COLUMNS)
    events.write.mode("overwrite").parquet(f"{root}/events")
    job.read_master_profiles(spark, master).write.mode("overwrite").parquet(f"{root}/profiles")
    return (
        list(spark.read.parquet(f"{root}/events").inputFiles()),
        list(spark.read.parquet(f"{root}/profiles").inputFiles()),
    )


def _dataset(settings: Settings, uris: list[str]) -> Any:
    import pyarrow.dataset as ds

    paths = [uri.removeprefix("s3a://") for uri in uris]
    return ds.dataset(paths, format="parquet", filesystem=object_store(settings))


def _load(con: duckdb.DuckDBPyConnection, name: str, dataset: Any, columns: tuple[str, ...]) -> int:
    quoted = ", ".join(f'"{c}"' for c in columns)
    with registered(con, **{f"{name}_files": dataset}):
        con.execute(f"create table {name} as select {quoted} from {name}_files")
    # fetchall, not fetchone: an unfinished result would block the connection's next call.
    return int(con.execute(f"select count(*) from {name}").fetchall()[0][0])


def compute(
    settings: Settings, event_files: list[str], profile_files: list[str], cutoff_ms: int
) -> DuckResult:
    """Load the files into DuckDB, then compute the five views with the shared logic; timings
    of each part."""
    import duckdb

    con = duckdb.connect()
    started = time.monotonic()
    events = _load(con, "events", _dataset(settings, event_files), EVENT_COLUMNS)
    if profile_files:
        _load(con, "profiles", _dataset(settings, profile_files), PROFILE_COLUMNS)
    else:
        con.execute(
            "create table profiles (user_id varchar, segment varchar, updated_ts bigint, "
            '"partition" integer, "offset" bigint)'
        )
    load_seconds = time.monotonic() - started

    result = DuckResult(load_seconds, 0.0, events, len(event_files) + len(profile_files))
    started = time.monotonic()
    # The batch layer's input: every event once (the first in the log), then its cutoffs.
    con.execute(
        "create table deduped as select * from events qualify row_number() over "
        '(partition by event_id order by "partition", "offset") = 1'
    )
    window_bound = int(cutoff_ms) + LOOKAHEAD_MS
    windows = con.sql(f"select * from deduped where event_ts < {window_bound}").to_arrow_table()
    before = con.sql(f"select * from deduped where event_ts < {int(cutoff_ms)}").to_arrow_table()
    profiles = con.sql("select * from profiles").to_arrow_table()
    result.view_seconds["dedup"] = time.monotonic() - started
    for name, aggregate in PARTIALS.items():
        view_started = time.monotonic()
        spec = VIEWS[name]
        events_in = before if spec.straddles_cutoff else windows  # as batch_layer.job
        rows = on_duckdb(con, aggregate.view_query, in_events=events_in, in_profiles=profiles)
        if not spec.straddles_cutoff:
            rows = rows.filter(pc.less(rows.column("window_start"), cutoff_ms))
        columns = (rows.column(c).to_pylist() for c in spec.columns)
        result.rows[name] = list(zip(*columns, strict=True))
        result.view_seconds[name] = time.monotonic() - view_started
    result.views_seconds = time.monotonic() - started
    con.close()
    return result


def spark_rows(settings: Settings, version: int) -> dict[str, list[tuple[Any, ...]]]:
    """The batch rows Spark wrote for `version`, times as epoch ms."""
    from core.store.connection import connect
    from core.store.schema import batch_table
    from core.times import to_ms

    rows = {}
    with connect(settings) as conn:
        for name, spec in VIEWS.items():
            columns = ", ".join(spec.columns)
            times = {spec.columns.index(f) for f in spec.time_fields}
            fetched = conn.execute(
                f"select {columns} from {batch_table(name)} where version = %s", (version,)
            ).fetchall()
            rows[name] = [
                tuple(to_ms(v) if i in times else v for i, v in enumerate(row)) for row in fetched
            ]
    return rows


def _key(name: str, row: tuple[Any, ...]) -> tuple[Any, ...]:
    # ctr is a quotient of the two counts beside it: compared through them, not as a float.
    return row[:-1] if name == "search_ctr" else tuple(row)


def compare(
    duck: dict[str, list[tuple[Any, ...]]], spark: dict[str, list[tuple[Any, ...]]]
) -> dict[str, dict[str, Any]]:
    """Per view: row counts on each side and how many rows differ (0: the same answer)."""
    report = {}
    for name in VIEWS:
        ours = {_key(name, tuple(r)) for r in duck.get(name, [])}
        theirs = {_key(name, tuple(r)) for r in spark.get(name, [])}
        report[name] = {
            "rows_duckdb": len(duck.get(name, [])),
            "rows_spark": len(spark.get(name, [])),
            "differing_rows": len(ours ^ theirs),
            "equal": ours == theirs,
        }
    return report
