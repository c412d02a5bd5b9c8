"""Mergeable partial aggregates: each view defined once, and made incremental.

A view is three functions (the "+" of ``Batch(D_old) + Stream(D_new) = Batch(D_all)`` made
explicit, as Summingbird did with Algebird's monoids):

- ``partial(events, profiles)``: a DataFrame keyed by ``key``, the facts a new event looks up
  (a counter per page and minute, the users seen in an hour, a search and its clicks, a
  user's orders and profile history, a user's sessions);
- ``merge(a, b)``: two partials into one, associative and commutative;
- ``finish(partial)``: the view's rows.

with the law ``finish(merge(partial(A), partial(B))) == finish(partial(A + B))`` for disjoint
sets of valid, deduplicated events A and B (tests/unit/test_partial_laws.py checks it on
random workloads). The batch layer computes ``finish(partial(all))``; the speed layer and the
Kappa job merge each micro-batch's partial into keyed state.

Additive views (every view but ``sessions``) finish in two steps: each partial row
*contributes* counters to one or more view rows (``contributions``), and a view row is the sum
of its contributions (``totals``) dressed as the view (``finish_totals``). A stream then
updates a view row by the difference of the contributions of the partial rows it touched,
before and after the merge: the work follows the touched keys, never the history. ``sessions``
is not additive: its partial rows are the sessions themselves, replaced per user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

ROWS = "_rows"
"""In totals: how many contributions a view row has; a row with none is no row at all."""

SIGN = "_sign"

Partial = Callable[[DataFrame, "DataFrame | None"], DataFrame]
"""(events, profiles) -> partial; views that ignore profiles accept None."""


@dataclass(frozen=True)
class PartialAggregate:
    """One view as a mergeable partial aggregate (see the module docstring)."""

    view: str
    key: tuple[str, ...]
    """The partial's key: what a new event, or a profile version, looks up in the state."""
    schema: str
    """The partial's columns as a Spark DDL string (the state store keeps rows as JSON)."""
    partial: Partial
    merge_values: Callable[[], list[Column]]
    """The value columns' aggregations over a union of partials grouped by ``key``."""
    total_key: tuple[str, ...] = ()
    """Additive views: the view row a contribution goes to (its keys and window start)."""
    counters: tuple[str, ...] = ()
    contributions: Callable[[DataFrame], DataFrame] | None = None
    """Additive views: partial rows -> ``total_key`` + ``counters``, one row per contribution."""
    finish_totals: Callable[[DataFrame], DataFrame] | None = None
    """Additive views: summed counters per ``total_key`` -> the view's rows."""
    merge_rows: Callable[[DataFrame], DataFrame] | None = None
    """Non-additive views: a union of partial rows -> merged partial rows (several per key)."""

    @property
    def additive(self) -> bool:
        return self.contributions is not None

    def merge(self, a: DataFrame, b: DataFrame) -> DataFrame:
        both = a.unionByName(b)
        if self.merge_rows is not None:
            return self.merge_rows(both)
        values = self.merge_values()
        if not values:  # a set of facts: the union
            return both.select(*self.key).distinct()
        return both.groupBy(*self.key).agg(*values)

    def totals(self, partial: DataFrame) -> DataFrame:
        """Summed contributions per view row, with their number (``ROWS``)."""
        assert self.contributions is not None
        return (
            self.contributions(partial)
            .groupBy(*self.total_key)
            .agg(
                *(F.sum(c).cast("long").alias(c) for c in self.counters),
                F.count(F.lit(1)).alias(ROWS),
            )
        )

    def delta(self, before: DataFrame, after: DataFrame) -> DataFrame:
        """What the view rows gain when the touched partial rows go from `before` to `after`:
        per ``total_key``, the counters' and ``ROWS``' differences (rows with no change left
        out)."""
        assert self.contributions is not None
        signed = (
            self.contributions(after)
            .withColumn(SIGN, F.lit(1))
            .unionByName(self.contributions(before).withColumn(SIGN, F.lit(-1)))
        )
        sums = [(F.sum(F.col(c) * F.col(SIGN))).cast("long").alias(c) for c in self.counters]
        changed = F.lit(False)
        for column in (*self.counters, ROWS):
            changed = changed | (F.col(column) != 0)
        return (
            signed.groupBy(*self.total_key)
            .agg(*sums, F.sum(SIGN).cast("long").alias(ROWS))
            .where(changed)
        )

    def add_totals(self, totals: DataFrame, delta: DataFrame) -> DataFrame:
        """Totals plus a delta, per ``total_key`` (a row whose ``ROWS`` falls to 0 is gone)."""
        sums = [F.sum(c).cast("long").alias(c) for c in (*self.counters, ROWS)]
        return totals.unionByName(delta).groupBy(*self.total_key).agg(*sums)

    def finish(self, partial: DataFrame) -> DataFrame:
        """The view's rows from a partial."""
        if self.merge_rows is not None:
            return partial
        assert self.finish_totals is not None
        return self.finish_totals(self.totals(partial))


def sum_of(*columns: str) -> Callable[[], list[Column]]:
    """Merge by summing counters."""
    return lambda: [F.sum(c).cast("long").alias(c) for c in columns]


def concat_of(*columns: str) -> Callable[[], list[Column]]:
    """Merge arrays of facts by concatenation (the facts of disjoint event sets are disjoint)."""
    return lambda: [F.flatten(F.collect_list(c)).alias(c) for c in columns]


def no_values() -> list[Column]:
    """A partial that is a set of keys: merged by union."""
    return []
