"""The derived ``dq_*`` columns the suites check (names in ``quality.suites``).

Each is one projection over the frame, so Spark computes it in the same scan as every other
expectation. A column a check needs but the frame lacks is left out: the suite's
``expect_column_to_exist`` then names the missing column, rather than this code failing first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypeAlias

import pandas as pd

import quality.suites as s
from core.catalog import VIEWS
from core.events import TYPE_REQUIRED
from core.times import HOUR_MS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

DAY_MS = 24 * HOUR_MS
_LONG_MAX = 2**63 - 1


def _has(columns: Sequence[str], *names: str) -> bool:
    return all(name in columns for name in names)


def events(df: DataFrame, *, partitioned: bool) -> DataFrame:
    """Parsed events plus the derived columns of ``raw_events`` (and ``master_partition``)."""
    from pyspark.sql import functions as F

    cols = df.columns
    derived: dict[str, Column] = {}
    if _has(cols, "type", *{f for fields in TYPE_REQUIRED.values() for f in fields}):
        # The first required field of the event's type that is NULL (parsing keeps the fields
        # of other types NULL, so only the type's own fields are looked at).
        missing = F.lit(None).cast("string")
        for event_type, fields in reversed(TYPE_REQUIRED.items()):
            for field in reversed(fields):
                is_missing = (F.col("type") == event_type) & F.col(field).isNull()
                missing = F.when(is_missing, F.lit(f"{event_type} without {field}")).otherwise(
                    missing
                )
        derived[s.DQ_MISSING_FIELD] = missing
    if _has(cols, "event_ts", "received_ts", "device_ts", "sent_ts"):
        # try_* arithmetic: Spark 4 runs in ANSI mode, where a long overflow would abort the
        # whole validation; an overflow becomes the largest long, which every range refuses.
        def minus(a: Column, b: Column) -> Column:
            return F.coalesce(F.try_subtract(a, b), F.lit(_LONG_MAX))

        device, sent, received = F.col("device_ts"), F.col("sent_ts"), F.col("received_ts")
        event_ts = F.col("event_ts")
        derived[s.DQ_SEND_DELAY] = minus(sent, device)
        derived[s.DQ_EVENT_TS_DRIFT] = minus(minus(event_ts, device), minus(received, sent))
        derived[s.DQ_ARRIVAL_LAG] = minus(received, event_ts)
    if partitioned and _has(cols, "timestamp", *s.PARTITION_COLUMN_TYPES):
        derived[s.DQ_PARTITION_MISMATCH] = _partition_mismatch()
    # Only these columns reach Great Expectations: a frame with wide raw columns (the master
    # dataset keeps the Kafka value) is not cached or scanned whole for nothing.
    checked = [c for c in cols if c in s.EVENT_COLUMN_TYPES or c in s.PARTITION_COLUMN_TYPES]
    return df.select(*checked, *(column.alias(name) for name, column in derived.items()))


def _partition_mismatch() -> Column:
    """``"<date>/<hour> for Kafka timestamp <iso>"`` where the partition columns do not hold
    the UTC date and hour of the record's Kafka timestamp, else NULL. Computed on the integer
    milliseconds, so the session time zone plays no part."""
    from pyspark.sql import functions as F

    date, hour = s.PARTITION_COLUMN_TYPES
    record_ts = F.unix_millis(F.col("timestamp"))
    day = F.floor(record_ts / F.lit(DAY_MS)).cast("int")
    expected_date = F.date_from_unix_date(day).cast("string")
    expected_hour = F.floor(F.pmod(record_ts, F.lit(DAY_MS)) / F.lit(HOUR_MS)).cast("int")
    matches = F.col(date).cast("string").eqNullSafe(expected_date) & F.col(hour).eqNullSafe(
        expected_hour
    )
    described = F.concat_ws(
        " ",
        F.concat_ws("/", F.col(date).cast("string"), F.col(hour).cast("string")),
        F.lit("for Kafka timestamp"),
        F.date_format(F.timestamp_millis(record_ts), "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
    )
    return F.when(record_ts.isNotNull() & ~matches, described)


# --- views --------------------------------------------------------------------------------------

Rows: TypeAlias = pd.DataFrame | Sequence[Mapping[str, Any]]


def as_pandas(rows: Any) -> pd.DataFrame:
    """A view's rows as pandas: a pandas frame as is, a small Spark frame collected, or rows
    (dicts, as the oracle and the serving API give them)."""
    if isinstance(rows, pd.DataFrame):
        return rows
    if hasattr(rows, "toPandas"):
        return rows.toPandas()
    return pd.DataFrame(list(rows))


def epoch_ms(values: pd.Series) -> pd.Series:
    """Timestamps (ISO strings, naive UTC or aware datetimes) as epoch ms; NaN if unreadable."""
    ts = pd.to_datetime(values, utc=True, errors="coerce", format="ISO8601")
    return (ts - pd.Timestamp(0, tz="UTC")) // pd.Timedelta(milliseconds=1)


def view(name: str, rows: Rows) -> pd.DataFrame:
    """A view's rows plus the derived columns of its ``*_views.<name>`` suite."""
    spec = VIEWS[name]
    df = as_pandas(rows).copy()
    for field in spec.time_fields:  # none in a view of the current state
        if field in df.columns:
            # One type whatever the source (ISO strings, Spark's naive UTC, Postgres' aware),
            # so comparisons and Data Docs read the same; unreadable values become NaT.
            df[field] = pd.to_datetime(df[field], utc=True, errors="coerce", format="ISO8601")
    if spec.window_ms is not None and _has(df.columns, *spec.time_fields):
        start, end = spec.time_fields
        start_ms, end_ms = epoch_ms(df[start]), epoch_ms(df[end])
        # A tumbling window starts on its own boundary, a hopping one on every hop.
        df[s.DQ_WINDOW_OFFSET] = start_ms % (spec.hop_ms or spec.window_ms)
        df[s.DQ_WINDOW_LENGTH] = end_ms - start_ms
    if name == "search_ctr" and _has(df.columns, "ctr", "clicks", "searches"):
        searches = pd.to_numeric(df["searches"], errors="coerce")
        clicks = pd.to_numeric(df["clicks"], errors="coerce")
        expected = clicks / searches.where(searches != 0)
        df[s.DQ_CTR_ERROR] = (pd.to_numeric(df["ctr"], errors="coerce") - expected).abs()
    if name == "search_conversions" and _has(
        df.columns, "conversion_rate", "converted", "searches"
    ):
        searches = pd.to_numeric(df["searches"], errors="coerce")
        converted = pd.to_numeric(df["converted"], errors="coerce")
        expected = converted / searches.where(searches != 0)
        rate = pd.to_numeric(df["conversion_rate"], errors="coerce")
        df[s.DQ_CONVERSION_RATE_ERROR] = (rate - expected).abs()
    return df


def reconciliation(table: Any) -> pd.DataFrame:
    """The reconciliation table plus the description of each unexplained window (else NULL):
    the failure reason then quotes the windows themselves."""
    df = as_pandas(table).copy()
    if _has(df.columns, "cause", "window"):
        df[s.DQ_UNEXPLAINED] = df["window"].where(df["cause"] == s.UNEXPLAINED, None)
    return df
