"""The views (core.views) on both engines against the reference oracle (core.oracle).

The whole path runs on raw Kafka-shaped records: Spark's parse -> valid -> first_in_log, then
each view on Spark (as the batch layer computes it) and on DuckDB over the same events as
Arrow (as a stream's micro-batch computes it); both must give exactly the oracle's rows for all
five views, on generated workloads and on a hand-made log of boundary cases. Merging sessions
must give, from sessions already known plus new events, the sessions of all the events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, TimestampType

from batch_layer.job import batch_matches
from core.catalog import (
    MATCH_COLUMNS,
    MATCH_ORDER,
    MATCH_TIME_FIELDS,
    SESSION_GAP_MS,
    UNKNOWN_SEGMENT,
    VIEW_NAMES,
    VIEWS,
)
from core.events import ProfileChange, parse_profile_line
from core.ingestion import (
    first_in_log,
    parse_events,
    parse_profiles,
    valid_events,
)
from core.oracle import compute_views, load_jsonl_values, load_profiles_jsonl
from core.times import iso
from core.views import PARTIALS, compute_all, compute_matches, compute_view, keep
from core.views.logic_versions import logic_query
from core.views.query import on_duckdb, on_spark, with_timestamps
from tests.unit.test_spark_parsing import (
    PROFILE_PARTITIONS,
    SPARK_CONF,
    generated,
    kafka_frame,
    kafka_rows,
)

Row = dict[str, Any]


@pytest.fixture(scope="module", autouse=True)
def _parsing_conf(spark: SparkSession) -> Iterator[None]:
    for key, value in SPARK_CONF.items():
        spark.conf.set(key, value)
    yield


# --- the Spark path and its rows, in the oracle's form ------------------------------------------


def spark_events(spark: SparkSession, lines: Sequence[bytes | None]) -> DataFrame:
    """Valid, deduplicated events from raw event lines: parse -> valid -> first_in_log."""
    return first_in_log(valid_events(parse_events(kafka_frame(spark, kafka_rows(lines)))))


def spark_profiles(spark: SparkSession, lines: Sequence[bytes]) -> DataFrame:
    """Profile versions from lines in the ``lk produce --topic profiles`` form."""
    rows = kafka_rows(
        lines, topic="profiles", partitions=PROFILE_PARTITIONS, timestamp_field="updated_ts"
    )
    return parse_profiles(kafka_frame(spark, rows))


def _sort_key(spec_name: str) -> Any:
    columns = VIEWS[spec_name].columns
    return lambda row: tuple(row[c] for c in columns)


def view_rows(frame: DataFrame, name: str) -> list[Row]:
    """A view's rows as the oracle gives them: ISO timestamps, sorted by keys then time."""
    spec = VIEWS[name]
    assert tuple(frame.columns) == spec.columns
    selected = [
        F.unix_millis(c).alias(c) if c in spec.time_fields else F.col(c) for c in spec.columns
    ]
    rows = [
        {c: iso(r[c]) if c in spec.time_fields else r[c] for c in spec.columns}
        for r in frame.select(*selected).collect()
    ]
    return sorted(rows, key=_sort_key(name))


def duckdb_rows(table: pa.Table, name: str) -> list[Row]:
    """A view's rows from DuckDB (times in epoch ms) as the oracle gives them."""
    spec = VIEWS[name]
    assert tuple(table.column_names) == spec.columns
    rows = [
        {c: iso(r[c]) if c in spec.time_fields else r[c] for c in spec.columns}
        for r in table.to_pylist()
    ]
    return sorted(rows, key=_sort_key(name))


def duckdb_views(events: DataFrame, profiles: DataFrame) -> dict[str, list[Row]]:
    """Every view on DuckDB, from the same events and profiles as Arrow (a micro-batch's way)."""
    inputs = {"in_events": events.toArrow(), "in_profiles": profiles.toArrow()}
    with duckdb.connect() as con:
        return {
            name: duckdb_rows(on_duckdb(con, aggregate.view_query, **inputs), name)
            for name, aggregate in PARTIALS.items()
        }


def duckdb_matches(events: DataFrame, profiles: DataFrame) -> list[Row]:
    """The pattern's complex events on DuckDB, from the same events and profiles as Arrow."""
    query = PARTIALS["search_conversions"].matches_view_query
    assert query is not None
    inputs = {"in_events": events.toArrow(), "in_profiles": profiles.toArrow()}
    with duckdb.connect() as con:
        return match_rows(on_duckdb(con, query, **inputs).to_pylist())


def assert_views_match_oracle(
    spark: SparkSession,
    event_lines: Sequence[bytes | None],
    profile_lines: Sequence[bytes],
    profiles: Sequence[ProfileChange],
) -> dict[str, list[Row]]:
    """Every Spark view equals the oracle's, row for row; the Spark rows by view."""
    result = compute_views(event_lines, profiles)
    expected = result.views
    events = spark_events(spark, event_lines).cache()
    try:
        spark_profile_frame = spark_profiles(spark, profile_lines)
        frames = compute_all(events, spark_profile_frame)
        assert tuple(frames) == VIEW_NAMES
        got = {name: view_rows(frame, name) for name, frame in frames.items()}
        on_duck = duckdb_views(events, spark_profile_frame)
        spark_matches = spark_match_rows(
            compute_matches("search_conversions", events, spark_profile_frame)
        )
        duck_matches = duckdb_matches(events, spark_profile_frame)
    finally:
        events.unpersist()
    for name in VIEW_NAMES:
        want = sorted(expected[name], key=_sort_key(name))
        assert got[name] == want, f"{name}: Spark {len(got[name])} rows, oracle {len(want)}"
        assert on_duck[name] == want, (
            f"{name}: DuckDB {len(on_duck[name])} rows, oracle {len(want)}"
        )
    want_matches = sorted(result.matches, key=_match_order)
    assert spark_matches == want_matches, (
        f"matches: Spark {len(spark_matches)}, oracle {len(want_matches)}"
    )
    assert duck_matches == want_matches, (
        f"matches: DuckDB {len(duck_matches)}, oracle {len(want_matches)}"
    )
    got[MATCHES] = spark_matches
    return got


MATCHES = "search_conversions/matches"
"""``assert_views_match_oracle``'s answer: the pattern's complex events beside the views."""


def _match_order(row: Row) -> tuple[Any, ...]:
    return tuple(row[c] for c in MATCH_ORDER)


def match_rows(rows: Sequence[Row]) -> list[Row]:
    """Matches with epoch-ms times as the oracle gives them: ISO times, in reading order."""
    shown = [
        {c: iso(r[c]) if c in MATCH_TIME_FIELDS else r[c] for c in MATCH_COLUMNS} for r in rows
    ]
    return sorted(shown, key=_match_order)


def spark_match_rows(frame: DataFrame) -> list[Row]:
    """``compute_matches``' rows (timestamps) as the oracle gives them."""
    assert tuple(frame.columns) == MATCH_COLUMNS
    selected = [
        F.unix_millis(c).alias(c) if c in MATCH_TIME_FIELDS else F.col(c) for c in MATCH_COLUMNS
    ]
    return match_rows([r.asDict() for r in frame.select(*selected).collect()])


# --- generated workloads --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seed", "events", "options"),
    [
        (1, 2_500, {}),
        (2, 1_500, {"hours": 1.0, "users": 25, "profile_tie_fraction": 0.3}),
    ],
)
def test_views_equal_the_oracle_on_a_generated_workload(
    spark: SparkSession, tmp_path: Path, seed: int, events: int, options: dict[str, Any]
) -> None:
    events_path, profiles_path = generated(tmp_path, seed, events, **options)
    got = assert_views_match_oracle(
        spark,
        load_jsonl_values(events_path),
        load_jsonl_values(profiles_path),
        load_profiles_jsonl(profiles_path),
    )
    # The workload reaches the interesting parts of every view, and completes patterns.
    assert all(got[name] for name in VIEW_NAMES)
    assert got[MATCHES]
    assert any(row["segment"] == UNKNOWN_SEGMENT for row in got["revenue_by_segment"])
    assert any(0 < row["ctr"] < 1 for row in got["search_ctr"])
    assert any(row["events"] > 1 for row in got["sessions"])


def test_the_view_input_columns_are_all_the_views_and_logic_versions_read(
    spark: SparkSession, tmp_path: Path
) -> None:
    """The batch layer carries only `VIEW_INPUT_COLUMNS` through its deduplication: every view,
    after every logic version's filter, gives the same rows from them as from whole events."""
    from core.views import VIEW_INPUT_COLUMNS

    events_path, profiles_path = generated(tmp_path, 3, 400)
    whole = spark_events(spark, load_jsonl_values(events_path)).cache()
    profiles = spark_profiles(spark, load_jsonl_values(profiles_path))
    try:
        narrow = whole.select(*VIEW_INPUT_COLUMNS)
        assert set(narrow.columns) < set(whole.columns)  # the raw record's columns stay behind
        for version in ("1", "2"):
            logic = logic_query(version)
            for name in VIEW_NAMES:
                got = compute_view(name, keep(narrow, logic), profiles)
                want = compute_view(name, keep(whole, logic), profiles)
                assert view_rows(got, name) == view_rows(want, name), (version, name)
    finally:
        whole.unpersist()


# --- a hand-made log of boundary cases ----------------------------------------------------------

DAY = 20_758 * 86_400_000  # 2026-11-01T00:00:00Z
MIN = 60_000


def at(hour: int, minute: int = 0, second: int = 0, ms: int = 0) -> int:
    return DAY + ((hour * 60 + minute) * 60 + second) * 1000 + ms


def utc(clock: str) -> str:
    """``utc("10:01")`` -> ``2026-11-01T10:01:00Z``; a fraction is kept."""
    return f"2026-11-01T{clock}:00Z" if clock.count(":") == 1 else f"2026-11-01T{clock}Z"


def event(
    event_id: str,
    type_: str,
    user_id: str,
    ts: int,
    *,
    skew: int = 0,
    delay: int = 0,
    retry: int = 0,
    **fields: Any,
) -> bytes:
    """A valid event whose ``event_ts`` is ``ts``: ``skew`` moves the device clock and
    ``delay`` the sending, neither changes it; ``retry`` is a producer retry's extra time in
    transit, which moves ``received_ts`` and so ``event_ts`` too."""
    obj = {
        "event_id": event_id,
        "type": type_,
        "user_id": user_id,
        "device_ts": ts + skew,
        "sent_ts": ts + skew + delay + 100,
        "received_ts": ts + delay + 100 + retry,
        **fields,
    }
    return json.dumps(obj).encode()


def profile(user_id: str, ts: int, segment: str | None) -> bytes:
    if segment is None:
        return json.dumps({"user_id": user_id, "tombstone": True, "updated_ts": ts}).encode()
    return json.dumps({"user_id": user_id, "segment": segment, "updated_ts": ts}).encode()


EDGE_EVENTS = [
    # page_views: 10:00:59.999 and 10:01:00.000 are in different minutes; a skewed device.
    event("pv-1", "page_view", "u-1", at(10, 0, 59, 999), page="/a"),
    event("pv-2", "page_view", "u-1", at(10, 1), page="/a", skew=-2 * 3_600_000),
    event("pv-3", "page_view", "u-2", at(10, 1, 30), page="/b"),
    b"heartbeat",
    event("pv-3", "page_view", "u-2", at(10, 1, 30), page="/b", retry=5_000),  # counted once
    # search_ctr: a click at exactly +30 min counts, at +30 min + 1 ms not, before the search
    # not, two clicks once; the search's window decides, not the click's.
    event("s-1", "search", "u-1", at(10, 5), query="q"),
    event("s-2", "search", "u-2", at(10, 5), query="q"),
    event("s-3", "search", "u-3", at(10, 59, 59, 999), query="q"),
    event("s-4", "search", "u-3", at(10, 10), query="r"),
    event("s-5", "search", "u-1", at(11, 0), query="r"),
    event("c-0", "click", "u-3", at(10, 9), page="/p", search_id="s-4"),
    event("c-1", "click", "u-1", at(10, 35), page="/p", search_id="s-1"),
    event("c-2", "click", "u-2", at(10, 35, 0, 1), page="/p", search_id="s-2"),
    event("c-3", "click", "u-3", at(11, 0, 10), page="/p", search_id="s-3"),
    event("c-5", "click", "u-1", at(11, 1), page="/p", search_id="s-5"),
    event("c-6", "click", "u-1", at(11, 2), page="/p", search_id="s-5"),
    # search_conversions: another user's click counts (as for search_ctr) and opens the span of
    # the searcher's order; the clicker's own order converts nothing.
    event("s-7", "search", "u-9", at(11, 10), query="x"),
    event("c-7", "click", "u-2", at(11, 20), page="/p", search_id="s-7"),
    event("o-9", "order", "u-2", at(11, 25), amount_cents=10),
    event("o-10", "order", "u-9", at(11, 30), amount_cents=20),
    # revenue_by_segment: as of event time, a tie on updated_ts goes to the later record.
    event("o-1", "order", "u-5", at(10, 29, 59, 999), amount_cents=100),
    event("o-2", "order", "u-5", at(10, 30), amount_cents=200),
    event("o-3", "order", "u-6", at(10, 59), amount_cents=400),
    event("o-4", "order", "u-6", at(11, 0), amount_cents=800),  # the tombstone's ms
    event("o-5", "order", "u-7", at(11, 15), amount_cents=1_600),  # never profiled
    event("o-6", "order", "u-8", at(11, 30), amount_cents=3_200),  # profiled later
    event("o-7", "order", "u-5", at(11, 0), amount_cents=0, type_note="free"),
    event("o-8", "order", "u-5", at(10, 5), amount_cents=-5),  # invalid: negative
    # sessions: a gap of exactly 30 min stays in the session, 30 min + 1 ms starts another.
    event("x-1", "page_view", "u-4", at(12, 0), page="/s"),
    event("x-2", "page_view", "u-4", at(12, 30), page="/s"),
    event("x-3", "page_view", "u-4", at(13, 0, 0, 1), page="/s"),
    event("x-4", "page_view", "u-4", at(12, 15), page="/s", delay=40 * MIN),  # late, inside
]
EDGE_PROFILES = [
    profile("u-6", at(8), "trial"),
    profile("u-5", at(9), "free"),
    profile("u-5", at(10, 30), "pro"),
    profile("u-5", at(10, 30), "enterprise"),  # same ms, later in the log: wins
    profile("u-6", at(11), None),
    profile("u-8", at(12), "pro"),
]


def test_views_equal_the_oracle_on_boundary_cases(spark: SparkSession) -> None:
    changes = [parse_profile_line(json.loads(line)) for line in EDGE_PROFILES]
    got = assert_views_match_oracle(spark, EDGE_EVENTS, EDGE_PROFILES, changes)

    # And the values worked out by hand, so that the oracle is not the only judge.
    minutes = {(r["page"], r["window_start"]): r["count"] for r in got["page_views"]}
    assert minutes == {
        ("/a", utc("10:00")): 1,
        ("/a", utc("10:01")): 1,
        ("/b", utc("10:01")): 1,
        ("/s", utc("12:00")): 1,
        ("/s", utc("12:15")): 1,
        ("/s", utc("12:30")): 1,
        ("/s", utc("13:00")): 1,
    }
    ctr = {
        (r["query"], r["window_start"]): (r["searches"], r["clicks"], r["ctr"])
        for r in got["search_ctr"]
    }
    assert ctr == {
        ("q", utc("10:00")): (3, 2, 2 / 3),
        ("r", utc("10:00")): (1, 0, 0.0),
        ("r", utc("11:00")): (1, 1, 1.0),
        ("x", utc("11:00")): (1, 1, 1.0),
    }
    conversions = {
        (r["query"], r["window_start"]): (r["searches"], r["clicked"], r["converted"])
        for r in got["search_conversions"]
    }
    assert conversions == {
        ("q", utc("10:00")): (3, 2, 0),
        ("r", utc("10:00")): (1, 0, 0),
        ("r", utc("11:00")): (1, 1, 0),
        ("x", utc("11:00")): (1, 1, 1),
    }
    # Its complex events on Spark (the batch's), as the oracle's: the searcher's, by way of
    # another user's click.
    aggregate = PARTIALS["search_conversions"]
    assert aggregate.matches_query is not None
    partial = on_spark(
        spark,
        aggregate.partial_query,
        in_events=spark_events(spark, EDGE_EVENTS),
        in_profiles=spark_profiles(spark, EDGE_PROFILES),
    )
    matches = on_spark(spark, aggregate.matches_query, in_partial=partial).collect()
    assert [(m.search_id, m.user_id, m.click_id, m.order_id) for m in matches] == [
        ("s-7", "u-9", "c-7", "o-10")
    ]
    oracle = compute_views(EDGE_EVENTS, changes).matches
    assert [(m["search_id"], m["click_id"], m["order_id"]) for m in oracle] == [
        ("s-7", "c-7", "o-10")
    ]
    # Lambda's batch keeps the matches of searches before its cutoff: s-7's (11:10) with a
    # cutoff at 12:00; with one at 11:00 it is the speed layer's, and the batch has none.
    events, profiles = spark_events(spark, EDGE_EVENTS), spark_profiles(spark, EDGE_PROFILES)
    for cutoff, expected in ((at(12), oracle), (at(11), [])):
        [batch] = batch_matches(events, profiles, cutoff).values()
        assert spark_match_rows(batch) == expected, f"cutoff {iso(cutoff)}"
    revenue = {
        (r["segment"], r["window_start"]): r["revenue_cents"] for r in got["revenue_by_segment"]
    }
    assert revenue == {
        ("free", utc("10:00")): 100,
        ("enterprise", utc("10:00")): 200,
        ("trial", utc("10:00")): 400,
        (UNKNOWN_SEGMENT, utc("11:00")): 800 + 1_600 + 3_200 + 10 + 20,
        ("enterprise", utc("11:00")): 0,
    }
    u4 = [
        (r["session_start"], r["session_end"], r["events"])
        for r in got["sessions"]
        if r["user_id"] == "u-4"
    ]
    assert u4 == [(utc("12:00"), utc("12:30"), 3), (utc("13:00:00.001"), utc("13:00:00.001"), 1)]
    assert [(r["window_start"], r["users"]) for r in got["unique_users"]] == [
        (utc("10:00"), 5),
        (utc("11:00"), 8),
        (utc("12:00"), 1),
        (utc("13:00"), 1),
    ]


def test_view_schemas_follow_the_catalogue(spark: SparkSession) -> None:
    events = spark_events(spark, EDGE_EVENTS[:3])
    frames = compute_all(events, spark_profiles(spark, EDGE_PROFILES))
    types = {
        "window_start": TimestampType(),
        "window_end": TimestampType(),
        "session_start": TimestampType(),
        "session_end": TimestampType(),
        **dict.fromkeys(("ctr", "conversion_rate"), DoubleType()),
        **dict.fromkeys(("page", "query", "segment", "user_id"), StringType()),
        **dict.fromkeys(("count", "users", "events", "revenue_cents"), LongType()),
        **dict.fromkeys(("searches", "clicks", "clicked", "converted"), LongType()),
    }
    for name, frame in frames.items():
        assert tuple(frame.columns) == VIEWS[name].columns
        assert [(f.name, f.dataType) for f in frame.schema.fields] == [
            (c, types[c]) for c in VIEWS[name].columns
        ], name
    assert set(PARTIALS) == set(VIEW_NAMES)
    with pytest.raises(KeyError, match="no_such_view"):
        compute_view("no_such_view", events, events)


# --- merging sessions -----------------------------------------------------------------------------


SESSIONS = PARTIALS["sessions"]


def intervals(spark: SparkSession, rows: Sequence[tuple[str, int, int, int]]) -> DataFrame:
    """Sessions as ``merge_sessions`` takes them: times in epoch ms."""
    schema = "user_id string, session_start long, session_end long, events long"
    return spark.createDataFrame(list(rows), schema)


def merged(spark: SparkSession, before: DataFrame, fresh: DataFrame) -> DataFrame:
    """``merge`` of two sets of sessions, on Spark, dressed as the view."""
    rows = on_spark(spark, SESSIONS.merge_query, in_before=before, in_fresh=fresh)
    return with_timestamps(rows, VIEWS["sessions"])


def test_merge_sessions_bridges_nests_and_keeps_the_30_minute_boundary(
    spark: SparkSession,
) -> None:
    gap = SESSION_GAP_MS
    known = [
        ("u-1", at(10), at(10, 20), 4),
        ("u-1", at(11), at(11, 10), 2),
        ("u-2", at(10), at(10, 10), 3),
        ("u-3", at(10), at(10, 10), 3),
    ]
    new = [
        ("u-1", at(10, 40), at(10, 40), 1),  # 20 min after one, 20 before the next: bridges
        ("u-1", at(10, 5), at(10, 5), 1),  # inside a known session
        ("u-2", at(10, 10) + gap, at(10, 10) + gap, 1),  # exactly 30 min after: joins
        ("u-3", at(10, 10) + gap + 1, at(10, 10) + gap + 1, 1),  # 1 ms more: a new session
        ("u-3", at(9, 0), at(9, 50), 5),  # a session that contains another's start
        ("u-3", at(9, 20), at(9, 25), 2),  # nested in it
    ]
    rows = view_rows(merged(spark, intervals(spark, known), intervals(spark, new)), "sessions")
    assert [(r["user_id"], r["session_start"], r["session_end"], r["events"]) for r in rows] == [
        ("u-1", utc("10:00"), utc("11:10"), 8),
        ("u-2", utc("10:00"), utc("10:40"), 4),
        ("u-3", utc("09:00"), utc("10:10"), 10),
        ("u-3", utc("10:40:00.001"), utc("10:40:00.001"), 1),
    ]


def test_merging_known_sessions_with_new_events_equals_sessions_of_all_events(
    spark: SparkSession, tmp_path: Path
) -> None:
    events_path, _ = generated(tmp_path, seed=5, events=2_000, hours=2.0, users=20)
    lines = load_jsonl_values(events_path)
    parts = 3
    positions = spark.createDataFrame(
        [(row[3], row[4], n * parts // len(lines)) for n, row in enumerate(kafka_rows(lines))],
        "partition int, offset long, part int",
    )
    events = spark_events(spark, lines).join(positions, ["partition", "offset"]).cache()
    try:
        expected = compute_views(lines).views["sessions"]
        assert view_rows(compute_view("sessions", events, events), "sessions") == expected
        # As a stream would: the sessions so far, merged with each new part's sessions.
        known = intervals(spark, [])
        for part in range(parts):
            in_part = events.where(F.col("part") == part)
            new = on_spark(spark, SESSIONS.partial_query, in_events=in_part)
            known = on_spark(spark, SESSIONS.merge_query, in_before=known, in_fresh=new)
            known = known.localCheckpoint()  # each step's plan stays small
        assert view_rows(with_timestamps(known, VIEWS["sessions"]), "sessions") == expected
        assert len(expected) > 20
    finally:
        events.unpersist()
