"""The five views in DuckDB SQL over the master dataset's files: a reference for benchmarking only.

This is NOT a second implementation of the project's logic: the one business logic is
`core/views` (Spark), which every layer calls. This module exists so that `make bench` can say
how fast a single-node engine computes the same answer from the same files, and check that the
answers agree. It follows CONTRACT §3 and the batch layer's cutoff rules (`batch_layer.job`):
deduplicate over all history (first in log order wins), window views on events before
cutoff + 30 min then cut at the cutoff, sessions on events before the cutoff.

Input: the master dataset's valid events and profile versions as the shared parsing gives them
(the master dataset holds raw records, and DuckDB has no copy of the validation), written once
by Spark as Parquet (`parsed_input`; DuckDB's `delta` extension cannot be downloaded here), read
from MinIO through pyarrow's S3 file system into DuckDB tables.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from core.catalog import CLICK_WINDOW_MS, SESSION_GAP_MS, UNKNOWN_SEGMENT, VIEWS
from core.ingestion import PROFILE_COLUMNS
from core.settings import Settings
from core.times import HOUR_MS, MINUTE_MS
from core.views import VIEW_INPUT_COLUMNS

if TYPE_CHECKING:
    import duckdb
    from pyspark.sql import SparkSession

    from core.master_dataset import MasterDataset

# What the five views read of an event; Spark reads the same subset.
EVENT_COLUMNS = VIEW_INPUT_COLUMNS


def _window(size_ms: int) -> str:
    # Floor modulo, as core.views.windows (Spark's pmod): right for negative times too.
    return f"(event_ts - ((event_ts % {size_ms}) + {size_ms}) % {size_ms})"


# Every view yields its catalogue columns, times as epoch ms (bigint), for comparison.
VIEW_SQL: dict[str, str] = {
    "page_views": f"""
        select page, ws as window_start, ws + {MINUTE_MS} as window_end, count(*) as count
        from (select page, {_window(MINUTE_MS)} as ws from window_input
              where type = 'page_view')
        where ws < $cutoff
        group by page, ws""",
    "unique_users": f"""
        select ws as window_start, ws + {HOUR_MS} as window_end,
               count(distinct user_id) as users
        from (select user_id, {_window(HOUR_MS)} as ws from window_input)
        where ws < $cutoff
        group by ws""",
    "search_ctr": f"""
        with searches as (
            select event_id, event_ts, query, {_window(HOUR_MS)} as ws
            from window_input where type = 'search'),
        clicks as (select search_id, event_ts from window_input where type = 'click'),
        clicked as (
            select distinct s.event_id from searches s join clicks c
            on c.search_id = s.event_id
            and c.event_ts between s.event_ts and s.event_ts + {CLICK_WINDOW_MS})
        select s.query, s.ws as window_start, s.ws + {HOUR_MS} as window_end,
               count(*) as searches, count(k.event_id) as clicks,
               count(k.event_id) / count(*) as ctr
        from searches s left join clicked k on k.event_id = s.event_id
        where s.ws < $cutoff
        group by s.query, s.ws""",
    "revenue_by_segment": f"""
        with orders as (
            select user_id, event_ts, amount_cents, {_window(HOUR_MS)} as ws
            from window_input where type = 'order'),
        versions as (  -- one version per (user, updated_ts): the later in the log
            select user_id, updated_ts, segment from profiles
            qualify row_number() over (
                partition by user_id, updated_ts order by "partition" desc, "offset" desc) = 1),
        as_of as (
            select o.ws, o.amount_cents, v.segment from orders o
            asof left join versions v
            on o.user_id = v.user_id and o.event_ts >= v.updated_ts)
        select coalesce(segment, '{UNKNOWN_SEGMENT}') as segment, ws as window_start,
               ws + {HOUR_MS} as window_end, sum(amount_cents)::bigint as revenue_cents
        from as_of where ws < $cutoff
        group by all""",
    "sessions": f"""
        with ordered as (
            select user_id, event_ts,
                   event_ts - lag(event_ts) over (partition by user_id order by event_ts) as gap
            from deduped where event_ts < $cutoff and event_time is not null),
        numbered as (
            select user_id, event_ts,
                   sum(case when gap is null or gap > {SESSION_GAP_MS} then 1 else 0 end) over (
                       partition by user_id order by event_ts
                       rows between unbounded preceding and current row) as session
            from ordered)
        select user_id, min(event_ts) as session_start, max(event_ts) as session_end,
               count(*) as events
        from numbered group by user_id, session""",
}
assert tuple(VIEW_SQL) == tuple(VIEWS), "one reference query per catalogued view"


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
    from pyarrow import fs

    s3 = fs.S3FileSystem(
        access_key=settings.minio_access_key,
        secret_key=settings.minio_secret_key,
        endpoint_override=settings.s3_endpoint.removeprefix("http://"),
        scheme="http",
        region="us-east-1",
    )
    return ds.dataset([uri.removeprefix("s3a://") for uri in uris], format="parquet", filesystem=s3)


def _load(con: duckdb.DuckDBPyConnection, name: str, dataset: Any, columns: tuple[str, ...]) -> int:
    con.register(f"{name}_files", dataset)
    quoted = ", ".join(f'"{c}"' for c in columns)
    con.execute(f"create table {name} as select {quoted} from {name}_files")
    con.unregister(f"{name}_files")
    # fetchall, not fetchone: an unfinished result would block the connection's next call.
    return int(con.execute(f"select count(*) from {name}").fetchall()[0][0])


def compute(
    settings: Settings, event_files: list[str], profile_files: list[str], cutoff_ms: int
) -> DuckResult:
    """Load the files into DuckDB, then compute the five views; timings of each part."""
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
    con.execute(
        'create table deduped as select * exclude ("partition", "offset") from events '
        'qualify row_number() over (partition by event_id order by "partition", "offset") = 1'
    )
    # A view cannot take parameters: the bound is an integer, written into the text.
    con.execute(
        "create view window_input as select * from deduped "
        f"where event_ts < {int(cutoff_ms) + CLICK_WINDOW_MS} and event_time is not null"
    )
    result.view_seconds["dedup"] = time.monotonic() - started
    for name, query in VIEW_SQL.items():
        view_started = time.monotonic()
        result.rows[name] = con.execute(query, {"cutoff": cutoff_ms}).fetchall()
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
