"""The views' inputs as unbound Ibis tables: what every view query reads, by name.

A query built over these tables is compiled once per engine (``core.views.query``) and then
given the actual rows: Spark DataFrames in the batch layer, Arrow tables in a stream's
micro-batch. Input names start with ``in_`` so that no column shares one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import ibis
import ibis.expr.types as ir
import pyarrow as pa

EVENTS: Final = ibis.schema(
    {
        "event_id": "string",
        "type": "string",
        "user_id": "string",
        "page": "string",
        "query": "string",
        "search_id": "string",
        "amount_cents": "int64",
        "event_ts": "int64",
        "received_ts": "int64",  # these two: the logic versions' clock filter
        "sent_ts": "int64",
        "partition": "int32",  # the log position: which copy of a duplicate comes first
        "offset": "int64",
    }
)
"""Valid, deduplicated events as every view and logic version reads them (``event_ts`` in
epoch ms, NULL when it overflowed; see ``core.ingestion``)."""

PROFILES: Final = ibis.schema(
    {
        "user_id": "string",
        "segment": "string",  # NULL: a tombstone
        "updated_ts": "int64",
        "partition": "int32",
        "offset": "int64",
    }
)
"""Profile versions and tombstones with their log position (``core.ingestion.parse_profiles``)."""

WATERMARKS: Final = ibis.schema({"partition": "int32", "watermark_ms": "int64"})
"""Per partition of ``events``, the event time before which an event is late
(``core.event_clock.EventClocks.threshold``): what bounds a pattern's state."""


def watermarks_table(watermarks: Mapping[int, int | None]) -> pa.Table:
    """``WATERMARKS``' rows from ``core.event_clock.EventClocks.thresholds``."""
    rows = [{"partition": p, "watermark_ms": ms} for p, ms in watermarks.items()]
    return pa.Table.from_pylist(rows, schema=WATERMARKS.to_pyarrow())


VIEW_INPUT_COLUMNS: Final[tuple[str, ...]] = tuple(EVENTS.names)
"""The event columns a path hands to the views (it selects these first)."""


def table(name: str, schema: ibis.Schema | dict[str, str]) -> ir.Table:
    """An unbound input table ``in_<name>``."""
    return ibis.table(schema, name=f"in_{name}")


def events() -> ir.Table:
    return table("events", EVENTS)


def profiles() -> ir.Table:
    return table("profiles", PROFILES)
