"""The ``segment_totals`` view: per segment, the users whose *current* profile places them
there, and their total revenue (a table-table join, maintained as both tables change).

Two tables meet here: the users' activity (from ``events``) and their profiles (the
``profiles`` log, a change-data-capture stream of a user table). A user's current segment is
their last record in the log, the one compaction keeps, so a replay after compaction rebuilds
this view exactly (unlike ``revenue_by_segment``'s as-of join).

Partial: per user, the count of valid events, the revenue of their orders, and the latest
profile record seen with its offset (a tombstone as ``unknown``); merged by summing the
counters and keeping the record with the greater offset (a user's records share a key, so a
partition, where the offset orders them; keeping the greater is idempotent, so a profile
record read on both sides of Lambda's cutoff counts once). A user with at least one event
contributes one user and their revenue to their current segment, so a profile change moves
all of the user's counts at once: the stream updates the view by the difference of that user's
contributions before and after. Lambda merges its two sides per user, before the join, at the
hand-off (``speed_layer``): a change after the cutoff moves the batch side's revenue too.
"""

from __future__ import annotations

import ibis
import ibis.expr.types as ir

from core.catalog import UNKNOWN_SEGMENT
from core.views.partials import PartialAggregate
from core.views.windows import placed

SCHEMA = ibis.schema(
    {
        "user_id": "string",
        "events": "int64",
        "revenue_cents": "int64",
        "profile_offset": "int64",  # NULL: no profile record seen
        "segment": "string",  # the latest record's; a tombstone's is UNKNOWN_SEGMENT
    }
)


def _merge_values(both: ir.Table) -> dict[str, ir.Value]:
    return {
        "events": both.events.sum().cast("int64"),
        "revenue_cents": both.revenue_cents.sum().cast("int64"),
        "profile_offset": both.profile_offset.max(),
        "segment": both.segment.argmax(both.profile_offset),
    }


def _partial(events: ir.Table, profiles: ir.Table) -> ir.Table:
    kept = placed(events)
    activity = kept.select(
        user_id=kept.user_id,
        events=ibis.literal(1, "int64"),
        revenue_cents=ibis.ifelse(kept.type == "order", kept.amount_cents, 0).cast("int64"),
        profile_offset=ibis.null("int64"),
        segment=ibis.null("string"),
    )
    records = profiles.select(
        user_id=profiles.user_id,
        events=ibis.literal(0, "int64"),
        revenue_cents=ibis.literal(0, "int64"),
        profile_offset=profiles.offset,
        segment=profiles.segment.fill_null(UNKNOWN_SEGMENT),  # a tombstone
    )
    facts = activity.union(records)
    return facts.group_by("user_id").agg(**_merge_values(facts))


def _contributions(partial: ir.Table) -> ir.Table:
    active = partial.filter(partial.events > 0)
    return active.select(
        segment=active.segment.fill_null(UNKNOWN_SEGMENT),  # no profile record
        users=ibis.literal(1, "int64"),
        revenue_cents=active.revenue_cents,
    )


PARTIAL = PartialAggregate(
    view="segment_totals",
    key=("user_id",),
    schema=SCHEMA,
    partial=_partial,
    merge_values=_merge_values,
    total_key=("segment",),
    counters=("users", "revenue_cents"),
    contributions=_contributions,
    finish_totals=lambda totals: totals.select("segment", "users", "revenue_cents"),
)
