"""The query string of `GET /v1/views/{view}` (and of `/v1/views/{view}/matches`), checked into a
`ViewQuery` (or a reason why not).

Pure functions, no HTTP and no database: the route turns `UnknownViewError` into 404 and
`BadFilterError` into 422 (`start` or `end` on a view with no time fields, `segment_totals`,
included). Besides the filters, a request may ask for a page: `limit` rows
(default and maximum from the settings) after the `cursor` a previous page returned.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from core.catalog import MATCH_SPECS, VIEWS, ViewSpec
from core.settings import Architecture, Settings
from core.store.reads import ViewFilters, sort_columns
from core.times import parse_iso
from serving.cursor import BadCursorError, Cursor, decode, query_digest
from serving.models import ReadArchitecture

ARCHITECTURES: tuple[ReadArchitecture, ...] = ("lambda", "kappa")
TIME_PARAMS = ("start", "end")
"""Filters on a window's or session's start: a view of the current state has none (422)."""
COMMON_PARAMS = (*TIME_PARAMS, "architecture")
PAGE_PARAMS = ("limit", "cursor")
KEY_FILTERS = tuple(sorted({key for spec in VIEWS.values() for key in spec.keys}))


class UnknownViewError(LookupError):
    """The view is not one of the catalogue's."""


class BadFilterError(ValueError):
    """A query parameter is unknown, repeated, not this view's, or has an unusable value."""


@dataclass(frozen=True, slots=True)
class PageLimits:
    """Rows per page: without `limit`, and the most `limit` may ask for."""

    default: int
    maximum: int

    @classmethod
    def from_settings(cls, settings: Settings) -> PageLimits:
        return cls(settings.serve_page_limit, settings.serve_page_limit_max)


@dataclass(frozen=True, slots=True)
class ViewQuery:
    spec: ViewSpec
    architecture: ReadArchitecture
    filters: ViewFilters
    limit: int | None = None  # rows of this page; None: every row (the quality checks' reads)
    cursor: Cursor | None = None  # where the previous page ended
    digest: str = ""  # names the query without its page (`serving.cursor.query_digest`)


def default_architecture(settings: Settings) -> ReadArchitecture:
    """What a request without `architecture` reads: the deployment's, Lambda when it runs both."""
    return "kappa" if settings.architecture == Architecture.KAPPA else "lambda"


def view_spec(view: str) -> ViewSpec:
    spec = VIEWS.get(view)
    if spec is None:
        raise UnknownViewError(f"unknown view {view!r}; the views are {', '.join(VIEWS)}")
    return spec


def _instant(name: str, value: str) -> int:
    try:
        return parse_iso(value)
    except ValueError as exc:
        raise BadFilterError(f"{name}: {exc}") from exc


def _limit(value: str | None, limits: PageLimits) -> int:
    if value is None:
        return limits.default
    number = int(value) if value.isascii() and value.isdigit() else 0
    if not 1 <= number <= limits.maximum:
        raise BadFilterError(
            f"limit must be a whole number from 1 to {limits.maximum:,}, not {value!r}"
        )
    return number


def parse_view_query(
    view: str,
    params: Iterable[tuple[str, str]],
    default: str,
    limits: PageLimits | None = None,
) -> ViewQuery:
    """Check every parameter against the view; the first problem found is the reason. With
    `limits`, the request is for one page (`limit`, `cursor`); without, for every row."""
    return _parse(view_spec(view), view, params, default, limits)


def parse_matches_query(
    view: str,
    params: Iterable[tuple[str, str]],
    default: str,
    limits: PageLimits | None = None,
) -> ViewQuery:
    """`GET /v1/views/{view}/matches`: a pattern view's complex events, with the view's key
    filters, `start` and `end` (on the search's window), and pages, checked as a view's."""
    spec = MATCH_SPECS.get(view)
    if spec is None:
        if view not in VIEWS:
            view_spec(view)  # raises: unknown view
        raise UnknownViewError(
            f"view {view!r} has no matches; the views with matches are {', '.join(MATCH_SPECS)}"
        )
    return _parse(spec, f"{view}/matches", params, default, limits)


def _parse(
    spec: ViewSpec,
    view: str,
    params: Iterable[tuple[str, str]],
    default: str,
    limits: PageLimits | None,
) -> ViewQuery:
    pages = PAGE_PARAMS if limits is not None else ()
    common = tuple(p for p in COMMON_PARAMS if p not in TIME_PARAMS or not spec.current_state)
    allowed = (*common, *pages, *spec.keys)
    given: dict[str, str] = {}
    for name, value in params:
        if name in given:
            raise BadFilterError(f"query parameter {name!r} is given more than once")
        if name in TIME_PARAMS and spec.current_state:
            raise BadFilterError(
                f"{name!r} does not apply to {view}: it has no window (the current state "
                f"per {', '.join(spec.keys)}), so it takes no start or end"
            )
        if name not in allowed:
            if name in KEY_FILTERS:
                view_keys = ", ".join(spec.keys) or "none"
                raise BadFilterError(
                    f"{name!r} is not a key of {view} (its key filters: {view_keys})"
                )
            raise BadFilterError(
                f"unknown query parameter {name!r}; {view} accepts {', '.join(allowed)}"
            )
        if "\x00" in value:
            raise BadFilterError(f"{name}: a NUL character is not allowed")
        given[name] = value

    architecture = given.get("architecture", default)
    if architecture not in ARCHITECTURES:
        raise BadFilterError(
            f"architecture must be one of {', '.join(ARCHITECTURES)}, not {architecture!r}"
        )
    start = _instant("start", given["start"]) if "start" in given else None
    end = _instant("end", given["end"]) if "end" in given else None
    if start is not None and end is not None and start > end:
        raise BadFilterError(f"start ({given['start']}) is after end ({given['end']})")
    for name in spec.keys:
        if given.get(name) == "":
            raise BadFilterError(f"{name} must not be empty")
    keys = tuple((name, given[name]) for name in spec.keys if name in given)
    filters = ViewFilters(keys=keys, start_ms=start, end_ms=end)
    digest = query_digest(spec.name, architecture, filters)
    if limits is None:
        limit, cursor = None, None
    else:
        limit = _limit(given.get("limit"), limits)
        cursor = None
        if "cursor" in given:
            # Keys are text, times epoch ms; the current state sorts by its keys alone.
            sort_types = tuple(int if c in spec.time_fields else str for c in sort_columns(spec))
            try:
                cursor = decode(given["cursor"], sort_types, digest)
            except BadCursorError as exc:
                raise BadFilterError(str(exc)) from exc
    return ViewQuery(
        spec=spec,
        architecture=cast(ReadArchitecture, architecture),  # checked just above
        filters=filters,
        limit=limit,
        cursor=cursor,
        digest=digest,
    )
