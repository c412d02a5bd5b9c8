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

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from core.catalog import UNKNOWN_SEGMENT, VIEWS
from core.views.partials import PartialAggregate, concat_of
from core.views.windows import WINDOW_START_MS, placed, window_columns, window_start_ms

SPEC = VIEWS["revenue_by_segment"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms

ORDER = dt.Struct({"event_id": "string", "event_ts": "int64", "amount_cents": "int64"})
VERSION = dt.Struct({"ts": "int64", "partition": "int32", "offset": "int64", "segment": "string"})

_merge_values = concat_of("orders", "versions")


def _partial(events: ir.Table, profiles: ir.Table) -> ir.Table:
    orders = placed(events.filter(events.type == "order"))
    orders = orders.select(
        user_id=orders.user_id,
        orders=ibis.array(
            [
                ibis.struct(
                    {
                        "event_id": orders.event_id,
                        "event_ts": orders.event_ts,
                        "amount_cents": orders.amount_cents,
                    }
                )
            ]
        ),
        versions=ibis.literal([], type=dt.Array(VERSION)),
    )
    versions = profiles.select(
        user_id=profiles.user_id,
        orders=ibis.literal([], type=dt.Array(ORDER)),
        versions=ibis.array(
            [
                ibis.struct(
                    {
                        "ts": profiles.updated_ts,
                        "partition": profiles.partition,
                        "offset": profiles.offset,
                        "segment": profiles.segment,
                    }
                )
            ]
        ),
    )
    facts = orders.union(versions)
    return facts.group_by("user_id").agg(**_merge_values(facts))


def _contributions(partial: ir.Table) -> ir.Table:
    orders = partial.select(user_id=partial.user_id, order=partial.orders.unnest())
    orders = orders.select(
        user_id=orders.user_id,
        order_id=orders.order.event_id,
        order_ts=orders.order.event_ts,
        amount=orders.order.amount_cents,
    )
    versions = partial.select(version_user=partial.user_id, version=partial.versions.unnest())
    versions = versions.select(
        version_user=versions.version_user,
        version_ts=versions.version.ts,
        version_partition=versions.version.partition,
        version_offset=versions.version.offset,
        segment=versions.version.segment,
    )
    candidates = orders.left_join(
        versions,
        (orders.user_id == versions.version_user) & (versions.version_ts <= orders.order_ts),
    )
    # The version in force: the greatest updated_ts, the later in the log on a tie.
    latest_first = ibis.window(
        group_by=[candidates.user_id, candidates.order_id],
        order_by=[
            ibis.desc(candidates.version_ts),
            ibis.desc(candidates.version_partition),
            ibis.desc(candidates.version_offset),
        ],
    )
    ranked = candidates.mutate(_rank=ibis.row_number().over(latest_first))
    in_force = ranked.filter(ranked._rank == 0)
    return in_force.select(
        segment=in_force.segment.fill_null(UNKNOWN_SEGMENT),  # none, or a tombstone
        **{WINDOW_START_MS: window_start_ms(in_force.order_ts, SIZE)},
        revenue_cents=in_force.amount,
    )


def _finish_totals(totals: ir.Table) -> ir.Table:
    return totals.select(
        segment=totals.segment, **window_columns(totals, SIZE), revenue_cents=totals.revenue_cents
    )


PARTIAL = PartialAggregate(
    view="revenue_by_segment",
    key=("user_id",),
    schema=ibis.schema(
        {"user_id": "string", "orders": dt.Array(ORDER), "versions": dt.Array(VERSION)}
    ),
    partial=_partial,
    merge_values=_merge_values,
    total_key=("segment", WINDOW_START_MS),
    counters=("revenue_cents",),
    contributions=_contributions,
    finish_totals=_finish_totals,
)
