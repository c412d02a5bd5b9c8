"""Response bodies of the serving API (CONTRACT §5), as pydantic models for OpenAPI."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

ReadArchitecture = Literal["lambda", "kappa"]
"""The architectures a reader can ask for (`both` is a deployment mode, not a view)."""

RowValue = str | int | float
Row = dict[str, RowValue]
"""One row of a view, exactly as the oracle spells it: key fields, the time fields as ISO 8601
UTC strings (a window's or session's start and end; none in `segment_totals`, the current
state), then value fields (integers, except `ctr` and `conversion_rate`, floats)."""


class Health(BaseModel):
    status: Literal["ok"] = "ok"


class ErrorBody(BaseModel):
    detail: str = Field(description="Why the request was refused, in one sentence.")


class ViewMeta(BaseModel):
    """Where the rows come from and how fresh they are."""

    architecture: ReadArchitecture
    view_version: int | None = Field(
        description="The version the alias points at; null before the first one is published."
    )
    batch_cutoff: str | None = Field(
        description="Lambda: the batch layer counted the events before this instant, the speed "
        "layer those from it on (a row spanning it, such as a hopping window, a session or the "
        "current state, combines both). Always null for Kappa."
    )
    speed_watermark: str | None = Field(
        description="Event-time watermark of the real-time stream read; null before its first "
        "micro-batch."
    )
    quarantined: int = Field(description="Invalid records set aside (never counted in a view).")
    late_dropped: int = Field(
        description="Events behind the watermark that the real-time stream dropped."
    )
    stream: str | None = Field(
        description="The real-time stream read: `lambda-speed`, or `kappa-v<view_version>`; "
        "null for Kappa before a version is published."
    )
    next_cursor: str | None = Field(
        default=None,
        description="Pass it back as `cursor` (same view, architecture and filters) for the "
        "rows after these, in the same order; null on the last page. Opaque. A cursor "
        "taken before the alias moved to another version is refused with 409.",
    )


class ViewResponse(BaseModel):
    view: str
    rows: list[Row] = Field(
        description="Sorted by key fields, then window (sessions: user_id, session_start, "
        "session_end; segment_totals, which has no window: segment); at "
        "most `limit` of them (default and maximum: `LK_SERVE_PAGE_LIMIT`, 1,000, and "
        "`LK_SERVE_PAGE_LIMIT_MAX`, 10,000)."
    )
    meta: ViewMeta


class Match(BaseModel):
    """One complex event of a pattern view: a converted search and the events that matched."""

    query: str
    window_start: str = Field(description="The search's window (ISO 8601 UTC), as the view's.")
    window_end: str
    search_id: str
    user_id: str = Field(description="The searcher's (the order is theirs).")
    search_ts: str
    click_id: str = Field(
        description="The earliest click on the search in its 30-minute span, by any user."
    )
    click_ts: str
    order_id: str = Field(
        description="The searcher's earliest order from that click to 60 minutes after the "
        "search (ties by log order)."
    )
    order_ts: str


class MatchesResponse(BaseModel):
    view: str
    matches: list[Match] = Field(
        description="One per converted search, sorted by query, window start and search id; "
        "paginated as a view's rows (`limit`, `cursor`)."
    )
    meta: ViewMeta


STORE_UNAVAILABLE: dict[int | str, dict[str, Any]] = {
    503: {"model": ErrorBody, "description": "The serving store cannot be reached."}
}
"""The 503 every route that reads the store documents in its OpenAPI responses."""
