"""`GET /metrics`: Prometheus's text format (`serving.metrics`); one store read per scrape, for
what the batch steps and quality gates recorded (`serving.store_metrics`)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from serving.api.deps import MetricsDep
from serving.metrics import CONTENT_TYPE

router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "description": "Prometheus's text exposition format.",
            "content": {"text/plain": {"schema": {"type": "string"}}},
        }
    },
)
async def metrics(request: Request, metrics: MetricsDep) -> Response:
    """Request latency per view, the store pools' use, the stream progress the API saw, and the
    batch runs and quality gates recorded in the store."""
    pool: Any = getattr(request.app.state, "pool", None)
    await metrics.store.refresh(pool)  # before the pool's stats: its own use counts too
    if pool is not None:  # this worker's pool now; the other workers' as of their last second
        metrics.observe_pool(pool.pop_stats())
    # In multiprocess mode this reads every worker's files: off the event loop.
    return Response(await run_in_threadpool(metrics.render), media_type=CONTENT_TYPE)
