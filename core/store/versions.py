"""View versions and the alias readers follow.

A version is `building` while its rows are written, `ready` once complete and checked,
`published` while the alias points at it, then `retired` (rows dropped) or `failed`. The alias
moves in one transaction, together with whatever the hand-off must change at the same instant,
so a reader never sees half a version or a mix of two.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime

import psycopg

from core.catalog import MATCH_VIEWS, VIEW_NAMES
from core.store import state
from core.store.schema import batch_matches_table, batch_table, rows_per_view
from core.store.streams import LAMBDA_SPEED, kappa_stream
from core.times import optional_ms


@dataclass(frozen=True)
class Version:
    architecture: str
    version: int
    status: str
    cutoff: datetime | None
    logic_version: str | None

    @property
    def cutoff_ms(self) -> int | None:
        """The batch cutoff in epoch ms (None: a Kappa version, which has none)."""
        return optional_ms(self.cutoff)


def begin_version(
    conn: psycopg.Connection,
    architecture: str,
    *,
    cutoff: datetime | None,
    logic_version: str | None = None,
    quarantined: int | None = None,
) -> int:
    """Reserve the next version number, status `building`. ``quarantined``: the invalid
    records of the input a batch version read (None for a stream's version)."""
    with conn.transaction():
        conn.execute("select pg_advisory_xact_lock(hashtext('view_versions'))")
        row = conn.execute(
            "select coalesce(max(version), 0) + 1 from view_versions where architecture = %s",
            (architecture,),
        ).fetchone()
        version = int(row[0]) if row else 1
        conn.execute(
            "insert into view_versions "
            "(architecture, version, status, cutoff, logic_version, quarantined) "
            "values (%s, %s, 'building', %s, %s, %s)",
            (architecture, version, cutoff, logic_version, quarantined),
        )
    return version


def mark(
    conn: psycopg.Connection,
    architecture: str,
    version: int,
    status: str,
    row_counts: dict[str, int] | None = None,
) -> None:
    with conn.transaction():
        conn.execute(
            "update view_versions set status = %s, row_counts = coalesce(%s, row_counts) "
            "where architecture = %s and version = %s",
            (
                status,
                json.dumps(row_counts) if row_counts is not None else None,
                architecture,
                version,
            ),
        )


def current(conn: psycopg.Connection, architecture: str) -> Version | None:
    """The version the alias points at (what readers see)."""
    row = conn.execute(
        "select a.version, v.status, a.cutoff, v.logic_version from view_alias a "
        "left join view_versions v using (architecture, version) where a.architecture = %s",
        (architecture,),
    ).fetchone()
    if row is None:
        return None
    return Version(architecture, int(row[0]), row[1], row[2], row[3])


def live_stream(conn: psycopg.Connection, architecture: str) -> str | None:
    """The stream whose rows and progress readers of `architecture` see now: Lambda's speed
    layer, or the Kappa version the alias points at (None before there is one)."""
    if architecture == "lambda":
        return LAMBDA_SPEED
    live = current(conn, architecture)
    return None if live is None else kappa_stream(live.version)


def get(conn: psycopg.Connection, architecture: str, version: int) -> Version | None:
    row = conn.execute(
        "select version, status, cutoff, logic_version from view_versions "
        "where architecture = %s and version = %s",
        (architecture, version),
    ).fetchone()
    return None if row is None else Version(architecture, int(row[0]), row[1], row[2], row[3])


def building(conn: psycopg.Connection, architecture: str) -> list[Version]:
    """Versions still being built (a reprocess in flight, or one killed mid-way)."""
    rows = conn.execute(
        "select version, status, cutoff, logic_version from view_versions "
        "where architecture = %s and status = 'building' order by version",
        (architecture,),
    ).fetchall()
    return [Version(architecture, int(r[0]), r[1], r[2], r[3]) for r in rows]


def latest_ready(conn: psycopg.Connection, architecture: str) -> Version | None:
    """The newest complete version not yet published (a hand-off waits for it)."""
    row = conn.execute(
        "select version, status, cutoff, logic_version from view_versions "
        "where architecture = %s and status = 'ready' order by version desc limit 1",
        (architecture,),
    ).fetchone()
    if row is None:
        return None
    return Version(architecture, int(row[0]), row[1], row[2], row[3])


def switch_alias(conn: psycopg.Connection, target: Version) -> None:
    """Point readers at `target` and retire what it replaces. Call inside a transaction."""
    conn.execute(
        "insert into view_alias (architecture, version, cutoff) values (%s, %s, %s) "
        "on conflict (architecture) do update set version = excluded.version, "
        "cutoff = excluded.cutoff, switched_at = now()",
        (target.architecture, target.version, target.cutoff),
    )
    conn.execute(
        "update view_versions set status = 'published', published_at = now() "
        "where architecture = %s and version = %s",
        (target.architecture, target.version),
    )
    conn.execute(
        "update view_versions set status = 'retired', retired_at = now() "
        "where architecture = %s and version < %s and status in ('published', 'ready')",
        (target.architecture, target.version),
    )


def batch_row_counts(conn: psycopg.Connection, version: int) -> dict[str, int]:
    """How many rows each view's batch table holds for `version`."""
    return rows_per_view(conn, batch_table, "version", version)


def drop_batch_rows(conn: psycopg.Connection, keep_version: int) -> None:
    """Delete the rows of versions older than `keep_version` (they are retired)."""
    with conn.transaction():
        for view in VIEW_NAMES:
            conn.execute(f"delete from {batch_table(view)} where version < %s", (keep_version,))
        for view in MATCH_VIEWS:
            conn.execute(
                f"delete from {batch_matches_table(view)} where version < %s", (keep_version,)
            )
        state.drop_batch_partials(conn, keep_version)


def retired_with_output(
    conn: psycopg.Connection, architecture: str, stream_prefix: str
) -> list[int]:
    """Retired versions whose stream (``stream_prefix`` + number) still has progress, so rows
    and state, in the store: what is left to drop after a switch."""
    rows = conn.execute(
        "select v.version from view_versions v join stream_progress p "
        "on p.stream = %s || v.version::text "
        "where v.architecture = %s and v.status = 'retired' order by v.version",
        (stream_prefix, architecture),
    ).fetchall()
    return [int(row[0]) for row in rows]
