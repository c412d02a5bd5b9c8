"""`GET /v1/views/{view}`: one view, merged for the asked architecture, with its meta."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, HTTPException, Query, Request, status

from serving import repository
from serving.api.deps import ConnDep, SettingsDep
from serving.filters import (
    BadFilterError,
    UnknownViewError,
    ViewQuery,
    default_architecture,
    parse_view_query,
)
from serving.models import ErrorBody, ViewResponse

router = APIRouter(prefix="/v1/views", tags=["views"])


def view_query(
    view: str,
    request: Request,
    settings: SettingsDep,
    # Declared for the OpenAPI page only: the whole query string is checked by
    # `parse_view_query`, which also refuses unknown and repeated parameters.
    start: Annotated[
        str | None, Query(description="ISO 8601 UTC; rows whose window starts at or after it.")
    ] = None,
    end: Annotated[
        str | None, Query(description="ISO 8601 UTC; rows whose window starts before it.")
    ] = None,
    architecture: Annotated[
        str | None, Query(description="lambda or kappa (default: the deployment's).")
    ] = None,
    page: Annotated[str | None, Query(description="page_views only.")] = None,
    query: Annotated[str | None, Query(description="search_ctr only.")] = None,
    segment: Annotated[str | None, Query(description="revenue_by_segment only.")] = None,
    user_id: Annotated[str | None, Query(description="sessions only.")] = None,
) -> ViewQuery:
    """The checked request: 404 for an unknown view, 422 with the reason for a bad filter."""
    try:
        return parse_view_query(
            view, request.query_params.multi_items(), default_architecture(settings)
        )
    except UnknownViewError as exc:
        raise HTTPException(status.HTTP_404_NOT_FOUND, str(exc)) from exc
    except BadFilterError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from exc


# Declared before the connection, so a refused request never opens one.
ViewQueryDep = Annotated[ViewQuery, Depends(view_query)]


@router.get(
    "/{view}",
    response_model=ViewResponse,
    responses={
        status.HTTP_404_NOT_FOUND: {"model": ErrorBody, "description": "Unknown view."},
        status.HTTP_422_UNPROCESSABLE_CONTENT: {"model": ErrorBody, "description": "Bad filter."},
    },
)
def read_view(view_query: ViewQueryDep, conn: ConnDep) -> ViewResponse:
    """Rows of one view (sorted by key fields, then window) and where they come from."""
    rows, meta = repository.read_view(conn, view_query)
    return ViewResponse(view=view_query.spec.name, rows=rows, meta=meta)
