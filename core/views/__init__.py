"""The business logic of the eight views, once, as mergeable partial aggregates.

Each view is a ``core.views.partials.PartialAggregate`` (``PARTIALS``), written as Ibis
expressions and compiled for each engine (``core.views.query``): the batch layer computes
``finish(partial(all events))`` on Spark (``compute_view``); the speed layer and the Kappa job
merge the partial of each micro-batch's new events into keyed state on DuckDB
(``stream_engine``). Nothing here reads or writes anything; see ``core.ingestion`` for the way
from raw Kafka records to the valid, deduplicated events every view takes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Final

from core.catalog import MATCH_COLUMNS, MATCH_TIME_FIELDS, MATCH_VIEWS, VIEW_NAMES, VIEWS
from core.views import page_views as _page_views
from core.views import page_views_hopping as _page_views_hopping
from core.views import revenue_by_segment as _revenue
from core.views import search_conversions as _search_conversions
from core.views import search_ctr as _search_ctr
from core.views import segment_totals as _segment_totals
from core.views import sessions as _sessions
from core.views import unique_users as _unique_users
from core.views.partials import PartialAggregate
from core.views.query import Query, on_spark, timestamps_of, with_timestamps
from core.views.tables import VIEW_INPUT_COLUMNS

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

PARTIALS: Final[dict[str, PartialAggregate]] = {
    module.PARTIAL.view: module.PARTIAL
    for module in (
        _page_views,
        _unique_users,
        _search_ctr,
        _revenue,
        _sessions,
        _page_views_hopping,
        _segment_totals,
        _search_conversions,
    )
}
"""View name -> its partial aggregate, in catalogue order."""

assert tuple(PARTIALS) == VIEW_NAMES, "every catalogued view has one partial aggregate, in order"
assert tuple(name for name, a in PARTIALS.items() if a.matches is not None) == MATCH_VIEWS, (
    "the catalogue's views with matches are those whose partial emits them"
)


def compute_view(name: str, events: DataFrame, profiles: DataFrame) -> DataFrame:
    """One view by name, on Spark, from valid, deduplicated events (``VIEW_INPUT_COLUMNS``) and
    profile versions (``core.ingestion.PROFILE_COLUMNS``); time fields as timestamps."""
    try:
        aggregate = PARTIALS[name]
    except KeyError:
        raise KeyError(f"unknown view {name!r}; views: {', '.join(VIEW_NAMES)}") from None
    rows = on_spark(
        events.sparkSession, aggregate.view_query, in_events=events, in_profiles=profiles
    )
    return with_timestamps(rows, VIEWS[name])


def compute_partial(name: str, events: DataFrame, profiles: DataFrame) -> DataFrame:
    """One view's partial aggregate by name, on Spark, from the same inputs as
    ``compute_view`` (time fields in epoch ms, as the stream's state keeps them)."""
    return on_spark(
        events.sparkSession, PARTIALS[name].partial_query, in_events=events, in_profiles=profiles
    )


def compute_matches(name: str, events: DataFrame, profiles: DataFrame) -> DataFrame:
    """A pattern view's complex events (``core.catalog.MATCH_COLUMNS``), on Spark, from the
    same inputs as ``compute_view``; times as timestamps."""
    query = PARTIALS[name].matches_view_query
    if query is None:
        raise KeyError(f"view {name!r} has no matches; views with: {', '.join(MATCH_VIEWS)}")
    rows = on_spark(events.sparkSession, query, in_events=events, in_profiles=profiles)
    return timestamps_of(rows, MATCH_COLUMNS, MATCH_TIME_FIELDS)


def compute_all(events: DataFrame, profiles: DataFrame) -> dict[str, DataFrame]:
    """Every view (catalogue order), on Spark, as ``compute_view``."""
    return {name: compute_view(name, events, profiles) for name in PARTIALS}


def keep(events: DataFrame, logic: Query | None) -> DataFrame:
    """The events a logic version's query keeps (``core.views.logic_versions.logic_query``),
    on Spark; all of them when there is none."""
    if logic is None:
        return events
    return on_spark(events.sparkSession, logic, in_events=events.select(*VIEW_INPUT_COLUMNS))


__all__ = [
    "PARTIALS",
    "VIEW_INPUT_COLUMNS",
    "PartialAggregate",
    "compute_all",
    "compute_matches",
    "compute_partial",
    "compute_view",
    "keep",
]
