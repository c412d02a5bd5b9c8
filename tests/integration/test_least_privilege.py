"""The serving layer reads the store as a login that can read it and nothing more."""

from __future__ import annotations

import psycopg
import pytest
from fastapi.testclient import TestClient

from core.store.connection import connect, connection_kwargs
from core.store.schema import realtime_table
from serving.main import create_app
from tests.integration.helpers import isolated_settings


def test_serving_reads_as_a_read_only_login(stack: object) -> None:
    settings = isolated_settings(stack, "reader")  # type: ignore[arg-type]
    reader = connection_kwargs(settings, reader=True)
    assert reader["user"] == settings.serving_postgres_user != settings.postgres_user
    with connect(settings) as conn:
        role = conn.execute(
            "select rolsuper, rolcreaterole, rolcreatedb from pg_roles where rolname = %s",
            (reader["user"],),
        ).fetchone()
    assert role == (False, False, False)

    with psycopg.connect(**reader, autocommit=True) as conn:
        conn.execute("select count(*) from view_alias").fetchone()
        for statement in (
            f"delete from {realtime_table('page_views')}",
            "insert into view_alias (architecture, version) values ('kappa', 99)",
            "create table intruder (x int)",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(statement)

    # A table the writers create later is readable too (default privileges).
    with connect(settings) as conn:
        conn.execute("create table later_table (x int)")
        conn.execute("insert into later_table values (1)")
    with psycopg.connect(**reader, autocommit=True) as conn:
        assert conn.execute("select x from later_table").fetchone() == (1,)

    with TestClient(create_app(settings)) as client:
        assert client.get("/v1/views/page_views", params={"architecture": "kappa"}).status_code in (
            200,
            404,
        )
