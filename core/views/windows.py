"""Tumbling windows on ``event_ts``, the one way every view places an event in time.

Windows are half-open ``[start, start + size)`` in UTC, computed on the integer milliseconds of
``event_ts`` (``core.times.window_start``: ``ts - ts mod size``, floor modulo), so an event at
exactly a window's end belongs to the next window and no float ever touches a timestamp.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

WINDOW_START_MS = "_window_start_ms"
"""The temporary column holding a row's window start in epoch ms."""


def placed(events: DataFrame) -> DataFrame:
    """The events that have a place in time (``event_time`` is NULL only when ``event_ts`` is
    outside the years 1-9999 or overflowed; see ``core.ingestion``)."""
    return events.where(F.col("event_time").isNotNull())


def window_start_ms(ts_ms: Column, size_ms: int) -> Column:
    """Start (epoch ms) of the ``size_ms`` tumbling window holding ``ts_ms``."""
    return ts_ms - F.pmod(ts_ms, F.lit(size_ms))


def with_window(events: DataFrame, size_ms: int) -> DataFrame:
    """``events`` that have a place in time, plus ``WINDOW_START_MS`` of their ``event_ts``."""
    return placed(events).withColumn(WINDOW_START_MS, window_start_ms(F.col("event_ts"), size_ms))


def window_columns(size_ms: int) -> list[Column]:
    """``window_start`` and ``window_end`` (UTC timestamps) from ``WINDOW_START_MS``."""
    start = F.col(WINDOW_START_MS)
    return [
        F.timestamp_millis(start).alias("window_start"),
        F.timestamp_millis(start + F.lit(size_ms)).alias("window_end"),
    ]
