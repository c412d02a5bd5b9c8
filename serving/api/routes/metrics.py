"""`GET /metrics`: Prometheus's text format (`serving.metrics`); no store access."""

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
    """Request latency per view, the store pools' use, and the stream progress the API saw."""
    pool: Any = getattr(request.app.state, "pool", None)
    if pool is not None:  # this worker's pool now; the other workers' as of their last second
        metrics.observe_pool(pool.pop_stats())
    # In multiprocess mode this reads every worker's files: off the event loop.
    return Response(await run_in_threadpool(metrics.render), media_type=CONTENT_TYPE)
