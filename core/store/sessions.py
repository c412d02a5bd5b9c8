"""The stored sessions a micro-batch's sessions merge with: the stream's own, and the
published batch's that a later event could still continue (Lambda, across the cutoff)."""

from __future__ import annotations

from datetime import datetime

import psycopg

from core.times import to_timestamp

SessionRow = tuple
"""(user_id, session_start, session_end, events), as the `sessions` view's rows."""

IN_REACH = "session_end >= %s and session_start <= %s"
"""The stored sessions within a reach (``core.views.sessions.reach``), with its two times as
parameters (``reach_parameters``): what a micro-batch reads, and the same it replaces."""


def reach_parameters(reach: tuple[int, int]) -> tuple[datetime, datetime]:
    return to_timestamp(reach[0]), to_timestamp(reach[1])


def stream_sessions(
    conn: psycopg.Connection, stream: str, users: list[str], reach: tuple[int, int]
) -> list[SessionRow]:
    """The real-time sessions of `users` the stream has written that end at or after
    ``reach[0]`` and start at or before ``reach[1]`` (epoch ms; ``core.views.sessions.reach``)."""
    return [
        tuple(row)
        for row in conn.execute(
            "select user_id, session_start, session_end, events from rt_sessions "
            f"where stream = %s and user_id = any(%s) and {IN_REACH}",
            (stream, users, *reach_parameters(reach)),
        ).fetchall()
    ]


def open_batch_sessions(
    conn: psycopg.Connection, version: int, ending_from: datetime, users: list[str]
) -> list[SessionRow]:
    """The sessions of `users` in batch `version` that end at or after `ending_from`."""
    return [
        tuple(row)
        for row in conn.execute(
            "select user_id, session_start, session_end, events from batch_sessions "
            "where version = %s and session_end >= %s and user_id = any(%s)",
            (version, ending_from, users),
        ).fetchall()
    ]
