"""Connections to the serving store."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from core.settings import Settings

if TYPE_CHECKING:
    import psycopg


def connect(settings: Settings) -> psycopg.Connection:
    """An autocommit connection: every write of the store is an explicit `conn.transaction()`."""
    import psycopg

    return psycopg.connect(
        host=settings.postgres_host or settings.host,
        port=settings.postgres_port,
        user=settings.postgres_user,
        password=settings.postgres_password,
        dbname=settings.postgres_db,
        connect_timeout=10,
        autocommit=True,
    )


@contextmanager
def stream_lock(conn: psycopg.Connection, stream: str) -> Iterator[None]:
    """Serialise the writers of one stream (its micro-batches and Lambda's hand-off)."""
    conn.execute("select pg_advisory_lock(hashtext(%s))", (stream,))
    try:
        yield
    finally:
        conn.execute("select pg_advisory_unlock(hashtext(%s))", (stream,))
