"""The business logic of the five views, once, as mergeable partial aggregates.

Each view is a ``core.views.partials.PartialAggregate`` (``PARTIALS``): the batch layer computes
``finish(partial(all events))`` (``compute_view``); the speed layer and the Kappa job merge the
partial of each micro-batch's new events into keyed state (``stream_engine.engine``). Nothing
here creates a session, reads or writes anything, or collects; see ``core.ingestion`` for
the way from raw Kafka records to the valid, deduplicated events every view takes.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from pyspark.sql import DataFrame

from core.catalog import VIEW_NAMES
from core.views import page_views as _page_views
from core.views import revenue_by_segment as _revenue
from core.views import search_ctr as _search_ctr
from core.views import sessions as _sessions
from core.views import unique_users as _unique_users
from core.views.page_views import page_views
from core.views.partials import PartialAggregate
from core.views.revenue_by_segment import revenue_by_segment
from core.views.search_ctr import search_ctr
from core.views.sessions import event_intervals, merge_sessions, sessions
from core.views.unique_users import unique_users

VIEW_INPUT_COLUMNS: Final[tuple[str, ...]] = (
    "event_id",
    "type",
    "user_id",
    "page",
    "query",
    "search_id",
    "amount_cents",
    "event_ts",
    "event_time",
    "received_ts",  # these two: the logic versions' clock filter (core.views.logic_versions)
    "sent_ts",
    "partition",  # the log position: which copy of a duplicate comes first
    "offset",
)
"""All the views and the logic versions read of an event. A path that carries whole records
(the master dataset keeps the raw value, key and Kafka timestamp) selects these first."""

ViewFunction = Callable[[DataFrame, DataFrame], DataFrame]
"""``(events, profiles) -> view``: the registry's uniform signature."""

VIEW_FUNCTIONS: Final[dict[str, ViewFunction]] = {
    "page_views": lambda events, _profiles: page_views(events),
    "unique_users": lambda events, _profiles: unique_users(events),
    "search_ctr": lambda events, _profiles: search_ctr(events),
    "revenue_by_segment": revenue_by_segment,
    "sessions": lambda events, _profiles: sessions(events),
}
"""View name (``core.catalog``) -> its function, in catalogue order."""

assert tuple(VIEW_FUNCTIONS) == VIEW_NAMES, "every catalogued view has one function, in order"

PARTIALS: Final[dict[str, PartialAggregate]] = {
    module.PARTIAL.view: module.PARTIAL
    for module in (_page_views, _unique_users, _search_ctr, _revenue, _sessions)
}
"""View name -> its partial aggregate, in catalogue order."""

assert tuple(PARTIALS) == VIEW_NAMES, "every catalogued view has one partial aggregate, in order"


def compute_view(name: str, events: DataFrame, profiles: DataFrame) -> DataFrame:
    """One view by name from valid, deduplicated events and profile versions."""
    try:
        function = VIEW_FUNCTIONS[name]
    except KeyError:
        raise KeyError(f"unknown view {name!r}; views: {', '.join(VIEW_NAMES)}") from None
    return function(events, profiles)


def compute_all(events: DataFrame, profiles: DataFrame) -> dict[str, DataFrame]:
    """Every view (catalogue order) from valid, deduplicated events and profile versions."""
    return {name: function(events, profiles) for name, function in VIEW_FUNCTIONS.items()}


__all__ = [
    "PARTIALS",
    "VIEW_FUNCTIONS",
    "PartialAggregate",
    "ViewFunction",
    "compute_all",
    "compute_view",
    "event_intervals",
    "merge_sessions",
    "page_views",
    "revenue_by_segment",
    "search_ctr",
    "sessions",
    "unique_users",
]
