"""Which snapshot of the master dataset each batch version read (table `batch_inputs`).

The raw gate checks exactly what the next batch adds to what the published one saw, so the
snapshot (the master events' Delta version) is kept with the batch version that read it.
"""

from __future__ import annotations

import psycopg

DDL = [
    """create table if not exists batch_inputs (
        version integer primary key,
        master_events_version bigint not null)""",
]


def record(conn: psycopg.Connection, version: int, master_events_version: int) -> None:
    with conn.transaction():
        conn.execute(
            "insert into batch_inputs (version, master_events_version) values (%s, %s) "
            "on conflict (version) do update "
            "set master_events_version = excluded.master_events_version",
            (version, master_events_version),
        )


def read_by(conn: psycopg.Connection, version: int) -> int | None:
    """The master events' Delta version batch `version` read (None: not recorded)."""
    row = conn.execute(
        "select master_events_version from batch_inputs where version = %s", (version,)
    ).fetchone()
    return None if row is None else int(row[0])
