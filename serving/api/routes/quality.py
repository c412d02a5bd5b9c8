"""`GET /v1/quality`: where Data Docs are, and the last result of each suite per layer."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter, status
from pydantic import BaseModel, Field

from core.store import quality_results as records
from serving.api.deps import ConnDep
from serving.models import ErrorBody

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
    suites: list[SuiteResult] = Field(description="The last result per layer and suite.")


@router.get(
    "",
    response_model=QualityResponse,
    responses={
        status.HTTP_503_SERVICE_UNAVAILABLE: {
            "model": ErrorBody,
            "description": "The serving store cannot be reached.",
        }
    },
)
def quality(conn: ConnDep) -> QualityResponse:
    """The Data Docs link and, per layer, each suite's last result (from the serving store)."""
    docs = records.docs(conn)
    return QualityResponse(
        data_docs=None if docs is None else docs[0],
        data_docs_published_at=None if docs is None else docs[1],
        suites=[SuiteResult(**row) for row in records.latest(conn)],
    )
