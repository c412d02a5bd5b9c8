"""Connections to the serving store: one connection for writers and tools, a pool for readers."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from core.settings import Settings
from core.store.schema import create_all, create_reader, grant_reader

if TYPE_CHECKING:
    import psycopg
    from psycopg_pool import AsyncConnectionPool

# Distinct statements one pooled connection keeps prepared: every filter combination of every
# view and architecture, with and without a page cursor, is 144; psycopg's default keeps 100.
READER_PREPARED_MAX = 256

LEASE_POLL_S = 2.0  # how often a holder-to-be asks again for a lease someone else holds


def connection_kwargs(settings: Settings, *, reader: bool = False) -> dict[str, Any]:
    """Where the store is and who connects: a writer (`connect`), or with `reader` the serving
    layer's read-only login (the readers' pool)."""
    user, password = (
        (settings.serving_postgres_user, settings.serving_postgres_password)
        if reader
        else (settings.postgres_user, settings.postgres_password)
    )
    return {
        "host": settings.postgres_host or settings.host,
        "port": settings.postgres_port,
        "user": user,
        "password": password,
        "dbname": settings.postgres_db,
        "connect_timeout": 10,
    }


def admin_connection(
    settings: Settings, dbname: str = "postgres", connect_timeout: int = 10
) -> psycopg.Connection:
    """An autocommit connection as the stack's own login (a superuser locally, the chart's
    admin on Kubernetes) to any database of the server: to create databases and roles, and to
    read the server's own views (replication slots)."""
    import psycopg

    kwargs = connection_kwargs(settings) | {"dbname": dbname, "connect_timeout": connect_timeout}
    return psycopg.connect(**kwargs, autocommit=True)


_SCHEMA_READY: set[tuple[Any, ...]] = set()
"""Databases this process has created the store's tables in: (host, port, name, oid). The oid
tells a database dropped and created again under the same name from the one already seen."""


def connect(settings: Settings) -> psycopg.Connection:
    """An autocommit connection: every write of the store is an explicit `conn.transaction()`.

    The store's tables exist when it returns: the first connection of a process to a database
    creates whatever is missing (`schema.create_all`, idempotent), so no writer depends on
    another having run first, and no caller has to remember to."""
    import psycopg

    kwargs = connection_kwargs(settings)
    conn = psycopg.connect(**kwargs, autocommit=True)
    try:
        row = conn.execute(
            "select oid from pg_database where datname = current_database()"
        ).fetchone()
        key = (kwargs["host"], kwargs["port"], kwargs["dbname"], row[0] if row else None)
        if key not in _SCHEMA_READY:
            create_all(conn)
            grant_reader(conn, settings.serving_postgres_user)  # a database made since `lk init`
            _SCHEMA_READY.add(key)
    except BaseException:
        conn.close()
        raise
    return conn


def connect_reader(settings: Settings) -> psycopg.Connection:
    """A read-only autocommit connection as the serving layer's login: it creates nothing."""
    import psycopg

    conn = psycopg.connect(**connection_kwargs(settings, reader=True), autocommit=True)
    conn.read_only = True
    return conn


def check_readable(settings: Settings) -> None:
    """Raise unless the serving layer's login can read the store's tables (psycopg's errors:
    OperationalError when the store is down, UndefinedTable before `lk init`,
    InsufficientPrivilege when the login lacks its grants)."""
    with connect_reader(settings) as conn:
        conn.execute("select 1 from view_alias limit 1")


def ensure_database(settings: Settings) -> bool:
    """Create the serving database if it is missing (the stack creates only its default one);
    whether it did."""
    import psycopg
    from psycopg import sql

    admin = {**connection_kwargs(settings), "dbname": "postgres"}
    with psycopg.connect(**admin, autocommit=True) as conn:
        if conn.execute(
            "select 1 from pg_database where datname = %s", (settings.postgres_db,)
        ).fetchone():
            return False
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(settings.postgres_db)))
    return True


def ensure_schema(settings: Settings) -> None:
    """Create the store's tables if missing (what readers need before their first query)."""
    connect(settings).close()


def ensure_reader(settings: Settings) -> None:
    """Create the serving layer's read-only login (`serving_postgres_user`) and its grants."""
    with connect(settings) as conn:
        create_reader(conn, settings.serving_postgres_user, settings.serving_postgres_password)


async def _configure_reader(conn: psycopg.AsyncConnection) -> None:
    from psycopg import IsolationLevel

    # Autocommit, so a lone statement (one snapshot by itself) needs no BEGIN/COMMIT; an
    # explicit transaction starts as `BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY`.
    await conn.set_autocommit(True)
    await conn.set_isolation_level(IsolationLevel.REPEATABLE_READ)
    await conn.set_read_only(True)
    conn.prepared_max = READER_PREPARED_MAX


def reader_pool(settings: Settings, name: str = "lk-readers") -> AsyncConnectionPool:
    """A pool of read-only store connections for one event loop, not opened yet.

    `await pool.open()` in the loop that uses it and `await pool.close()` at the end. A
    connection that broke (the store restarted) is dropped when it comes back and replaced in
    the background; while the store is down, asking for one fails after
    `serve_pool_timeout_s` (`psycopg_pool.PoolTimeout`, a `psycopg.OperationalError`).
    """
    from psycopg_pool import AsyncConnectionPool

    # A reader's statements take milliseconds: JIT compiling one of a large view would take
    # hundreds. A short connect timeout: a store that is down answers 503 sooner.
    options = f"-c jit=off -c statement_timeout={settings.serve_statement_timeout_ms}"
    kwargs = connection_kwargs(settings, reader=True) | {"connect_timeout": 3, "options": options}
    return AsyncConnectionPool(
        kwargs=kwargs,
        min_size=settings.serve_pool_min_size,
        max_size=settings.serve_pool_max_size,
        timeout=settings.serve_pool_timeout_s,
        configure=_configure_reader,
        name=name,
        open=False,
    )


@contextmanager
def stream_lock(conn: psycopg.Connection, stream: str) -> Iterator[None]:
    """Serialise the writers of one stream (its micro-batches and Lambda's hand-off)."""
    conn.execute("select pg_advisory_lock(hashtext(%s))", (stream,))
    try:
        yield
    finally:
        conn.execute("select pg_advisory_unlock(hashtext(%s))", (stream,))


@contextmanager
def lease(settings: Settings, name: str, *, wait: bool) -> Iterator[psycopg.Connection | None]:
    """Hold the lease `name` for the block: at most one holder at a time, across processes.

    A session-level advisory lock on a connection of its own, so it ends with its holder: a
    holder that is killed, or whose connection breaks, lets it go. Yields that connection (a
    long holder checks it now and then with `lease_alive`), or None when `wait` is False and
    someone else holds it. Waiting polls, so a waiting holder still notices being stopped."""
    conn = connect(settings)
    try:
        while not conn.execute("select pg_try_advisory_lock(hashtext(%s))", (name,)).fetchone()[0]:  # type: ignore[index]
            if not wait:
                yield None
                return
            time.sleep(LEASE_POLL_S)
        try:
            yield conn
        finally:
            if not conn.closed:
                conn.execute("select pg_advisory_unlock(hashtext(%s))", (name,))
    finally:
        conn.close()


def lease_alive(conn: psycopg.Connection) -> bool:
    """Whether a lease's connection (and so the lease) still stands."""
    import psycopg

    try:
        conn.execute("select 1")
    except psycopg.Error:
        return False
    return True
