"""`GET /v1/quality`: where Data Docs are, and the last result of each suite per layer."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, Field

from core.store import comparison_reports
from core.store import quality_results as records
from serving.api.deps import ConnDep
from serving.models import STORE_UNAVAILABLE

router = APIRouter(prefix="/v1/quality", tags=["quality"])


class SuiteResult(BaseModel):
    layer: str = Field(
        description="Where the data came from, e.g. `lambda-batch`, `kappa-serving`."
    )
    suite: str = Field(description="The suite, e.g. `batch_views.search_ctr`, `reconciliation`.")
    run_name: str
    success: bool
    rows: int | None = Field(description="Rows validated.")
    evaluated: int = Field(description="Expectations evaluated.")
    failed: int = Field(description="Expectations that failed.")
    failures: list[str] = Field(description="One line per failed expectation.")
    seconds: float
    validated_at: datetime


class QualityResponse(BaseModel):
    data_docs: str | None = Field(
        description="The Data Docs landing page on MinIO; null before `lk dq docs` (or the "
        "data_quality DAG) first published it."
    )
    data_docs_published_at: datetime | None
    comparison_report: str | None = Field(
        description="The last Lambda vs Kappa comparison report on MinIO (`GET /v1/comparison`); "
        "null before a comparison run first published one."
    )
    suites: list[SuiteResult] = Field(description="The last result per layer and suite.")


@router.get(
    "",
    response_model=QualityResponse,
    responses=STORE_UNAVAILABLE,
)
def quality(conn: ConnDep) -> QualityResponse:
    """The Data Docs link and, per layer, each suite's last result (from the serving store)."""
    docs = records.docs(conn)
    report = comparison_reports.latest(conn)
    return QualityResponse(
        data_docs=None if docs is None else docs[0],
        data_docs_published_at=None if docs is None else docs[1],
        comparison_report=None if report is None else report.url,
        suites=[SuiteResult(**row) for row in records.latest(conn)],
    )
