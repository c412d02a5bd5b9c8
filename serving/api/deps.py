"""What the routes use of the app: its settings, its reader pool and metrics, and a plain store
connection per request for the rarely asked `/v1/quality`.

Each is a plain getter on the request, and a typed dependency for routes that declare it. The
hot route (`GET /v1/views/{view}`) calls the getters itself: FastAPI's dependency solving
cost about a fifth of a 304 revalidation's CPU."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated, Any

import psycopg
from fastapi import Depends, Request
from psycopg_pool import AsyncConnectionPool

from core.settings import Settings
from core.store.connection import connect_reader
from serving.metrics import ServingMetrics


class StoreUnavailableError(psycopg.OperationalError):
    """No pool: the app was not started (its lifespan did not run). Answered 503 like any
    other store outage."""


# The getters are asynchronous although they wait on nothing: FastAPI would run plain functions
# in its thread pool, a hand-off that costs more than they do.


def app_settings(request: Request) -> Settings:
    """The settings the app was created with (`create_app(settings)`)."""
    settings: Settings = request.app.state.settings
    return settings


async def get_settings(request: Request) -> Settings:
    return app_settings(request)


SettingsDep = Annotated[Settings, Depends(get_settings)]


def app_pool(request: Request) -> AsyncConnectionPool[Any]:
    """The pool the app's lifespan opened."""
    pool: AsyncConnectionPool[Any] | None = getattr(request.app.state, "pool", None)
    if pool is None:
        raise StoreUnavailableError("no connection pool: the app has not been started")
    return pool


def app_metrics(request: Request) -> ServingMetrics:
    """This worker's metrics."""
    metrics: ServingMetrics = request.app.state.metrics
    return metrics


async def get_metrics(request: Request) -> ServingMetrics:
    return app_metrics(request)


MetricsDep = Annotated[ServingMetrics, Depends(get_metrics)]


def get_conn(settings: SettingsDep) -> Iterator[psycopg.Connection]:
    """A read-only connection to the serving store, as the serving login, for one request."""
    with connect_reader(settings) as conn:
        yield conn


ConnDep = Annotated[psycopg.Connection, Depends(get_conn)]
