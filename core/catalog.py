"""The eight views of CONTRACT section 3: names, columns and the constants of their semantics.

Every layer (oracle, batch, speed, stream, serving) takes view names, column order and the
window sizes from here, so they cannot drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass

from core.times import HOUR_MS, MINUTE_MS

SESSION_GAP_MS = 30 * MINUTE_MS
"""Two consecutive events of a user whose gap is at most this (inclusive) share a session."""

CLICK_WINDOW_MS = 30 * MINUTE_MS
"""A click counts for a search when click event_ts is in [search event_ts, + this] (closed)."""

PATTERN_WINDOW_MS = 60 * MINUTE_MS
"""search_conversions: an order completes a search's pattern when its event_ts is at most this
after the search's (closed), and at or after the click's; a pattern's facts leave the state
once this bound is behind their partition's watermark."""

LOOKAHEAD_MS = max(CLICK_WINDOW_MS, PATTERN_WINDOW_MS)
"""How far after a window's events the events that decide its row may lie (a search's clicks,
its pattern's order): the batch reads this far past its cutoff, and a scheduled cutoff waits
until the archive holds this much after it."""

MATCH_COLUMNS = (
    "query",
    "window_start",
    "window_end",
    "search_id",
    "user_id",
    "search_ts",
    "click_id",
    "click_ts",
    "order_id",
    "order_ts",
)
"""A search_conversions match (CONTRACT section 5), as served: the search's query and window,
then the three events of the pattern; sorted by query, window and search id."""
MATCH_TIME_FIELDS = ("window_start", "window_end", "search_ts", "click_ts", "order_ts")
"""A match's times: epoch ms from the view logic, timestamps in the store, ISO when served."""
MATCH_ORDER = ("query", "window_start", "search_id")
"""The order readers get matches in."""

UNKNOWN_SEGMENT = "unknown"
"""Segment of an order whose user has no profile, or a tombstone, as of the order's event_ts."""

WINDOW_FIELDS = ("window_start", "window_end")
SESSION_FIELDS = ("session_start", "session_end")


@dataclass(frozen=True, slots=True)
class ViewSpec:
    """One view: its key fields, its time fields, its value fields, its window."""

    name: str
    keys: tuple[str, ...]
    """Key fields other than time; they are also the serving API's filters."""
    time_fields: tuple[str, ...]
    """A window's or a session's start and end; none for a view of the current state."""
    values: tuple[str, ...]
    window_ms: int | None
    """Size of the window; ``None`` for session windows and the current state."""
    hop_ms: int | None = None
    """A hopping window's hop (a window starts every hop); ``None``: tumbling."""
    order_after: tuple[str, ...] = ()
    """Text value columns that follow the window's start in the reading order, where keys and
    window do not name a row alone (a view's matches: the search id)."""
    instants: tuple[str, ...] = ()
    """Value columns that are instants (a match's event times): epoch ms in the view logic,
    timestamps in the store, ISO 8601 when served."""

    @property
    def columns(self) -> tuple[str, ...]:
        """Column order of a row: keys, then the time fields, then values."""
        return (*self.keys, *self.time_fields, *self.values)

    @property
    def current_state(self) -> bool:
        """No time fields: one row per key, the current state of everything seen."""
        return not self.time_fields

    @property
    def straddles_cutoff(self) -> bool:
        """A row can hold events from both sides of Lambda's cutoff (an hour boundary, which no
        tumbling window straddles): a session, a hopping window, the current state. The batch
        side computes such a view from the events before the cutoff only, and the speed layer
        merges its own into it (``core.store.reads``, ``speed_layer``)."""
        return self.window_ms is None or self.hop_ms is not None


VIEWS: dict[str, ViewSpec] = {
    spec.name: spec
    for spec in (
        ViewSpec("page_views", ("page",), WINDOW_FIELDS, ("count",), MINUTE_MS),
        ViewSpec("unique_users", (), WINDOW_FIELDS, ("users",), HOUR_MS),
        ViewSpec("search_ctr", ("query",), WINDOW_FIELDS, ("searches", "clicks", "ctr"), HOUR_MS),
        ViewSpec("revenue_by_segment", ("segment",), WINDOW_FIELDS, ("revenue_cents",), HOUR_MS),
        ViewSpec("sessions", ("user_id",), SESSION_FIELDS, ("events",), None),
        ViewSpec(
            "page_views_hopping",
            ("page",),
            WINDOW_FIELDS,
            ("count",),
            10 * MINUTE_MS,
            hop_ms=MINUTE_MS,
        ),
        ViewSpec("segment_totals", ("segment",), (), ("users", "revenue_cents"), None),
        ViewSpec(
            "search_conversions",
            ("query",),
            WINDOW_FIELDS,
            ("searches", "clicked", "converted", "conversion_rate"),
            HOUR_MS,
        ),
    )
}

MATCH_SPECS: dict[str, ViewSpec] = {
    "search_conversions": ViewSpec(
        "search_conversions_matches",
        ("query",),
        WINDOW_FIELDS,
        ("search_id", "user_id", "search_ts", "click_id", "click_ts", "order_id", "order_ts"),
        HOUR_MS,
        order_after=("search_id",),
        instants=("search_ts", "click_ts", "order_ts"),
    ),
}
"""A pattern view -> its complex events as a table of the store and a page of the API (not a
view: the views are ``VIEWS``). Keyed and windowed as the view, one row per converted search,
read in ``MATCH_ORDER``; its name is its tables' (``batch_<name>``, ``rt_<name>``)."""
assert all(spec.columns == MATCH_COLUMNS for spec in MATCH_SPECS.values())
assert all(
    (*spec.keys, spec.time_fields[0], *spec.order_after) == MATCH_ORDER
    for spec in MATCH_SPECS.values()
)

MATCH_VIEWS: tuple[str, ...] = tuple(MATCH_SPECS)
"""The views whose partial emits complex events (``PartialAggregate.matches``)."""

VIEW_NAMES: tuple[str, ...] = tuple(VIEWS)
VIEW_KEYS: dict[str, tuple[str, ...]] = {name: spec.keys for name, spec in VIEWS.items()}
VIEW_VALUES: dict[str, tuple[str, ...]] = {name: spec.values for name, spec in VIEWS.items()}

# --- logic versions (Kappa reprocessing, Lambda recomputation) ----------------------------------

UNTRUSTED_CLOCK_MS = 10 * MINUTE_MS
"""Logic version 2 leaves out an event whose device clock is this far or more off the server's."""

LOGIC_VERSIONS: dict[str, str] = {
    "1": "the views exactly as CONTRACT section 3 defines them",
    "2": "as 1, but events from devices whose clock is 10 minutes or more off the server's "
    "(|received_ts - sent_ts| >= 10 min) are left out as untrusted",
    "bug": "a deliberately wrong version 2, its clock test reversed (it keeps only the "
    "untrusted events): the comparison's bug-and-fix scenario deploys it, then repairs it",
}
"""A logic version -> what it computes. A reprocess with a new version shows the change."""

DEFAULT_LOGIC_VERSION = "1"


def check_logic_version(version: str) -> str:
    if version not in LOGIC_VERSIONS:
        known = ", ".join(sorted(LOGIC_VERSIONS))
        raise ValueError(f"unknown logic version {version!r}; known: {known}")
    return version
