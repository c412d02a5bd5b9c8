"""Rows computed on Spark, written into the store from Spark's executors.

A batch version's views and a Kappa replay's history (its keyed state, rows and audit) are
millions of rows: they go from each task of the Spark job that computes them, over JDBC, in
parallel (one connection a task), never through the driver. Postgres's driver rewrites each
batch of inserts into multi-row statements (``Settings.postgres_jdbc_url``).

Such a write is not one transaction: what makes it exactly once is the caller's, a version or
stream that no reader sees until one transaction publishes it (``core.store.versions``,
``core.store.realtime``), and whose rows a retry deletes first.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from core.settings import Settings

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

BATCH_SIZE = 10_000
"""Rows per JDBC batch (one multi-row statement after the driver's rewrite)."""


def jdbc_properties(settings: Settings) -> dict[str, str]:
    return {
        "user": settings.postgres_user,
        "password": settings.postgres_password,
        "driver": "org.postgresql.Driver",
        "batchsize": str(BATCH_SIZE),
    }


def append(settings: Settings, table: str, frame: DataFrame) -> None:
    """Append `frame`'s rows to `table` (its columns by name), from the executors."""
    frame.write.jdbc(
        settings.postgres_jdbc_url, table, mode="append", properties=jdbc_properties(settings)
    )
