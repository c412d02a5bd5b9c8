"""The application's side of change data capture, made once per database (idempotent).

- A database of its own (`app_db`), beside the serving store on the same Postgres.
- Table `profiles(user_id primary key, segment, updated_ts)`, owned by the application's role.
  REPLICA IDENTITY FULL: a delete's change event then carries the whole deleted row, whose
  `updated_ts` stamps the tombstone (the time the application gave the delete).
- A heartbeat table the connector writes (`heartbeat.action.query`), so its slot's position
  moves on while `profiles` is idle.
- The connector's role: LOGIN REPLICATION, reading `profiles`, writing the heartbeat.
- A publication on `profiles` and the heartbeat table (the connector captures `profiles`
  alone); the connector creates its slot itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.settings import Settings
from core.store.connection import admin_connection

if TYPE_CHECKING:
    import psycopg

TABLE = "profiles"
HEARTBEAT_TABLE = "cdc_heartbeat"
HEARTBEAT_QUERY = (
    f"insert into {HEARTBEAT_TABLE} (id, beat) values (1, now()) "
    "on conflict (id) do update set beat = excluded.beat"
)


def _ensure_role(conn: psycopg.Connection, user: str, password: str, *, replication: bool) -> None:
    from psycopg import sql

    exists = conn.execute("select 1 from pg_roles where rolname = %s", (user,)).fetchone()
    verb = "alter" if exists else "create"
    conn.execute(
        sql.SQL("{} role {} login {} password {}").format(
            sql.SQL(verb),
            sql.Identifier(user),
            sql.SQL("replication" if replication else "noreplication"),
            sql.Literal(password),
        )
    )


def ensure_app_side(settings: Settings) -> None:
    """The database, its table, the roles and the publication (idempotent)."""
    from psycopg import sql

    s = settings
    with admin_connection(s) as conn:
        _ensure_role(conn, s.app_postgres_user, s.app_postgres_password, replication=False)
        _ensure_role(conn, s.cdc_postgres_user, s.cdc_postgres_password, replication=True)
        if not conn.execute("select 1 from pg_database where datname = %s", (s.app_db,)).fetchone():
            conn.execute(
                sql.SQL("create database {} owner {}").format(
                    sql.Identifier(s.app_db), sql.Identifier(s.app_postgres_user)
                )
            )
    app, cdc = sql.Identifier(s.app_postgres_user), sql.Identifier(s.cdc_postgres_user)
    publication = sql.Identifier(s.cdc_publication)
    with admin_connection(s, s.app_db) as conn, conn.transaction():
        conn.execute(
            sql.SQL(
                f"create table if not exists {TABLE} ("
                " user_id text primary key,"
                " segment text not null,"
                " updated_ts bigint not null check (updated_ts >= 0))"
            )
        )
        conn.execute(sql.SQL(f"alter table {TABLE} replica identity full"))
        conn.execute(
            sql.SQL(
                f"create table if not exists {HEARTBEAT_TABLE} "
                "(id int primary key, beat timestamptz not null)"
            )
        )
        conn.execute(sql.SQL(f"alter table {TABLE} owner to {{}}").format(app))
        database = sql.Identifier(s.app_db)
        conn.execute(sql.SQL("grant connect on database {} to {}").format(database, cdc))
        conn.execute(sql.SQL(f"grant select on {TABLE} to {{}}").format(cdc))
        heartbeat_grant = f"grant select, insert, update on {HEARTBEAT_TABLE} to {{}}"
        conn.execute(sql.SQL(heartbeat_grant).format(cdc))
        # The heartbeat table is published too, not captured (the connector's table list has
        # `profiles` alone): Postgres 15 sends no transaction without a published change, so
        # the heartbeat's writes would never reach the connector, whose slot would then stay
        # where the last profile change left it while the serving store writes WAL.
        if not conn.execute(
            "select 1 from pg_publication where pubname = %s", (s.cdc_publication,)
        ).fetchone():
            conn.execute(
                sql.SQL(f"create publication {{}} for table {TABLE}, {HEARTBEAT_TABLE}").format(
                    publication
                )
            )
        elif not conn.execute(
            "select 1 from pg_publication_tables where pubname = %s and tablename = %s",
            (s.cdc_publication, HEARTBEAT_TABLE),
        ).fetchone():
            conn.execute(
                sql.SQL(f"alter publication {{}} add table {HEARTBEAT_TABLE}").format(publication)
            )


def slot_retained_bytes(settings: Settings) -> int | None:
    """The WAL the connector's slot holds (bytes behind the server's current position), or
    None while there is no slot. What the chart's alert watches."""
    with admin_connection(settings) as conn:
        row = conn.execute(
            "select pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint"
            " from pg_replication_slots where slot_name = %s",
            (settings.cdc_slot,),
        ).fetchone()
    return None if row is None or row[0] is None else int(row[0])


def lsn(text: str) -> int:
    """A WAL position as Postgres writes it (`16/B374D848`), as a number."""
    high, _, low = text.partition("/")
    return (int(high, 16) << 32) + int(low, 16)


def slot_confirmed(settings: Settings) -> int | None:
    """The position up to which the connector has confirmed the slot's changes (None: no
    slot, or nothing confirmed yet)."""
    with admin_connection(settings) as conn:
        row = conn.execute(
            "select confirmed_flush_lsn::text from pg_replication_slots where slot_name = %s",
            (settings.cdc_slot,),
        ).fetchone()
    return None if row is None or row[0] is None else lsn(row[0])


def slot_active(settings: Settings) -> bool:
    """Whether a connector streams from the slot now."""
    with admin_connection(settings) as conn:
        row = conn.execute(
            "select active from pg_replication_slots where slot_name = %s", (settings.cdc_slot,)
        ).fetchone()
    return bool(row and row[0])


def drop_app_side(settings: Settings) -> None:
    """The slot and the database (with its publication) of a run that had its own
    (`namespaced`). Call once the connector has let go of the slot (`capture.stop`)."""
    from psycopg import sql

    with admin_connection(settings) as conn:
        conn.execute(
            "select pg_drop_replication_slot(slot_name) from pg_replication_slots"
            " where slot_name = %s and not active",
            (settings.cdc_slot,),
        )
        conn.execute(
            sql.SQL("drop database if exists {} with (force)").format(
                sql.Identifier(settings.app_db)
            )
        )
