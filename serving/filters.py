"""The query string of `GET /v1/views/{view}`, checked into a `ViewQuery` (or a reason why not).

Pure functions, no HTTP and no database: the route turns `UnknownViewError` into 404 and
`BadFilterError` into 422.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

from core.catalog import VIEWS, ViewSpec
from core.settings import Architecture, Settings
from core.timefmt import parse_iso
from serving.models import ReadArchitecture

ARCHITECTURES: tuple[ReadArchitecture, ...] = ("lambda", "kappa")
COMMON_PARAMS = ("start", "end", "architecture")
KEY_FILTERS = tuple(sorted({key for spec in VIEWS.values() for key in spec.keys}))


class UnknownViewError(LookupError):
    """The view is not one of the catalogue's."""


class BadFilterError(ValueError):
    """A query parameter is unknown, repeated, not this view's, or has an unusable value."""


@dataclass(frozen=True, slots=True)
class ViewFilters:
    """Equality on key fields, and `start <= window start < end` (sessions: session_start)."""

    keys: tuple[tuple[str, str], ...] = ()
    start_ms: int | None = None
    end_ms: int | None = None


@dataclass(frozen=True, slots=True)
class ViewQuery:
    spec: ViewSpec
    architecture: ReadArchitecture
    filters: ViewFilters


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


def parse_view_query(
    view: str, params: Iterable[tuple[str, str]], default: ReadArchitecture
) -> ViewQuery:
    """Check every parameter against the view; the first problem found is the reason."""
    spec = view_spec(view)
    allowed = (*COMMON_PARAMS, *spec.keys)
    given: dict[str, str] = {}
    for name, value in params:
        if name in given:
            raise BadFilterError(f"query parameter {name!r} is given more than once")
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
    return ViewQuery(
        spec=spec,
        architecture=cast(ReadArchitecture, architecture),  # checked just above
        filters=ViewFilters(keys=keys, start_ms=start, end_ms=end),
    )
