"""Mergeable partial aggregates: each view defined once, and made incremental.

A view is three functions (the "+" of ``Batch(D_old) + Stream(D_new) = Batch(D_all)`` made
explicit, as Summingbird did with Algebird's monoids):

- ``partial(events, profiles)``: a table keyed by ``key``, the facts a new event looks up
  (a counter per page and minute, the users seen in an hour, a search and its clicks, a
  user's orders and profile history, a user's sessions);
- ``merge(a, b)``: two partials into one, associative and commutative;
- ``finish(partial)``: the view's rows.

with the law ``finish(merge(partial(A), partial(B))) == finish(partial(A + B))`` for disjoint
sets of valid, deduplicated events A and B (tests/unit/test_partial_laws.py checks it on
random workloads, on both engines). The batch layer computes ``finish(partial(all))`` on
Spark; the speed layer and the Kappa job merge each micro-batch's partial into keyed state on
DuckDB (``core.views.query``: one logic, compiled for each engine).

Additive views (every view but ``sessions``) finish in two steps: each partial row
*contributes* counters to one or more view rows (``contributions``), and a view row is the sum
of its contributions (``totals``) dressed as the view (``finish_totals``). A stream then
updates a view row by the difference of the contributions of the partial rows it touched,
before and after the merge: the work follows the touched keys, never the history. ``sessions``
is not additive: its partial rows are the sessions themselves, replaced per user.

Each aggregate also says what a new event or profile version invalidates: the ``key`` of its
partial. A stream looks up exactly those keys' state, and a view row changes only through the
contributions of the keys it touched (``delta``), so the engine holds no view knowledge. A
partial whose finish joins two kinds of its rows (``search_conversions``: a search's row with
its searcher's orders) names the column they meet on (``link``): a stream then looks up the
rows linked to the touched ones too, and derives the contributions of them all.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import ibis
import ibis.expr.types as ir

import core.views.tables as tables
from core.catalog import MATCH_COLUMNS, VIEWS
from core.views.query import Query

ROWS = "_rows"
"""In totals: how many contributions a view row has; a row with none is no row at all."""

SIGN = "_sign"

EXPIRES = "expires_ms"
"""``PartialAggregate.expires_query``'s column: a row's ``expires``."""

Partial = Callable[[ir.Table, ir.Table], ir.Table]
"""(events, profiles) -> partial."""

MergeValues = Callable[[ir.Table], dict[str, ir.Value]]
"""A union of partials (grouped by ``key``) -> its value columns' aggregations."""


@dataclass(frozen=True)
class PartialAggregate:
    """One view as a mergeable partial aggregate (see the module docstring)."""

    view: str
    key: tuple[str, ...]
    """The partial's key: what a new event, or a profile version, looks up in the state."""
    schema: ibis.Schema
    """The partial's columns (the state store keeps its rows)."""
    partial: Partial
    merge_values: MergeValues
    total_key: tuple[str, ...] = ()
    """Additive views: the view row a contribution goes to (its keys and window start)."""
    counters: tuple[str, ...] = ()
    contributions: Callable[[ir.Table], ir.Table] | None = None
    """Additive views: partial rows -> ``total_key`` + ``counters``, one row per contribution."""
    finish_totals: Callable[[ir.Table], ir.Table] | None = None
    """Additive views: summed counters per ``total_key`` -> the view's rows."""
    merge_rows: Callable[[ir.Table], ir.Table] | None = None
    """Non-additive views: a union of partial rows -> merged partial rows (several per key)."""
    matches: Callable[[ir.Table], ir.Table] | None = None
    """A pattern's view: partial rows -> its complex events (``core.catalog.MATCH_COLUMNS``),
    each a function of its key's row alone, so a stream replaces the touched keys' matches."""
    expire: Callable[[ir.Table, ir.Table], ir.Table] | None = None
    """A state bounded by the watermark: (partial, watermarks per partition) -> the partial
    without the facts no later event can still change (``tables.WATERMARKS``). Applied to the
    state a stream writes back only: the expired facts' contributions are final."""
    expires: Callable[[ir.Table], ir.IntegerValue] | None = None
    """With ``expire``: a partial row -> the event time past which the least watermark leaves
    ``expire`` nothing of the row (its facts' bounds, the latest of them). A stream keeps it
    beside the row's key and deletes the rows it has passed, touched or not: what bounds the
    state of keys no later event touches (a search no one clicks)."""
    link: str | None = None
    """A partial whose finish joins its rows (a table-table join within the partial): the
    column on which they meet. A row's contributions and matches depend on the rows sharing
    its value of it (none when NULL) and on no other, so a stream re-derives those of every
    stored row linked to a row it touches, not only the touched keys'."""

    def __post_init__(self) -> None:
        if (self.expire is None) != (self.expires is None):
            raise ValueError(f"{self.view}: a bounded state needs both expire and expires")

    @property
    def additive(self) -> bool:
        return self.contributions is not None

    @cached_property
    def is_set_of_facts(self) -> bool:
        """A partial with no values, merged by union (the users seen in an hour)."""
        return self.merge_rows is None and not self.merge_values(tables.table("both", self.schema))

    # -- the algebra, on Ibis tables --------------------------------------------------------

    def merge(self, a: ir.Table, b: ir.Table) -> ir.Table:
        both = a.select(*self.schema.names).union(b.select(*self.schema.names))
        if self.merge_rows is not None:
            return self.merge_rows(both)
        if self.is_set_of_facts:  # the union
            return both.select(*self.key).distinct()
        values = self.merge_values(both)
        return both.group_by(list(self.key)).agg(**values).select(*self.schema.names)

    def totals(self, partial: ir.Table) -> ir.Table:
        """Summed contributions per view row, with their number (``ROWS``)."""
        assert self.contributions is not None
        contributions = self.contributions(partial)
        return contributions.group_by(list(self.total_key)).agg(
            **{c: contributions[c].sum().cast("int64") for c in self.counters},
            **{ROWS: contributions.count().cast("int64")},
        )

    def delta(self, before: ir.Table, after: ir.Table) -> ir.Table:
        """What the view rows gain when the touched partial rows go from `before` to `after`:
        per ``total_key``, the counters' and ``ROWS``' differences (rows with no change left
        out)."""
        assert self.contributions is not None
        signed = (
            self.contributions(after)
            .mutate(**{SIGN: ibis.literal(1, "int64")})
            .union(self.contributions(before).mutate(**{SIGN: ibis.literal(-1, "int64")}))
        )
        sums = {c: (signed[c] * signed[SIGN]).sum().cast("int64") for c in self.counters}
        grouped = signed.group_by(list(self.total_key)).agg(
            **sums, **{ROWS: signed[SIGN].sum().cast("int64")}
        )
        changed = ibis.literal(False)
        for column in (*self.counters, ROWS):
            changed = changed | (grouped[column] != 0)
        return grouped.filter(changed)

    def add_totals(self, totals: ir.Table, delta: ir.Table) -> ir.Table:
        """Totals plus a delta, per ``total_key`` (a row whose ``ROWS`` falls to 0 is gone)."""
        columns = (*self.total_key, *self.counters, ROWS)
        both = totals.select(*columns).union(delta.select(*columns))
        return both.group_by(list(self.total_key)).agg(
            **{c: both[c].sum().cast("int64") for c in (*self.counters, ROWS)}
        )

    def finish(self, partial: ir.Table) -> ir.Table:
        """The view's rows from a partial (time fields in epoch ms)."""
        if self.merge_rows is not None:
            return partial.select(*VIEWS[self.view].columns)
        assert self.finish_totals is not None
        return self.finish_totals(self.totals(partial)).select(*VIEWS[self.view].columns)

    # -- the same, compiled once per engine over named inputs --------------------------------

    @cached_property
    def totals_schema(self) -> ibis.Schema:
        """The columns of a view's totals: its total key, its counters and ``ROWS``."""
        return self.totals(tables.table("partial", self.schema)).schema()

    @cached_property
    def partial_query(self) -> Query:
        """``in_events``, ``in_profiles`` -> the partial."""
        expr = self.partial(tables.events(), tables.profiles()).select(*self.schema.names)
        return Query(f"{self.view}.partial", expr.cast(self.schema))

    @cached_property
    def view_query(self) -> Query:
        """``in_events``, ``in_profiles`` -> the view's rows: ``finish(partial(events))``."""
        return Query(f"{self.view}.view", self.finish(self.partial_query.expr))

    @cached_property
    def merge_query(self) -> Query:
        """``in_before``, ``in_fresh`` (partials) -> their merge."""
        before = tables.table("before", self.schema)
        fresh = tables.table("fresh", self.schema)
        return Query(f"{self.view}.merge", self.merge(before, fresh).cast(self.schema))

    @cached_property
    def changed_query(self) -> Query | None:
        """``in_before``, ``in_after`` (the touched keys' state before and after a merge) ->
        the rows the state does not hold yet, which are all a stream writes back. Only a set
        of facts keeps rows unchanged: a fact seen before is seen again (a user's next event
        in the hour), and rewriting it would cost the store an update for nothing. Any other
        partial changes at every key a new event touches (a counter grows, a fact is added:
        the facts of disjoint events are disjoint), so there this is None: all of ``after``."""
        if not self.is_set_of_facts:
            return None
        before = tables.table("before", self.schema)
        after = tables.table("after", self.schema)
        return Query(f"{self.view}.changed", after.difference(before))

    @cached_property
    def totals_query(self) -> Query:
        """``in_partial`` -> its totals."""
        expr = self.totals(tables.table("partial", self.schema))
        return Query(f"{self.view}.totals", expr)

    @cached_property
    def delta_query(self) -> Query:
        """``in_before``, ``in_after`` (partials) -> the delta of their contributions."""
        before = tables.table("before", self.schema)
        after = tables.table("after", self.schema)
        return Query(f"{self.view}.delta", self.delta(before, after))

    @cached_property
    def add_totals_query(self) -> Query:
        """``in_totals``, ``in_delta`` -> the new totals."""
        totals = tables.table("totals", self.totals_schema)
        delta = tables.table("delta", self.totals_schema)
        return Query(f"{self.view}.add_totals", self.add_totals(totals, delta))

    @cached_property
    def matches_query(self) -> Query | None:
        """``in_partial`` -> its complex events, or None for a view with none."""
        if self.matches is None:
            return None
        return Query(f"{self.view}.matches", self.matches(tables.table("partial", self.schema)))

    @cached_property
    def matches_view_query(self) -> Query | None:
        """``in_events``, ``in_profiles`` -> the complex events of all of them:
        ``matches(partial(events))`` (the batch's), or None for a view with none."""
        if self.matches is None:
            return None
        expr = self.matches(self.partial_query.expr).select(*MATCH_COLUMNS)
        return Query(f"{self.view}.matches_view", expr)

    @cached_property
    def expire_query(self) -> Query | None:
        """``in_partial``, ``in_watermarks`` -> the partial left once the watermarks passed,
        or None for a view whose state is not bounded so."""
        if self.expire is None:
            return None
        partial = tables.table("partial", self.schema)
        watermarks = tables.table("watermarks", tables.WATERMARKS)
        return Query(f"{self.view}.expire", self.expire(partial, watermarks).cast(self.schema))

    @cached_property
    def expires_query(self) -> Query | None:
        """``in_partial`` -> its rows with their ``EXPIRES`` (``expires``), or None for a view
        whose state is not bounded by the watermark."""
        if self.expires is None:
            return None
        partial = tables.table("partial", self.schema)
        expires = self.expires(partial).cast("int64")
        return Query(f"{self.view}.expires", partial.mutate(**{EXPIRES: expires}))

    @cached_property
    def finish_totals_query(self) -> Query:
        """``in_totals`` -> the view's rows."""
        assert self.finish_totals is not None
        totals = tables.table("totals", self.totals_schema)
        expr = self.finish_totals(totals).select(*VIEWS[self.view].columns)
        return Query(f"{self.view}.finish_totals", expr)


def sum_of(*columns: str) -> MergeValues:
    """Merge by summing counters."""
    return lambda both: {c: both[c].sum().cast("int64") for c in columns}


def concat_of(*columns: str) -> MergeValues:
    """Merge arrays of facts by concatenation (the facts of disjoint event sets are disjoint)."""
    return lambda both: {c: both[c].collect().flatten() for c in columns}


def no_values(_both: ir.Table) -> dict[str, ir.Value]:
    """A partial that is a set of keys: merged by union."""
    return {}
