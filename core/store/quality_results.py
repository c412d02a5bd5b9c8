"""Each validation's summary and the Data Docs address, in the serving store.

Great Expectations' full results (every expectation, with its unexpected values) go to the
object store (``quality.result_store``), where ``dq-docs`` builds the Data Docs from every
process's. The serving API reads only Postgres, and has no MinIO user: it answers
``GET /v1/quality`` from these two small tables instead. Every validation the pipelines run
appends one row to ``dq_results``, and ``publish_docs`` records where the site is in
``dq_docs``. The serving API's ``/metrics`` exports each (layer, suite)'s latest row
(``serving.store_metrics``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import psycopg


class ResultSummary(Protocol):
    """What is kept of one validation (``quality.result.QualityResult`` is one)."""

    @property
    def layer(self) -> str: ...
    @property
    def suite(self) -> str: ...
    @property
    def run_name(self) -> str: ...
    @property
    def success(self) -> bool: ...
    @property
    def rows(self) -> int | None: ...
    @property
    def evaluated(self) -> int: ...
    @property
    def failed(self) -> int: ...
    @property
    def failures(self) -> tuple[str, ...]: ...
    @property
    def seconds(self) -> float: ...


KEEP_PER_SUITE = 50
"""Rows kept per (layer, suite): hourly runs must not grow the table without bound."""

DDL = [
    """create table if not exists dq_results (
        id bigserial primary key,
        layer text not null,
        suite text not null,
        run_name text not null,
        success boolean not null,
        rows bigint,
        evaluated integer not null,
        failed integer not null,
        failures jsonb not null,
        seconds double precision not null,
        validated_at timestamptz not null default now())""",
    "create index if not exists dq_results_latest on dq_results (layer, suite, id desc)",
    """create table if not exists dq_docs (
        id integer primary key default 1 check (id = 1),
        url text not null,
        published_at timestamptz not null default now())""",
]


def record(conn: psycopg.Connection, results: Iterable[ResultSummary]) -> None:
    """Append validations' summaries and prune what is older than ``KEEP_PER_SUITE``."""
    rows = list(results)
    if not rows:
        return
    with conn.transaction():
        for r in rows:
            conn.execute(
                "insert into dq_results (layer, suite, run_name, success, rows, evaluated, "
                "failed, failures, seconds) values (%s, %s, %s, %s, %s, %s, %s, %s, %s)",
                (
                    r.layer,
                    r.suite,
                    r.run_name,
                    r.success,
                    r.rows,
                    r.evaluated,
                    r.failed,
                    json.dumps(list(r.failures)),
                    r.seconds,
                ),
            )
            conn.execute(
                "delete from dq_results where layer = %s and suite = %s and id not in "
                "(select id from dq_results where layer = %s and suite = %s "
                "order by id desc limit %s)",
                (r.layer, r.suite, r.layer, r.suite, KEEP_PER_SUITE),
            )


def record_docs(conn: psycopg.Connection, url: str) -> None:
    conn.execute(
        "insert into dq_docs (id, url) values (1, %s) "
        "on conflict (id) do update set url = excluded.url, published_at = now()",
        (url,),
    )


def latest(conn: psycopg.Connection) -> list[dict[str, Any]]:
    """The last result of each (layer, suite), by layer then suite; nothing before the first
    validation. Reads only: the serving API calls it."""
    rows = conn.execute(
        "select distinct on (layer, suite) layer, suite, run_name, success, rows, evaluated, "
        "failed, failures, seconds, validated_at from dq_results "
        "order by layer, suite, id desc"
    ).fetchall()
    keys = (
        "layer",
        "suite",
        "run_name",
        "success",
        "rows",
        "evaluated",
        "failed",
        "failures",
        "seconds",
        "validated_at",
    )
    return [dict(zip(keys, row, strict=True)) for row in rows]


def docs(conn: psycopg.Connection) -> tuple[str, datetime] | None:
    """Where Data Docs were last published, and when; None before the first publication."""
    row = conn.execute("select url, published_at from dq_docs where id = 1").fetchone()
    return None if row is None else (str(row[0]), row[1])
