"""Schemas of the frames passed between layers, for the cases where a frame must be empty."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PROFILE_SCHEMA = "user_id string, segment string, updated_ts long, partition int, offset long"
"""`core.ingestion.parse_profiles`' output: profile versions with their log position."""


def empty_profiles(spark: SparkSession) -> DataFrame:
    """No profile versions yet (every order is then in segment `unknown`)."""
    return spark.createDataFrame([], PROFILE_SCHEMA)
