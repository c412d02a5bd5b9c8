"""Typed dependencies of the routes: the app's settings and a store connection per request."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Annotated

import psycopg
from fastapi import Depends, Request

from core.settings import Settings
from core.store.connection import connect


def get_settings(request: Request) -> Settings:
    """The settings the app was created with (`create_app(settings)`)."""
    settings: Settings = request.app.state.settings
    return settings


SettingsDep = Annotated[Settings, Depends(get_settings)]


def get_conn(settings: SettingsDep) -> Iterator[psycopg.Connection]:
    """An autocommit connection to the serving store for one request, closed after it."""
    with connect(settings) as conn:
        yield conn


ConnDep = Annotated[psycopg.Connection, Depends(get_conn)]
