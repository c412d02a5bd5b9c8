"""`GET /v1/comparison`: where the last side-by-side report of Lambda and Kappa is."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from core.store import comparison_reports
from serving.api.deps import ConnDep
from serving.models import STORE_UNAVAILABLE

router = APIRouter(prefix="/v1/comparison", tags=["comparison"])


class ComparisonResponse(BaseModel):
    report: str | None = Field(
        description="The last comparison report (one HTML page, readable by anyone) on MinIO; "
        "null before a comparison run (`lk compare`) first published one."
    )
    # Named `json` in the answer; `json_url` here, as `BaseModel.json` is a method.
    json_url: str | None = Field(
        alias="json",
        description="The numbers behind that report (`comparison.json`), beside it; null "
        "before the first run.",
    )
    published_at: datetime | None = Field(description="When it was published.")


@router.get(
    "",
    response_model=ComparisonResponse,
    responses=STORE_UNAVAILABLE,
)
def comparison(conn: ConnDep) -> ComparisonResponse:
    """The last published comparison report and its JSON (from the serving store)."""
    found = comparison_reports.latest(conn)
    if found is None:
        return ComparisonResponse(report=None, json=None, published_at=None)
    return ComparisonResponse(
        report=found.url, json=found.json_url, published_at=found.published_at
    )
