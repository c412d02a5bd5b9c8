"""The serving API of CONTRACT §5: `create_app(settings)` builds it; `lk serve` runs it.

It only reads the serving store (Postgres). At startup it creates the store's tables if they
are missing, so a fresh stack answers with empty rows rather than errors. `GET /health` is a
liveness check and does not touch the store (a store outage must not get the process
restarted); a request that cannot reach the store gets 503 with the reason.

Nothing is created at import time: no settings, no connection, no app.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import psycopg
from fastapi import FastAPI, Request, status
from fastapi.responses import JSONResponse
from starlette.concurrency import run_in_threadpool

from core.settings import Settings
from core.store.connection import connect
from core.store.schema import create_all
from serving.api.routes import health, quality, views


def ensure_store(settings: Settings) -> None:
    """Create the store's tables if missing; serialised, so two replicas can start together."""
    with connect(settings) as conn:
        conn.execute("select pg_advisory_lock(hashtext('lk-store-schema'))")
        try:
            create_all(conn)
        finally:
            conn.execute("select pg_advisory_unlock(hashtext('lk-store-schema'))")


async def _store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    reason = " ".join(str(exc).split()) or type(exc).__name__
    return JSONResponse(
        {"detail": f"the serving store is unavailable: {reason}"},
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
    )


def create_app(settings: Settings) -> FastAPI:
    """The API for `settings` (store location, default architecture)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        await run_in_threadpool(ensure_store, settings)
        yield

    app = FastAPI(
        title="lk serving API",
        summary="The five views of the Lambda and Kappa architectures, merged per window.",
        version="1",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.include_router(health.router)
    app.include_router(views.router)
    app.include_router(quality.router)
    app.add_exception_handler(psycopg.OperationalError, _store_unavailable)
    return app
