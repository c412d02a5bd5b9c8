"""Which master dataset snapshot each batch version read, and what was archived since.

A batch version reads the master dataset's `events` table at one Delta version, recorded here
(`core.store.batch_inputs`). The raw gate then checks exactly what the next
batch adds to what the published one saw: the records of the data files added to the table
since that snapshot (Delta's file lists, read from its log), read through their partitions so
that nothing else is scanned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from core.settings import Architecture, Settings
from core.store import batch_inputs, versions
from core.store.connection import connect

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

Partition = tuple[str, int]
"""A master dataset partition: (record_date ``YYYY-MM-DD``, record_hour 0-23)."""

_PARTITION = re.compile(r"/record_date=(\d{4}-\d{2}-\d{2})/record_hour=(\d{1,2})/")


def latest_version(spark: SparkSession, path: str) -> int:
    """The Delta table's current version."""
    from delta.tables import DeltaTable

    row = DeltaTable.forPath(spark, path).history(1).select("version").first()
    assert row is not None, f"{path} has no history"
    return int(row[0])


def read_at(spark: SparkSession, path: str, delta_version: int) -> DataFrame:
    return spark.read.format("delta").option("versionAsOf", delta_version).load(path)


def published_input(settings: Settings) -> int | None:
    """The master events' Delta version the published batch read (None: none published, or
    published before this was recorded)."""
    with connect(settings) as conn:
        current = versions.current(conn, Architecture.LAMBDA)
        return None if current is None else batch_inputs.read_by(conn, current.version)


def partitions_of(files: set[str]) -> set[Partition]:
    found = set()
    for path in files:
        match = _PARTITION.search(path)
        if match:
            found.add((match[1], int(match[2])))
    return found


@dataclass(frozen=True)
class Added:
    """The data files of a table that a snapshot lacks, and their partitions."""

    files: frozenset[str]
    partitions: list[Partition]
    everything: bool = False
    """No earlier snapshot to compare with: every file of the table is new."""


def added_since(
    spark: SparkSession, path: str, delta_version: int | None, at: int | None = None
) -> Added:
    """The data files in the table at version ``at`` (now, when None) but not at
    ``delta_version`` (every file when None, or when that version is no longer in the log),
    with their partitions, sorted."""
    now_table = spark.read.format("delta").load(path) if at is None else read_at(spark, path, at)
    now = set(now_table.inputFiles())
    before: set[str] | None = None
    if delta_version is not None:
        try:
            before = set(read_at(spark, path, delta_version).inputFiles())
        except Exception:
            # The log no longer reaches back there (or cannot be read): checking everything is
            # the safe answer, a gate never checks less than it should.
            before = None
    added = now - (before or set())
    return Added(frozenset(added), sorted(partitions_of(added)), everything=before is None)
