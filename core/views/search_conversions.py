"""The ``search_conversions`` view: a search -> click -> order pattern (complex event processing).

Per query and 1-hour window of the search: ``searches``; ``clicked``, the searches with a click
on them by their user in ``[S, S + 30 min]``; ``converted``, those with, after the earliest such
click, an order by the user in ``[that click, S + 60 min]``; and ``converted / searches``. Both
bounds are closed. The pattern is the user's, as a CEP pattern keyed by user (see
docs/design/search_conversions.md): the key all three events share is the user, which is also
the log's key.

Partial: per user, the facts that may still take part in a pattern (the searches, the clicks,
the orders, each with its time and offset), merged by concatenation. The pattern is judged only
when contributions are computed, so a split anywhere (between a search and its click, the click
and the order, at Lambda's cutoff) loses nothing: the merge brings the user's facts together.
Each search contributes one search, and one click and one conversion when it has them; its
match (``matches``) names its earliest click in span and that click's earliest order, ties by
log order (a user's events share a partition, where the offset orders them).

``expire`` bounds the state: a fact leaves once its time plus 60 minutes is before its
partition's watermark, since every event that could still change a pattern it is part of is
then late. A stream applies it to the state it writes back, never between the two sides of a
delta: an expired search's contribution is final and stays in the totals.
"""

from __future__ import annotations

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from core.catalog import CLICK_WINDOW_MS, PATTERN_WINDOW_MS, VIEWS
from core.views.partials import PartialAggregate, concat_of
from core.views.windows import WINDOW_START_MS, placed, window_columns, window_start_ms

SPEC = VIEWS["search_conversions"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms

SEARCH = dt.Struct({"event_id": "string", "query": "string", "ts": "int64", "offset": "int64"})
CLICK = dt.Struct({"event_id": "string", "search_id": "string", "ts": "int64", "offset": "int64"})
ORDER = dt.Struct({"event_id": "string", "ts": "int64", "offset": "int64"})

SCHEMA = ibis.schema(
    {
        "user_id": "string",
        "partition": "int32",  # the user's partition of `events`: whose watermark expires it
        "searches": dt.Array(SEARCH),
        "clicks": dt.Array(CLICK),
        "orders": dt.Array(ORDER),
    }
)

FACTS = ("searches", "clicks", "orders")

_concat = concat_of(*FACTS)


def _merge_values(both: ir.Table) -> dict[str, ir.Value]:
    return {"partition": both.partition.min(), **_concat(both)}


def _facts(events: ir.Table, kind: str, fact: ir.Value) -> ir.Table:
    """Each event as a one-fact row of its user, in the array of its kind."""
    empty = {"searches": SEARCH, "clicks": CLICK, "orders": ORDER}
    return events.select(
        user_id=events.user_id,
        partition=events.partition,
        **{
            name: ibis.array([fact]) if name == kind else ibis.literal([], type=dt.Array(element))
            for name, element in empty.items()
        },
    )


def _partial(events: ir.Table, _profiles: ir.Table) -> ir.Table:
    kept = placed(events)
    searches = kept.filter(kept.type == "search")
    clicks = kept.filter(kept.type == "click")
    orders = kept.filter(kept.type == "order")
    facts = (
        _facts(
            searches,
            "searches",
            ibis.struct(
                {
                    "event_id": searches.event_id,
                    "query": searches.query,
                    "ts": searches.event_ts,
                    "offset": searches.offset,
                }
            ),
        )
        .union(
            _facts(
                clicks,
                "clicks",
                ibis.struct(
                    {
                        "event_id": clicks.event_id,
                        "search_id": clicks.search_id,
                        "ts": clicks.event_ts,
                        "offset": clicks.offset,
                    }
                ),
            )
        )
        .union(
            _facts(
                orders,
                "orders",
                ibis.struct(
                    {"event_id": orders.event_id, "ts": orders.event_ts, "offset": orders.offset}
                ),
            )
        )
    )
    return facts.group_by("user_id").agg(**_merge_values(facts))


def _earliest(table: ir.Table, group: list[str], ts: str, offset: str) -> ir.Table:
    """Per group, the row with the least ``(ts, offset)`` (a group with no candidate keeps its
    one row of NULLs from the left join)."""
    first = ibis.window(group_by=group, order_by=[table[ts], table[offset]])
    ranked = table.mutate(_rank=ibis.row_number().over(first))
    return ranked.filter(ranked._rank == 0).drop("_rank")


def patterns(partial: ir.Table) -> ir.Table:
    """Each search with its match's click and order (NULL when none): ``user_id``,
    ``search_id``, ``query``, ``search_ts``, ``click_id``, ``click_ts``, ``order_id``,
    ``order_ts``. Every join stays within a user's row, so a touched user's contributions
    depend on that user's row alone."""
    s = partial.select(user_id=partial.user_id, s=partial.searches.unnest())
    searches = s.select(
        user_id=s.user_id, search_id=s.s.event_id, query=s.s.query, search_ts=s.s.ts
    )
    c = partial.select(click_user=partial.user_id, c=partial.clicks.unnest())
    clicks = c.select(
        click_user=c.click_user,
        click_search=c.c.search_id,
        click_id=c.c.event_id,
        click_ts=c.c.ts,
        click_offset=c.c.offset,
    )
    o = partial.select(order_user=partial.user_id, o=partial.orders.unnest())
    orders = o.select(
        order_user=o.order_user, order_id=o.o.event_id, order_ts=o.o.ts, order_offset=o.o.offset
    )

    clicked = searches.left_join(
        clicks,
        (searches.user_id == clicks.click_user)
        & (searches.search_id == clicks.click_search)
        & (clicks.click_ts >= searches.search_ts)
        & (clicks.click_ts <= searches.search_ts + CLICK_WINDOW_MS),
    )
    clicked = _earliest(clicked, ["user_id", "search_id"], "click_ts", "click_offset")
    clicked = clicked.select("user_id", "search_id", "query", "search_ts", "click_id", "click_ts")
    converted = clicked.left_join(
        orders,
        (clicked.user_id == orders.order_user)
        & (orders.order_ts >= clicked.click_ts)
        & (orders.order_ts <= clicked.search_ts + PATTERN_WINDOW_MS),
    )
    converted = _earliest(converted, ["user_id", "search_id"], "order_ts", "order_offset")
    return converted.select(
        "user_id",
        "search_id",
        "query",
        "search_ts",
        "click_id",
        "click_ts",
        "order_id",
        "order_ts",
    )


def _contributions(partial: ir.Table) -> ir.Table:
    found = patterns(partial)
    return found.select(
        query=found.query,
        **{WINDOW_START_MS: window_start_ms(found.search_ts, SIZE)},
        searches=ibis.literal(1, "int64"),
        clicked=found.click_id.notnull().cast("int64"),
        converted=found.order_id.notnull().cast("int64"),
    )


def _finish_totals(totals: ir.Table) -> ir.Table:
    return totals.select(
        query=totals.query,
        **window_columns(totals, SIZE),
        searches=totals.searches,
        clicked=totals.clicked,
        converted=totals.converted,
        conversion_rate=totals.converted.cast("float64") / totals.searches.cast("float64"),
    )


def matches(partial: ir.Table) -> ir.Table:
    """The complex events: one per converted search (``core.catalog.MATCH_COLUMNS``, the
    times in epoch ms)."""
    found = patterns(partial)
    found = found.filter(found.order_id.notnull())
    start = window_start_ms(found.search_ts, SIZE)
    return found.select(
        query=found.query,
        window_start=start,
        window_end=start + SIZE,
        search_id=found.search_id,
        user_id=found.user_id,
        search_ts=found.search_ts,
        click_id=found.click_id,
        click_ts=found.click_ts,
        order_id=found.order_id,
        order_ts=found.order_ts,
    )


def expire(partial: ir.Table, watermarks: ir.Table) -> ir.Table:
    """The partial without the facts whose 60-minute bound is before their partition's
    watermark (``watermarks``: ``partition``, ``watermark_ms``; a partition without one keeps
    everything), and without the rows left with no fact."""
    marks = watermarks.select(mark_partition=watermarks.partition, mark_ms=watermarks.watermark_ms)
    joined = partial.left_join(marks, partial.partition == marks.mark_partition)
    mark = joined.mark_ms

    def kept(facts: ir.ArrayValue) -> ir.ArrayValue:
        return facts.filter(lambda f: mark.isnull() | (f.ts + PATTERN_WINDOW_MS >= mark))

    left = joined.select(
        user_id=joined.user_id,
        partition=joined.partition,
        **{name: kept(joined[name]) for name in FACTS},
    )
    return left.filter((left.searches.length() + left.clicks.length() + left.orders.length()) > 0)


PARTIAL = PartialAggregate(
    view="search_conversions",
    key=("user_id",),
    schema=SCHEMA,
    partial=_partial,
    merge_values=_merge_values,
    total_key=("query", WINDOW_START_MS),
    counters=("searches", "clicked", "converted"),
    contributions=_contributions,
    finish_totals=_finish_totals,
    matches=matches,
    expire=expire,
)
