"""Bytes each architecture keeps, measured where they lie.

Lambda keeps an immutable master dataset (MinIO) and batch views beside its real-time view;
Kappa keeps the retained log (its records, read back from Kafka) and its view versions. Both
keep keyed stream state (Postgres) and stream state on MinIO. Rows in Postgres are measured as
the bytes of their tuples (`pg_column_size`), not the tables' pages, so that two architectures
sharing a table are told apart.
"""

from __future__ import annotations

from psycopg import sql

from comparison.figures import StoredBytes
from core.catalog import MATCH_VIEWS, VIEW_NAMES
from core.kafka_io import read_topic
from core.provision import s3_client
from core.settings import Settings
from core.store.connection import connect
from core.store.schema import (
    batch_matches_table,
    batch_table,
    realtime_matches_table,
    realtime_table,
)
from core.store.streams import KAPPA_PREFIX, LAMBDA_SPEED


def _bucket_bytes(settings: Settings, bucket: str, prefix: str = "") -> int:
    client = s3_client(settings)
    total = 0
    for page in client.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        total += sum(o["Size"] for o in page.get("Contents", []))
    return total


def _rows_bytes(settings: Settings, table: str, where: sql.Composable, *params: object) -> int:
    statement = (
        sql.SQL("select coalesce(sum(pg_column_size(t.*)), 0) from {} t where ").format(
            sql.Identifier(table)
        )
        + where
    )
    with connect(settings) as conn:
        row = conn.execute(statement, params).fetchone()
    return int(row[0]) if row else 0


def _stream_rows(settings: Settings, lambda_side: bool) -> tuple[int, int]:
    """(view rows, keyed state) bytes of the speed layer's stream, or of every Kappa version."""
    if lambda_side:
        where, param = sql.SQL("stream = %s"), LAMBDA_SPEED
    else:
        where, param = sql.SQL("stream like %s"), f"{KAPPA_PREFIX}%"
    tables = [realtime_table(v) for v in VIEW_NAMES] + [
        realtime_matches_table(v) for v in MATCH_VIEWS
    ]
    views = sum(_rows_bytes(settings, table, where, param) for table in tables)
    state = sum(_rows_bytes(settings, t, where, param) for t in ("stream_state", "stream_late"))
    return views, state


def _log_bytes(settings: Settings) -> int:
    """The keys and values of every record the topics retain, read back through Kafka: the
    broker may run elsewhere (in a pod of its own on Kubernetes), where its folders cannot be
    listed. Kafka's batch framing and indexes are left out, on both sides of the comparison."""
    return sum(
        len(record.key or b"") + len(record.value or b"")
        for topic in (settings.events_topic, settings.profiles_topic)
        for record in read_topic(settings, topic)
    )


def measure(settings: Settings) -> list[StoredBytes]:
    lambda_views, lambda_state = _stream_rows(settings, lambda_side=True)
    kappa_views, kappa_state = _stream_rows(settings, lambda_side=False)
    batch_tables = [batch_table(v) for v in VIEW_NAMES] + [
        batch_matches_table(v) for v in MATCH_VIEWS
    ]
    batch_views = sum(_rows_bytes(settings, table, sql.SQL("true")) for table in batch_tables)
    views_bucket = settings.views_bucket
    return [
        StoredBytes("lambda", "master dataset", _bucket_bytes(settings, settings.master_bucket)),
        StoredBytes("lambda", "batch views", batch_views),
        StoredBytes("lambda", "real-time view", lambda_views),
        StoredBytes("lambda", "stream state", lambda_state
                    + _bucket_bytes(settings, views_bucket, f"state/{LAMBDA_SPEED}")),
        StoredBytes("kappa", "retained log", _log_bytes(settings)),
        StoredBytes("kappa", "view versions", kappa_views),
        StoredBytes("kappa", "stream state", kappa_state
                    + _bucket_bytes(settings, views_bucket, f"state/{KAPPA_PREFIX}")),
    ]  # fmt: skip
