"""The event suites on Spark: ``raw_events`` and ``master_partition`` (quality).

Good frames come out of the real parsing (``core.ingestion``), so the suites are checked
against the column names and Spark types the pipeline really produces; each kind of bad data
is one corrupted row in an otherwise good frame, and must fail with a reason that names it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from batch_layer.archiver import archived_rows
from batch_layer.pipeline import checked_events
from core.ingestion import parse_events, valid_events
from core.oracle import load_jsonl_values
from core.settings import Settings
from core.times import HOUR_MS, MINUTE_MS, parse_iso
from quality import QualityGateError, gate, validate
from tests.unit.test_spark_parsing import generated, kafka_frame, kafka_rows

T0 = parse_iso("2026-11-01T10:00:00Z")
DAY_MS = 24 * HOUR_MS


@pytest.fixture(scope="module")
def dq_settings(tmp_path_factory: pytest.TempPathFactory) -> Settings:
    home = tmp_path_factory.mktemp("dq-events")
    return Settings(home=home, stack_dir=home / "stack", dq_share_results=False)


def event(n: int, type_: str, ts: int, *, send_delay: int = 400, **fields: object) -> bytes:
    """A valid event whose event_ts is ``ts``, sent ``send_delay`` ms after it happened from a
    device whose clock is 2 s slow."""
    skew = -2000
    return json.dumps(
        {
            "event_id": f"e{n}",
            "type": type_,
            "user_id": f"u{n % 3}",
            "device_ts": ts + skew,
            "sent_ts": ts + send_delay + skew,
            "received_ts": ts + send_delay,
            **fields,
        }
    ).encode()


LINES = [
    event(1, "page_view", T0 + 1_000, page="/home"),
    event(2, "search", T0 + 2_000, query="shoes"),
    event(3, "click", T0 + 3_000, page="/p/1", search_id="e2"),
    event(4, "order", T0 + 4_000, amount_cents=1_250),
    event(5, "page_view", T0 + HOUR_MS + 5 * MINUTE_MS, page="/home"),
    event(6, "order", T0 + HOUR_MS + 6 * MINUTE_MS, amount_cents=0),
]


def parsed(spark: SparkSession, lines: list[bytes]) -> DataFrame:
    return parse_events(kafka_frame(spark, kafka_rows(lines)))


def raw_events(spark: SparkSession, lines: list[bytes] = LINES) -> DataFrame:
    return valid_events(parsed(spark, lines))


def master_rows(spark: SparkSession, lines: list[bytes] = LINES) -> DataFrame:
    """What the raw gate validates of the master dataset's events: the archiver's rows
    (``batch_layer.archiver.archived_rows``, without the Delta write), parsed as the gate
    parses them (``batch_layer.pipeline.checked_events``)."""
    return checked_events(archived_rows(kafka_frame(spark, kafka_rows(lines))))


def corrupt(df: DataFrame, event_id: str, column: str, value: Column) -> DataFrame:
    """``df`` with ``column`` set to ``value`` on one event's row only."""
    return df.withColumn(
        column, F.when(F.col("event_id") == event_id, value).otherwise(F.col(column))
    )


def persistent_rdds(spark: SparkSession) -> set[int]:
    """The ids of the RDDs Spark holds persisted now."""
    ids = spark.sparkContext._jsc.getPersistentRDDs().keySet()  # type: ignore[union-attr]
    return {int(i) for i in ids.toArray()}


@pytest.fixture(scope="module")
def good_events(spark: SparkSession) -> Iterator[DataFrame]:
    """``LINES`` parsed once (parsing is the slow part), cached for the module's tests."""
    df = raw_events(spark).persist()
    yield df
    df.unpersist()


@pytest.fixture(scope="module")
def good_master(spark: SparkSession) -> Iterator[DataFrame]:
    df = master_rows(spark).persist()
    yield df
    df.unpersist()


# --- raw_events ---------------------------------------------------------------------------------


def test_raw_events_pass_on_parsed_events(good_events: DataFrame, dq_settings: Settings) -> None:
    result = validate(
        "raw_events", good_events, settings=dq_settings, layer="lambda-batch", run_name="r1"
    )
    assert result.success, result.failures
    assert (result.suite, result.layer, result.failed) == ("raw_events", "lambda-batch", 0)
    assert result.rows == len(LINES)
    assert result.evaluated > 30


def test_raw_events_pass_on_a_generated_workload(
    spark: SparkSession, dq_settings: Settings, tmp_path: Path
) -> None:
    # Realistic disorder: clock skew, late (offline-buffered) events, duplicates, bad records.
    events_path, _ = generated(tmp_path, seed=7, events=1_500)
    df = raw_events(spark, load_jsonl_values(events_path))
    result = validate("raw_events", df, settings=dq_settings, layer="lambda-batch", run_name="gen")
    assert result.success, result.failures


def test_raw_events_flag_an_event_time_far_before_its_arrival_and_uncache(
    spark: SparkSession, dq_settings: Settings
) -> None:
    # Valid for the parser (device_ts <= sent_ts), but sent 30 days after it happened.
    stale = event(9, "page_view", T0 + 9_000, send_delay=30 * DAY_MS, page="/old")
    df = raw_events(spark, [*LINES, stale])
    before = persistent_rdds(spark)
    result = validate("raw_events", df, settings=dq_settings, layer="lambda-batch", run_name="r2")
    # What validate cached, it released: no RDD is persisted that was not before. (Not "the
    # same set": unpersisting a plan makes Spark rebuild, lazily, a cached plan of an earlier
    # test that contains it, so some of those may be gone.)
    assert persistent_rdds(spark) - before == set()
    assert not result.success
    assert result.failures == (
        "event_ts is at most 7 days before received_ts and at most 5 minutes after it: "
        f"1 of {len(LINES) + 1} rows unexpected, e.g. [{30 * DAY_MS}]",
    )


def test_raw_events_name_each_corruption(good_events: DataFrame, dq_settings: Settings) -> None:
    # One corrupted row per kind, in one frame: each check must count exactly its own row.
    df = good_events
    df = corrupt(df, "e4", "amount_cents", F.lit(-5).cast("long"))
    df = corrupt(df, "e1", "type", F.lit("purchase"))
    df = corrupt(df, "e3", "search_id", F.lit(None).cast("string"))
    df = corrupt(df, "e2", "user_id", F.lit(None).cast("string"))
    df = corrupt(df, "e5", "event_ts", F.col("event_ts") + 1)
    df = corrupt(df, "e6", "device_ts", F.col("sent_ts") + 1)
    result = validate("raw_events", df, settings=dq_settings, layer="lambda-batch", run_name="bad")
    assert not result.success
    rows = f"1 of {len(LINES)} rows unexpected"
    expected = [
        f"expect_column_values_to_not_be_null(column='user_id'): {rows}",
        f"expect_column_values_to_be_in_set(column='type', value_set=['page_view', 'search', "
        f"'click', 'order']): {rows}, e.g. ['purchase']",
        f"amount_cents is never negative: {rows}, e.g. [-5]",
        # e6 was sent 1 ms before it happened, by its own clock.
        f"device_ts <= sent_ts (an event is sent after it happened): {rows}, e.g. [-1]",
        "every event carries the fields its type requires (page_view: page, search: query, "
        f"click: page/search_id, order: amount_cents): {rows}, e.g. ['click without search_id']",
        # e5's event_ts is 1 ms off; e6's moved device_ts breaks the formula as well.
        "event_ts = device_ts + (received_ts - sent_ts) exactly: 2 of 6 rows unexpected",
    ]
    for reason in expected:
        assert any(failure.startswith(reason) for failure in result.failures), (
            reason,
            result.failures,
        )
    assert len(result.failures) == len(expected), result.failures


def test_raw_events_name_a_missing_column(good_events: DataFrame, dq_settings: Settings) -> None:
    result = validate(
        "raw_events",
        good_events.drop("received_ts"),
        settings=dq_settings,
        layer="lambda-batch",
        run_name="no-column",
    )
    assert not result.success
    assert "expect_column_to_exist(column='received_ts'): failed" in result.failures


# --- master_partition ---------------------------------------------------------------------------


def test_master_partition_passes_on_archived_rows(
    good_master: DataFrame, dq_settings: Settings
) -> None:
    result = validate(
        "master_partition", good_master, settings=dq_settings, layer="lambda-batch", run_name="m1"
    )
    assert result.success, result.failures
    assert result.rows == len(LINES)


def test_master_partition_flags_a_row_in_the_wrong_hour(
    good_master: DataFrame, dq_settings: Settings
) -> None:
    df = corrupt(good_master, "e1", "record_hour", F.lit(11))
    result = validate(
        "master_partition", df, settings=dq_settings, layer="lambda-batch", run_name="m2"
    )
    assert not result.success
    assert result.failures == (
        "record_date/record_hour are the UTC date and hour of the Kafka timestamp: 1 of 6 rows "
        "unexpected, e.g. ['2026-11-01/11 for Kafka timestamp 2026-11-01T10:00:01.400Z']",
    )


def test_master_partition_flags_an_empty_partition_and_a_record_archived_twice(
    good_master: DataFrame, dq_settings: Settings
) -> None:
    empty = good_master.where(F.lit(False))
    result = validate(
        "master_partition", empty, settings=dq_settings, layer="lambda-batch", run_name="m3"
    )
    assert not result.success
    assert "the records checked hold at least one valid event: observed 0" in result.failures

    twice = good_master.unionByName(good_master.where(F.col("event_id") == "e1"))
    result = validate(
        "master_partition", twice, settings=dq_settings, layer="lambda-batch", run_name="m4"
    )
    assert len(result.failures) == 1, result.failures
    assert result.failures[0].startswith(
        "each Kafka record (partition, offset) is archived once: 2 of 7 rows unexpected"
    )


# --- the API ------------------------------------------------------------------------------------


def test_gate_raises_with_the_reasons_and_passes_good_data(
    good_events: DataFrame, dq_settings: Settings
) -> None:
    good = good_events
    assert gate("raw_events", good, settings=dq_settings, layer="kappa", run_name="g1").success
    bad = corrupt(good, "e4", "amount_cents", F.lit(-1).cast("long"))
    with pytest.raises(QualityGateError, match=r"raw_events@kappa failed: amount_cents") as info:
        gate("raw_events", bad, settings=dq_settings, layer="kappa", run_name="g2")
    assert not info.value.result.success


def test_validate_refuses_what_it_cannot_check(dq_settings: Settings) -> None:
    with pytest.raises(ValueError, match="unknown quality suite 'raw'"):
        validate("raw", pd.DataFrame(), settings=dq_settings, layer="x", run_name="r")
    with pytest.raises(TypeError, match="validates a Spark DataFrame"):
        validate("raw_events", pd.DataFrame(), settings=dq_settings, layer="x", run_name="r")
    with pytest.raises(ValueError, match="layer must match"):
        validate("raw_events", pd.DataFrame(), settings=dq_settings, layer="a b", run_name="r")
