"""The application's writes to its user table, one transaction per change, so that each change
is a change event of its own (what `lk profiles` does).

A delete takes effect as of the time the application gives it: the row is re-stamped with that
time, then deleted, in one transaction. The change stream then carries the re-stamp (the same
segment, at that time) and the tombstone at that time, later in the log, which the tie rule of
docs/CONTRACT.md §2 makes the one that counts.

A caller waits until its changes are in the topic with `core.cdc.arrival`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from core.cdc.provision import TABLE
from core.events import ProfileChange, parse_profile_line
from core.settings import Settings

if TYPE_CHECKING:
    import psycopg


class ProfileTableError(ValueError):
    """A change the table refuses before anything is written; one line for users."""


def app_connection(settings: Settings) -> psycopg.Connection:
    """The application's login to its own database."""
    import psycopg

    s = settings
    return psycopg.connect(
        host=s.postgres_host or s.host,
        port=s.postgres_port,
        user=s.app_postgres_user,
        password=s.app_postgres_password,
        dbname=s.app_db,
        connect_timeout=10,
        autocommit=True,
    )


def read_changes(path: Path) -> tuple[list[ProfileChange], list[str]]:
    """The profile lines of `path` (as `lk generate` writes them), in file order, and where
    each is (`file:line`); a line that is not one raises, naming its number."""
    changes, where = [], []
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise ProfileTableError(f"cannot read {path}: {exc.strerror}") from exc
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            changes.append(parse_profile_line(orjson.loads(line)))
        except (orjson.JSONDecodeError, ValueError) as exc:
            raise ProfileTableError(f"{path}:{number}: {exc}") from exc
        where.append(f"{path}:{number}")
    return changes, where


def check(changes: Sequence[ProfileChange], present: set[str], where: Sequence[str]) -> None:
    """Refuse the changes before any is written: a negative time, or a delete of a user with
    no profile at that point (`present`: the users the table holds now)."""
    present = set(present)
    for change, place in zip(changes, where, strict=True):
        if change.updated_ts < 0:
            raise ProfileTableError(f"{place}: updated_ts must be >= 0, got {change.updated_ts}")
        if change.is_tombstone:
            if change.user_id not in present:
                raise ProfileTableError(f"{place}: no profile of user {change.user_id!r} to delete")
            present.discard(change.user_id)
        else:
            present.add(change.user_id)


_UPSERT = (
    f"insert into {TABLE} (user_id, segment, updated_ts) values (%s, %s, %s)"
    " on conflict (user_id) do update"
    " set segment = excluded.segment, updated_ts = excluded.updated_ts"
)


def upsert(conn: psycopg.Connection, change: ProfileChange) -> None:
    """A profile version written, in the caller's transaction."""
    conn.execute(_UPSERT, (change.user_id, change.segment, change.updated_ts))


def users(conn: psycopg.Connection) -> set[str]:
    return {row[0] for row in conn.execute(f"select user_id from {TABLE}")}


def write(conn: psycopg.Connection, change: ProfileChange) -> None:
    """One change, in a transaction of its own."""
    with conn.transaction():
        if change.is_tombstone:
            conn.execute(
                f"update {TABLE} set updated_ts = %s where user_id = %s",
                (change.updated_ts, change.user_id),
            )
            conn.execute(f"delete from {TABLE} where user_id = %s", (change.user_id,))
        else:
            upsert(conn, change)


def apply_all(
    settings: Settings,
    changes: Sequence[ProfileChange],
    where: Sequence[str] | None = None,
    rate: float | None = None,
) -> int:
    """Check every change, then write them in order, each its own transaction; the number of
    times it connected again after the connection was lost.

    When the server goes away mid-change (a restart), whether that change committed is
    unknown: the next connection writes it again. A version written twice reaches the topic
    twice, with the same time and value, which no view counts twice; a delete already done
    is found done (the check above saw the profile). With `rate`, at most that many changes a
    second, as an application writes them over time."""
    import psycopg

    where = where or [f"change {n}" for n in range(1, len(changes) + 1)]
    with app_connection(settings) as conn:
        check(changes, users(conn), where)
    retried, done = 0, 0
    started = time.monotonic()
    deadline = started + settings.cdc_wait_timeout_s
    while done < len(changes):
        try:
            with app_connection(settings) as conn:
                if (
                    retried
                    and changes[done].is_tombstone
                    and changes[done].user_id not in users(conn)
                ):
                    done += 1  # the delete had committed before the connection was lost
                while done < len(changes):
                    if rate and (ahead := started + done / rate - time.monotonic()) > 0:
                        time.sleep(ahead)
                    write(conn, changes[done])
                    done += 1
        except psycopg.OperationalError as exc:
            if time.monotonic() > deadline + (len(changes) / rate if rate else 0):
                raise ProfileTableError(
                    f"{where[done]}: the database did not answer: {exc}"
                ) from exc
            retried += 1
            time.sleep(0.5)
    return retried


def write_batch(settings: Settings, changes: Sequence[ProfileChange]) -> None:
    """Segment changes of several users in ONE transaction (the comparison's scenario)."""
    if any(change.is_tombstone for change in changes):
        raise ProfileTableError("a batch holds segment changes, not deletes")
    with app_connection(settings) as conn, conn.transaction():
        for change in changes:
            upsert(conn, change)
