"""The ``search_conversions`` view: a search -> click -> order pattern (complex event processing).

Per query and 1-hour window of the search (CONTRACT section 3): ``searches``; ``clicked``, the
searches with a click on them, **by any user** (as ``search_ctr``), in ``[S, S + 30 min]``;
``converted``, those with an order by the **searcher** in ``[the earliest such click,
S + 60 min]``; and ``converted / searches``. Both bounds are closed; "earliest" is by
``(event_ts, partition, offset)``, a click being on its clicker's partition.

No one key is on all three events of a pattern: a click carries the clicker's user and the
search id, an order only its user. So the partial has two sides, each keyed by what its
events share (docs/design/search_conversions.md, "Two keyed states and a finish that joins
them"), kept as two kinds of rows of one table (``side``) so that every generic path (the
batch's partials, a replay's state, Lambda's hand-off, the laws) takes it as any partial:

- ``by_search`` (``side = 'search'``, keyed by the search id, as ``search_ctr``'s state): the
  searcher's ``user_id``, ``query`` and ``search_ts`` (NULL until the search arrives) and the
  clicks naming the search, whoever clicked;
- ``by_user`` (``side = 'user'``, keyed by the user): the user's orders (a user's orders share
  a partition, where the offset orders them).

``row_key`` is the side and its key in one string (``search:<id>``, ``user:<id>``: the store
keys a state by one string). Merge: the search's columns by ``max`` over NULLs, the facts'
arrays concatenated. The finish joins the sides on the searcher (``contributions``,
``matches``): a search's row with its user's row. So a row's contributions depend on the rows
sharing its ``user_id`` (``PartialAggregate.link``): a stream that touches a user's orders
re-derives the user's searches, and one that touches a search derives it with its user's
orders (an incremental table-table join, recomputed per touched search).

``expire`` bounds the state by the **least** watermark of all partitions: a cross-user click
comes on the clicker's partition, whose clock is not the search's, so a fact may leave only
when no partition can still deliver an event that changes a search it takes part in.
"""

from __future__ import annotations

import ibis
import ibis.expr.datatypes as dt
import ibis.expr.types as ir

from core.catalog import CLICK_WINDOW_MS, PATTERN_WINDOW_MS, VIEWS
from core.views.partials import PartialAggregate
from core.views.windows import WINDOW_START_MS, placed, window_columns, window_start_ms

SPEC = VIEWS["search_conversions"]
assert SPEC.window_ms is not None
SIZE = SPEC.window_ms

SEARCH_SIDE = "search"
"""``by_search`` rows: keyed by the search id."""
USER_SIDE = "user"
"""``by_user`` rows: keyed by the user."""

CLICK = dt.Struct({"event_id": "string", "ts": "int64", "partition": "int32", "offset": "int64"})
ORDER = dt.Struct({"event_id": "string", "ts": "int64", "offset": "int64"})

SCHEMA = ibis.schema(
    {
        "row_key": "string",  # "search:<search_id>" or "user:<user_id>"
        "side": "string",  # SEARCH_SIDE or USER_SIDE
        "search_id": "string",  # by_search; NULL on by_user
        "user_id": "string",  # by_search: the searcher (NULL until the search); by_user: the user
        "query": "string",  # by_search, with the search
        "search_ts": "int64",  # by_search, with the search
        "clicks": dt.Array(CLICK),  # by_search: any user's clicks naming the search
        "orders": dt.Array(ORDER),  # by_user: the user's orders
    }
)

LINK = "user_id"
"""The join of the finish: a search's row meets its searcher's row."""


def _merge_values(both: ir.Table) -> dict[str, ir.Value]:
    return {
        "side": both.side.max(),  # one side per key
        "search_id": both.search_id.max(),
        # One search per id: max picks the search's columns over its clicks' NULLs.
        "user_id": both.user_id.max(),
        "query": both.query.max(),
        "search_ts": both.search_ts.max(),
        "clicks": both.clicks.collect().flatten(),
        "orders": both.orders.collect().flatten(),
    }


def _row(
    side: str,
    key: ir.StringValue,
    *,
    search_id: ir.Value | None = None,
    user_id: ir.Value | None = None,
    query: ir.Value | None = None,
    search_ts: ir.Value | None = None,
    clicks: ir.Value | None = None,
    orders: ir.Value | None = None,
) -> dict[str, ir.Value]:
    """One partial row's columns, NULL or empty where `side` has none."""
    return {
        "row_key": ibis.literal(f"{side}:").concat(key),
        "side": ibis.literal(side),
        "search_id": search_id if search_id is not None else ibis.null("string"),
        "user_id": user_id if user_id is not None else ibis.null("string"),
        "query": query if query is not None else ibis.null("string"),
        "search_ts": search_ts if search_ts is not None else ibis.null("int64"),
        "clicks": clicks if clicks is not None else ibis.literal([], type=dt.Array(CLICK)),
        "orders": orders if orders is not None else ibis.literal([], type=dt.Array(ORDER)),
    }


def _partial(events: ir.Table, _profiles: ir.Table) -> ir.Table:
    kept = placed(events)
    s = kept.filter(kept.type == "search")
    searches = s.select(
        **_row(
            SEARCH_SIDE,
            s.event_id,
            search_id=s.event_id,
            user_id=s.user_id,
            query=s.query,
            search_ts=s.event_ts,
        )
    )
    c = kept.filter(kept.type == "click")
    click = ibis.struct(
        {"event_id": c.event_id, "ts": c.event_ts, "partition": c.partition, "offset": c.offset}
    )
    clicks = c.select(
        **_row(SEARCH_SIDE, c.search_id, search_id=c.search_id, clicks=ibis.array([click]))
    )
    o = kept.filter(kept.type == "order")
    order = ibis.struct({"event_id": o.event_id, "ts": o.event_ts, "offset": o.offset})
    orders = o.select(**_row(USER_SIDE, o.user_id, user_id=o.user_id, orders=ibis.array([order])))
    facts = searches.union(clicks).union(orders)
    return facts.group_by("row_key").agg(**_merge_values(facts))


def _earliest(table: ir.Table, group: str, *order_by: str) -> ir.Table:
    """Per `group`, the row first by `order_by` (a group whose left join found nothing keeps
    its one row, of NULLs on the right)."""
    first = ibis.window(group_by=[table[group]], order_by=[table[c] for c in order_by])
    ranked = table.mutate(_rank=ibis.row_number().over(first))
    return ranked.filter(ranked._rank == 0).drop("_rank")


def patterns(partial: ir.Table) -> ir.Table:
    """Each search with its match's click and order (NULL when none): ``search_id``,
    ``user_id`` (the searcher's), ``query``, ``search_ts``, ``click_id``, ``click_ts``,
    ``order_id``, ``order_ts``. A search's row meets its clicks within itself and its
    searcher's orders through the ``by_user`` row of the same ``user_id``."""
    rows = partial.filter((partial.side == SEARCH_SIDE) & partial.search_ts.notnull())
    searches = rows.select("search_id", "user_id", "query", "search_ts")
    c = rows.select(click_search=rows.search_id, c=rows.clicks.unnest())
    clicks = c.select(
        click_search=c.click_search,
        click_id=c.c.event_id,
        click_ts=c.c.ts,
        click_partition=c.c.partition,
        click_offset=c.c.offset,
    )
    users = partial.filter(partial.side == USER_SIDE)
    o = users.select(order_user=users.user_id, o=users.orders.unnest())
    orders = o.select(
        order_user=o.order_user, order_id=o.o.event_id, order_ts=o.o.ts, order_offset=o.o.offset
    )

    clicked = searches.left_join(
        clicks,
        (searches.search_id == clicks.click_search)
        & (clicks.click_ts >= searches.search_ts)
        & (clicks.click_ts <= searches.search_ts + CLICK_WINDOW_MS),
    )
    clicked = _earliest(clicked, "search_id", "click_ts", "click_partition", "click_offset")
    clicked = clicked.select("search_id", "user_id", "query", "search_ts", "click_id", "click_ts")
    converted = clicked.left_join(
        orders,
        (clicked.user_id == orders.order_user)
        & (orders.order_ts >= clicked.click_ts)
        & (orders.order_ts <= clicked.search_ts + PATTERN_WINDOW_MS),
    )
    converted = _earliest(converted, "search_id", "order_ts", "order_offset")
    return converted.select(
        "search_id",
        "user_id",
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
    times in epoch ms); ``user_id`` is the searcher's, ``click_id`` may be another user's."""
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
    """The partial without what no event that is not late can still change, with
    ``watermarks`` (``partition``, ``watermark_ms``: every partition of ``events``; a NULL
    watermark, a partition not read yet, holds everything) reduced to their least, ``M``:

    - a ``by_search`` row with its search once ``S + 60 min < M`` (its clicks with it: they
      concern that search alone), and from a row still waiting for its search the clicks with
      ``c + 60 min < M`` (the searches a click can count for are in ``[c - 30 min, c]``);
    - from a ``by_user`` row the orders with ``o + 60 min < M`` (an order concerns searches in
      ``[o - 60 min, o]``);
    - and the rows left with nothing. Every fact a search still held can use is as recent as
      the search, so it leaves no earlier than the search does."""
    least = watermarks.aggregate(
        mark_ms=ibis.ifelse(
            watermarks.watermark_ms.count() == watermarks.count(),
            watermarks.watermark_ms.min(),
            ibis.null("int64"),
        )
    )
    joined = partial.cross_join(least)
    mark = joined.mark_ms

    def live(ts: ir.IntegerValue) -> ir.BooleanValue:
        return mark.isnull() | (ts + PATTERN_WINDOW_MS >= mark)

    left = joined.select(
        *(name for name in SCHEMA.names if name not in ("clicks", "orders")),
        clicks=ibis.ifelse(
            joined.search_ts.isnull(), joined.clicks.filter(lambda c: live(c.ts)), joined.clicks
        ),
        orders=joined.orders.filter(lambda o: live(o.ts)),
        _search_live=joined.search_ts.isnull() | live(joined.search_ts),
    )
    kept = left.filter(
        left._search_live
        & (left.search_ts.notnull() | (left.clicks.length() + left.orders.length() > 0))
    )
    return kept.select(*SCHEMA.names)


def expires(partial: ir.Table) -> ir.IntegerValue:
    """The least watermark past which ``expire`` leaves nothing of a row: its search's bound
    (``S + 60 min``), or, on a row with no search, its latest fact's."""
    latest = ibis.greatest(
        partial.clicks.map(lambda c: c.ts).maxs(), partial.orders.map(lambda o: o.ts).maxs()
    )
    return partial.search_ts.coalesce(latest) + PATTERN_WINDOW_MS


PARTIAL = PartialAggregate(
    view="search_conversions",
    key=("row_key",),
    schema=SCHEMA,
    partial=_partial,
    merge_values=_merge_values,
    total_key=("query", WINDOW_START_MS),
    counters=("searches", "clicked", "converted"),
    contributions=_contributions,
    finish_totals=_finish_totals,
    matches=matches,
    expire=expire,
    expires=expires,
    link=LINK,
)
