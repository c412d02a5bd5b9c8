"""The serving API of CONTRACT §5: `create_app(settings)` builds it; `lk serve` runs it.

It only reads the serving store (Postgres). At startup it creates the store's tables if they
are missing, so a fresh stack answers with empty rows rather than errors, then opens a pool of
read-only connections that lives as long as the app (closed at shutdown). `GET /health` is a
liveness check and does not touch the store (a store outage must not get the process
restarted); a request that cannot reach the store gets 503 with the reason, and the pool
replaces broken connections by itself once the store is back. `GET /metrics` is Prometheus's;
`GET /` is a live dashboard, a static page that polls the API from the browser.

Nothing is created at import time: no settings, no connection, no app. `lk serve` runs several
worker processes, each building its app with `app_from_environment`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import psycopg
from fastapi import FastAPI, Request, status
from fastapi.responses import JSONResponse
from psycopg_pool import AsyncConnectionPool, PoolTimeout

from core.catalog import VIEWS
from core.settings import Settings, get_settings
from core.store.connection import reader_pool
from serving import caching
from serving import metrics as serving_metrics
from serving.api.routes import comparison, dashboard, health, metrics, quality, views

log = logging.getLogger(__name__)

STARTUP_WAIT_S = 30.0  # how long a starting worker waits for its first store connections
POOL_STATS_INTERVAL_S = 1.0  # how often a worker publishes its pool's gauges


def unavailable_reason(exc: Exception) -> str:
    """Why the store did not answer, for the client: what happened, never where the store is
    (a driver's message names its host and port; the log keeps it for operators)."""
    if isinstance(exc, PoolTimeout):
        return "no store connection became free in time"
    if isinstance(exc, psycopg.errors.QueryCanceled):
        return "a read took longer than the statement timeout"
    if isinstance(exc, psycopg.errors.UndefinedTable):
        return "its tables are not created yet (`lk init`)"
    if isinstance(exc, psycopg.errors.InsufficientPrivilege):
        return "the serving login may not read its tables (`lk init` grants it)"
    return "the connection to the store failed"


async def _store_unavailable(request: Request, exc: Exception) -> JSONResponse:
    log.warning("store unavailable for %s: %s", request.url.path, " ".join(str(exc).split()))
    return JSONResponse(
        {"detail": f"the serving store is unavailable: {unavailable_reason(exc)}"},
        status_code=status.HTTP_503_SERVICE_UNAVAILABLE,
    )


async def _publish_pool_stats(
    pool: AsyncConnectionPool[Any], metrics: serving_metrics.ServingMetrics
) -> None:
    while True:
        metrics.observe_pool(pool.pop_stats())
        await asyncio.sleep(POOL_STATS_INTERVAL_S)


def create_app(settings: Settings) -> FastAPI:
    """The API for `settings` (store location, default architecture, pool, page limits)."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # The serving layer only reads, as the store's read-only login: the writers (`lk init`,
        # the first micro-batch) create the tables. Until the store answers, requests get 503
        # while the pool keeps trying in the background.
        pool = reader_pool(settings)
        try:
            await pool.open(wait=True, timeout=STARTUP_WAIT_S)
        except PoolTimeout:
            log.warning("the serving store does not answer yet; requests get 503 until it does")
        app.state.pool = pool
        stats = asyncio.create_task(_publish_pool_stats(pool, app.state.metrics))
        try:
            yield
        finally:
            stats.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stats
            app.state.pool = None
            await pool.close()
            serving_metrics.worker_exited()

    app = FastAPI(
        title="lk serving API",
        summary=f"The {len(VIEWS)} views of the Lambda and Kappa architectures, merged per "
        "window (or per key, for the current state).",
        version="1",
        lifespan=lifespan,
    )
    app.state.settings = settings
    app.state.metrics = serving_metrics.ServingMetrics()
    app.state.answers = caching.Answers(settings.serve_answer_cache_mib * 2**20)
    app.include_router(health.router)
    app.include_router(views.router)
    app.include_router(quality.router)
    app.include_router(comparison.router)
    app.include_router(metrics.router)
    app.include_router(dashboard.router)
    app.mount(dashboard.ASSETS_PATH, dashboard.assets(), name="dashboard")
    app.add_exception_handler(psycopg.OperationalError, _store_unavailable)
    app.add_exception_handler(psycopg.errors.UndefinedTable, _store_unavailable)
    app.add_exception_handler(psycopg.errors.InsufficientPrivilege, _store_unavailable)
    return app


def app_from_environment() -> FastAPI:
    """The app of one `lk serve` worker: its settings from the environment `lk serve` set."""
    return create_app(get_settings())
