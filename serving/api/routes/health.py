"""`GET /health`: liveness only; it does not touch the store (see `serving.main`)."""

from __future__ import annotations

from fastapi import APIRouter

from serving.models import Health

router = APIRouter(tags=["health"])


@router.get("/health", response_model=Health)
async def health() -> Health:
    """The process is up and answering (Postgres is not consulted). Asynchronous although it
    waits on nothing: FastAPI would run a plain function in a thread."""
    return Health()
