"""Where the comparison's reports are published, in the serving store.

`comparison.publish` uploads each run's report and its JSON to MinIO (beside the Data Docs)
and records their addresses here, with the run's verdict (`comparison.verdict`: a row per
question, as JSON); the serving API, which reads only Postgres, answers `GET /v1/comparison`
(and the `comparison_report` link of `GET /v1/quality`) from the latest row. Runs are started
by hand (`lk compare`, `lk demo`), a few a day at most, so every publication is kept: the
history says which report was current when.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import psycopg

DDL = [
    """create table if not exists comparison_reports (
        id bigserial primary key,
        url text not null,
        json_url text not null,
        published_at timestamptz not null default now())""",
    # Stores created before the report's verdict was kept beside its address.
    "alter table comparison_reports add column if not exists verdict jsonb",
]


@dataclass(frozen=True, slots=True)
class PublishedReport:
    url: str
    """The report's HTML page."""
    json_url: str
    """The numbers behind it (`comparison.json`)."""
    published_at: datetime
    verdict: list[dict[str, Any]] | None = None
    """The run's verdict, a row per question (`comparison.verdict.VerdictRow` as JSON); None
    for a report published before verdicts were kept."""


def record_report(
    conn: psycopg.Connection,
    url: str,
    json_url: str,
    verdict: Sequence[Mapping[str, Any]] | None = None,
) -> None:
    conn.execute(
        "insert into comparison_reports (url, json_url, verdict) values (%s, %s, %s)",
        (url, json_url, None if verdict is None else json.dumps([dict(row) for row in verdict])),
    )


def latest(conn: psycopg.Connection) -> PublishedReport | None:
    """The last report published; None before the first. Reads only: the serving API calls it."""
    row = conn.execute(
        "select url, json_url, published_at, verdict from comparison_reports "
        "order by id desc limit 1"
    ).fetchone()
    return None if row is None else PublishedReport(str(row[0]), str(row[1]), row[2], row[3])
