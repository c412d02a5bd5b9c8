"""`GET /v1/comparison`: where the last side-by-side report of Lambda and Kappa is, and its
verdict."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from fastapi import APIRouter
from pydantic import BaseModel, Field

from core.store import comparison_reports
from serving.api.deps import ConnDep
from serving.models import STORE_UNAVAILABLE

router = APIRouter(prefix="/v1/comparison", tags=["comparison"])


class VerdictRow(BaseModel):
    """One question of the report's verdict, as `comparison.publish` stored it (the fields of
    `comparison.verdict.VerdictRow`)."""

    question: str = Field(description='e.g. "How fresh: produced → visible, p99".')
    figure: str = Field(
        description="The id of the report's section with the figure behind the answer "
        '(`<report>#<figure>`), e.g. "fig-freshness".'
    )
    lambda_figure: str = Field(
        description='Lambda\'s figure, formatted, e.g. "4.2 s"; "\N{EN DASH}" when not measured.'
    )
    kappa_figure: str = Field(description="Kappa's figure, formatted, the same way.")
    ahead: Literal["lambda", "kappa", "even", ""] = Field(
        description='The architecture ahead (lower is better for every question), "even" '
        'within 5% of each other, "" when either was not measured.'
    )
    by: str = Field(
        description='By how much, e.g. "2.1\N{MULTIPLICATION SIGN} fresher" or "14 rows '
        'fewer"; "" when even or not measured.'
    )


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
    verdict: list[VerdictRow] | None = Field(
        description="The report's verdict: a row per question, Lambda's figure beside "
        "Kappa's, which one is ahead and by how much; null before the first run (and for a "
        "report published before verdicts were kept)."
    )


@router.get(
    "",
    response_model=ComparisonResponse,
    responses=STORE_UNAVAILABLE,
)
def comparison(conn: ConnDep) -> ComparisonResponse:
    """The last published comparison report, its JSON and its verdict (from the serving
    store)."""
    found = comparison_reports.latest(conn)
    if found is None:
        return ComparisonResponse(report=None, json=None, published_at=None, verdict=None)
    return ComparisonResponse(
        report=found.url,
        json=found.json_url,
        published_at=found.published_at,
        verdict=None
        if found.verdict is None
        else [VerdictRow.model_validate(row) for row in found.verdict],
    )
