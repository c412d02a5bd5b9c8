"""The ``revenue_by_segment`` view: per segment (as of the order) and 1-hour window, revenue.

The segment of an order is an as-of join on event time: of the user's profile versions and
tombstones with ``updated_ts <= order event_ts``, the greatest ``updated_ts`` wins, the later in
the log (greater (partition, offset)) on a tie. No such version, or a tombstone, gives
``core.catalog.UNKNOWN_SEGMENT``.

Partial: per user, the orders and the profile history, merged by concatenation: an order
looks up its user's history, and a new profile version re-attributes its user's later orders.
Each order contributes its amount to the segment in force at its ``event_ts``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import UNKNOWN_SEGMENT, VIEWS
from core.views.partials import PartialAggregate, concat_of
from core.views.windows import WINDOW_START_MS, placed, window_columns, window_start_ms

SPEC = VIEWS["revenue_by_segment"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms

ORDER = "struct<event_id: string, event_ts: bigint, amount_cents: bigint>"
# Field order is the tie-break order: the greatest updated_ts, then the later in the log.
VERSION = "struct<ts: bigint, partition: int, offset: bigint, segment: string>"

_merge_values = concat_of("orders", "versions")


def _partial(events: DataFrame, profiles: DataFrame | None) -> DataFrame:
    orders = placed(events.where(F.col("type") == "order")).select(
        "user_id",
        F.array(
            F.struct(
                "event_id", "event_ts", F.col("amount_cents").cast("long").alias("amount_cents")
            )
        )
        .cast(f"array<{ORDER}>")
        .alias("orders"),
        F.array().cast(f"array<{VERSION}>").alias("versions"),
    )
    facts = orders
    if profiles is not None:
        versions = profiles.select(
            "user_id",
            F.array().cast(f"array<{ORDER}>").alias("orders"),
            F.array(
                F.struct(
                    F.col("updated_ts").alias("ts"),
                    F.col("partition").cast("int").alias("partition"),
                    F.col("offset").cast("long").alias("offset"),
                    "segment",
                )
            )
            .cast(f"array<{VERSION}>")
            .alias("versions"),
        )
        facts = facts.unionByName(versions)
    return facts.groupBy("user_id").agg(*_merge_values())


def _contributions(partial: DataFrame) -> DataFrame:
    order = F.col("_order")
    in_force = F.array_max(F.filter("versions", lambda v: v["ts"] <= order["event_ts"]))
    return partial.select("versions", F.explode("orders").alias("_order")).select(
        F.coalesce(in_force["segment"], F.lit(UNKNOWN_SEGMENT)).alias("segment"),
        window_start_ms(order["event_ts"], SIZE).alias(WINDOW_START_MS),
        order["amount_cents"].alias("revenue_cents"),
    )


def _finish_totals(totals: DataFrame) -> DataFrame:
    return totals.select("segment", *window_columns(SIZE), "revenue_cents").select(*SPEC.columns)


PARTIAL = PartialAggregate(
    view="revenue_by_segment",
    key=("user_id",),
    schema=f"user_id string, orders array<{ORDER}>, versions array<{VERSION}>",
    partial=_partial,
    merge_values=_merge_values,
    total_key=("segment", WINDOW_START_MS),
    counters=("revenue_cents",),
    contributions=_contributions,
    finish_totals=_finish_totals,
)


def revenue_by_segment(events: DataFrame, profiles: DataFrame) -> DataFrame:
    """``segment, window_start, window_end, revenue_cents`` from valid, deduplicated events and
    profile versions (``core.ingestion.parse_profiles``: user_id, segment, updated_ts,
    partition, offset)."""
    return PARTIAL.finish(PARTIAL.partial(events, profiles))
