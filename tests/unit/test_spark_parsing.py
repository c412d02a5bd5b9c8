"""Spark validation (core.ingestion) against the Python spec (core.events.parse_event).

Every record must get the same reason in Spark as in Python and, when valid, the same typed
fields. Records are built in memory as the Kafka source gives them: keyed by ``user_id`` as
``lk produce`` keys them, a partition from the key, offsets in file order per partition.

The helpers at the top are shared with ``test_spark_views.py``.
"""

from __future__ import annotations

import json
import zlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from core.events import (
    DEVICE_AFTER_SENT,
    NEGATIVE_AMOUNT,
    NOT_AN_OBJECT,
    NOT_JSON,
    UNKNOWN_TYPE,
    Event,
    Rejected,
    missing_field,
    parse_event,
    profile_from_record,
    wrong_type,
)
from core.ingestion import (
    EVENT_COLUMNS,
    EVENT_FIELDS,
    KAFKA_COLUMNS,
    MAX_EVENT_TS,
    MIN_EVENT_TS,
    PROFILE_COLUMNS,
    QUARANTINE_COLUMNS,
    SPARK_CONF,
    first_in_log,
    parse_events,
    parse_profiles,
    quarantine,
    rejected_profiles,
    valid_events,
)
from core.oracle import load_jsonl_values
from core.workload import WorkloadSpec, default_profiles_path, generate

EVENT_PARTITIONS = 6
PROFILE_PARTITIONS = 3
RAW_SCHEMA = "key binary, value binary, topic string, partition int, offset long, timestamp_ms long"

# --- shared helpers ---------------------------------------------------------------------------


@pytest.fixture(scope="module", autouse=True)
def _parsing_conf(spark: SparkSession) -> Iterator[None]:
    """The session settings core.ingestion requires (see ``SPARK_CONF``)."""
    for key, value in SPARK_CONF.items():
        spark.conf.set(key, value)
    yield


def kafka_rows(
    lines: Sequence[bytes | None],
    *,
    topic: str = "events",
    partitions: int = EVENT_PARTITIONS,
    timestamp_field: str = "received_ts",
) -> list[tuple[Any, ...]]:
    """The records ``lk produce`` would write for ``lines``, with Kafka's log positions.

    A line that is a JSON object is keyed by its string ``user_id`` and timestamped with its
    integer ``timestamp_field``; ``{"tombstone": true, ...}`` becomes a NULL value. A key picks
    the partition (crc32, deterministic); keyless records go round robin. Offsets follow the
    file order within each partition. A record without a timestamp gets the previous one.
    """
    offsets: Counter[int] = Counter()
    rows: list[tuple[Any, ...]] = []
    last_ts = 0
    for number, line in enumerate(lines):
        key: bytes | None = None
        value = line
        ts = last_ts
        try:
            obj = json.loads(line) if line is not None else None
        except (ValueError, RecursionError):  # lk produce: a non-JSON line goes unkeyed
            obj = None
        if isinstance(obj, dict):
            user_id = obj.get("user_id")
            key = user_id.encode() if isinstance(user_id, str) else None
            stamp = obj.get(timestamp_field)
            if isinstance(stamp, int) and not isinstance(stamp, bool) and 0 <= stamp < 2**63:
                ts = stamp
            if obj.get("tombstone") is True:
                value = None
        partition = zlib.crc32(key) % partitions if key is not None else number % partitions
        rows.append((key, value, topic, partition, offsets[partition], ts))
        offsets[partition] += 1
        last_ts = ts
    return rows


def kafka_frame(spark: SparkSession, rows: Sequence[tuple[Any, ...]]) -> DataFrame:
    """A DataFrame with the Kafka source's columns from ``kafka_rows``."""
    frame = spark.createDataFrame(list(rows), RAW_SCHEMA)
    return frame.withColumn("timestamp", F.timestamp_millis("timestamp_ms")).select(*KAFKA_COLUMNS)


def generated(tmp_path: Path, seed: int, events: int, **kw: Any) -> tuple[Path, Path]:
    """A generated workload: (events file, profiles file)."""
    events_path = tmp_path / f"w{seed}.jsonl"
    profiles_path = default_profiles_path(events_path)
    generate(WorkloadSpec(seed=seed, events=events, **kw), events_path, profiles_path)
    return events_path, profiles_path


def event_time_ms(event_ts: int) -> int | None:
    """``event_time`` in ms: ``event_ts`` when it is in years 1-9999, else NULL."""
    return event_ts if MIN_EVENT_TS <= event_ts <= MAX_EVENT_TS else None


def _python_view(value: bytes | None) -> tuple[str | None, tuple[Any, ...] | None]:
    """(reason, typed fields + event_ts) by core.events."""
    parsed = parse_event(value)
    if isinstance(parsed, Rejected):
        return parsed.reason, None
    fields = tuple(getattr(parsed, name) for name in EVENT_FIELDS)
    return None, (*fields, parsed.event_ts)


def _spark_view(parsed: DataFrame) -> dict[tuple[int, int], tuple[str | None, tuple[Any, ...]]]:
    """(partition, offset) -> (reason, typed fields + event_ts + event_time in ms)."""
    columns = [*EVENT_FIELDS, "event_ts"]
    rows = parsed.select(
        "partition",
        "offset",
        "reason",
        *columns,
        F.unix_millis("event_time").alias("event_time_ms"),
    ).collect()
    return {
        (r["partition"], r["offset"]): (
            r["reason"],
            (*(r[c] for c in columns), r["event_time_ms"]),
        )
        for r in rows
    }


def assert_conforms(spark: SparkSession, lines: Sequence[bytes | None]) -> dict[str | None, int]:
    """Spark's reason and typed fields equal Python's for every line; the reasons' counts."""
    rows = kafka_rows(lines)
    got = _spark_view(parse_events(kafka_frame(spark, rows)))
    assert len(got) == len(lines)
    mismatches = []
    reasons: Counter[str | None] = Counter()
    for line, row in zip(lines, rows, strict=True):
        reason, fields = _python_view(line)
        reasons[reason] += 1
        spark_reason, spark_fields = got[(row[3], row[4])]
        expected_fields = (
            (*fields, event_time_ms(fields[-1]))
            if fields is not None
            else (None,) * (len(EVENT_FIELDS) + 2)
        )
        if (spark_reason, spark_fields) != (reason, expected_fields):
            mismatches.append((line, (reason, expected_fields), (spark_reason, spark_fields)))
    assert not mismatches, f"{len(mismatches)} records differ, e.g. {mismatches[:3]}"
    return dict(reasons)


def spark_reasons(spark: SparkSession, values: Sequence[bytes | None]) -> list[str | None]:
    """Spark's reason for each value, in order."""
    rows = kafka_rows(values)
    got = _spark_view(parse_events(kafka_frame(spark, rows)))
    return [got[(row[3], row[4])][0] for row in rows]


def _bytes(value: bytes | bytearray | None) -> bytes | None:
    return None if value is None else bytes(value)


# --- hand-made edge cases ---------------------------------------------------------------------

T = 1_793_520_000_000  # 2026-11-01T08:00:00Z
BASE: dict[str, Any] = {
    "event_id": "e-1",
    "type": "page_view",
    "user_id": "u-1",
    "page": "/home",
    "device_ts": T - 5_000,
    "sent_ts": T - 4_000,
    "received_ts": T + 250,
}
_DROP = object()


def ev(**changes: Any) -> bytes:
    """BASE with fields changed (``_DROP`` removes one), as compact JSON bytes."""
    obj = {**BASE, **changes}
    return json.dumps({k: v for k, v in obj.items() if v is not _DROP}).encode()


def raw(text: str) -> bytes:
    return text.encode()


def compact(**changes: Any) -> bytes:
    """``ev`` without whitespace: the form ``core.ingestion`` reads on its fast path."""
    return json.dumps(json.loads(ev(**changes)), separators=(",", ":")).encode()


VALID_TYPES = {
    "page_view": ev(),
    "search": ev(event_id="e-2", type="search", page=_DROP, query="laptop"),
    "click": ev(event_id="e-3", type="click", search_id="e-2"),
    "order": ev(event_id="e-4", type="order", page=_DROP, amount_cents=1999),
}
EDGE_CASES: list[tuple[str, bytes | None, str | None]] = [
    # (label, record value, the reason both must give)
    *((f"valid {name}", value, None) for name, value in VALID_TYPES.items()),
    ("valid, extra and unrelated fields ignored", ev(query=5, amount_cents=-3, x=[1]), None),
    ("valid, free order", ev(type="order", page=_DROP, amount_cents=0), None),
    ("valid, device_ts == sent_ts", ev(device_ts=T, sent_ts=T), None),
    (
        "valid, -0 is the integer 0",
        raw(ev().decode().replace('"sent_ts": ', '"x": -0, "sent_ts": ')),
        None,
    ),
    ("valid, surrounding JSON whitespace", b" \t\r\n" + ev() + b"\r\n ", None),
    ("valid, escaped names and values", raw(ev().decode().replace('"page"', '"p\\u0061ge"')), None),
    ("valid, duplicate key: last wins", raw('{"page": 1, ' + ev().decode()[1:]), None),
    ("valid, non-ASCII escapes", ev(page="/caf\u00e9/\U0001f600"), None),
    ("valid, non-ASCII UTF-8", ev(page="/x").replace(b"/x", "/café/😀".encode()), None),
    ("valid, int64 bounds", ev(device_ts=-(2**63), sent_ts=2**63 - 1, received_ts=2**63 - 1), None),
    ("valid, nested brackets in strings", ev(page="/a{b}[c]", query='}]"'), None),
    (
        "valid, nested unrelated object",
        raw('{"ctx": {"a": [1, {"b": "}"}]}, ' + ev().decode()[1:]),
        None,
    ),
    # The compact form (read with from_json when the text is a flat object of known fields):
    # the same answers as the exact reading.
    ("compact, valid", compact(), None),
    ("compact, duplicate key: last wins", raw('{"page":"/a",' + compact().decode()[1:]), None),
    (
        "compact, duplicate key: a last null wins",
        raw(compact().decode()[:-1] + ',"page":null}'),
        missing_field("page"),
    ),
    ("compact, 18 and 19 digits", compact(amount_cents=10**17, received_ts=10**18), None),
    ("compact, -0", raw(compact().decode().replace('"device_ts":', '"device_ts":-0,"x":')), None),
    ("compact, trailing NEL", compact() + "\u0085".encode(), NOT_JSON),
    ("compact, trailing LINE SEPARATOR", compact() + "\u2028".encode(), NOT_JSON),
    ("compact, trailing newline", compact() + b"\n", None),
    ("trailing NEL after spaced JSON", ev() + "\u0085".encode(), NOT_JSON),
    (
        "trailing NEL after a nested object",
        raw('{"x": [1], ' + ev().decode()[1:] + "\u0085"),
        NOT_JSON,
    ),
    ("number, then NEL", raw("42\u0085"), NOT_JSON),
    ("compact, tab inside a string", compact(page="/x").replace(b"/x", b"/\t"), NOT_JSON),
    ("compact, numeric event_id", compact(event_id=12), wrong_type("event_id")),
    ("compact, string device_ts", compact(device_ts="12"), wrong_type("device_ts")),
    ("compact, empty page", compact(page=""), missing_field("page")),
    ("null value", None, NOT_JSON),
    ("empty value", b"", NOT_JSON),
    ("whitespace only", b"  \n", NOT_JSON),
    ("truncated JSON", ev()[:-5], NOT_JSON),
    ("bare words", b"heartbeat", NOT_JSON),
    ("invalid UTF-8 byte", ev(page="/x").replace(b"/x", b"/\xff"), NOT_JSON),
    ("UTF-8 encoded surrogate", ev(page="/x").replace(b"/x", b"/\xed\xa0\x80"), NOT_JSON),
    ("overlong UTF-8", ev(page="/x").replace(b"/x", b"/\xc0\xaf"), NOT_JSON),
    ("UTF-8 BOM", b"\xef\xbb\xbf" + ev(), NOT_JSON),
    ("NaN", raw(ev().decode().replace('"page"', '"x": NaN, "page"')), NOT_JSON),
    ("Infinity", raw(ev().decode().replace('"page"', '"x": -Infinity, "page"')), NOT_JSON),
    ("single quotes", raw(ev().decode().replace('"', "'")), NOT_JSON),
    ("trailing comma", raw(ev().decode()[:-1] + ", }"), NOT_JSON),
    ("raw control character in a string", ev(page="/x").replace(b"/x", b"/\x01"), NOT_JSON),
    ("trailing garbage", ev() + b" x", NOT_JSON),
    ("two documents", ev() + ev(), NOT_JSON),
    ("trailing brace", ev() + b"}", NOT_JSON),
    ("trailing NUL", ev() + b"\x00", NOT_JSON),
    ("trailing form feed", ev() + b"\x0c", NOT_JSON),
    ("trailing comment", ev() + b" /* c */", NOT_JSON),
    ("nested, then trailing document", raw('{"x": [{}]}, ' + ev().decode()), NOT_JSON),
    ("array, then trailing bracket", b"[1]]", NOT_JSON),
    ("string, then garbage", b'"a" "b"', NOT_JSON),
    ("JSON array", raw(json.dumps(list(json.loads(ev()).values()))), NOT_AN_OBJECT),
    ("JSON string holding an object", raw(json.dumps(ev().decode())), NOT_AN_OBJECT),
    ("JSON number", b"42", NOT_AN_OBJECT),
    ("JSON null", b"null", NOT_AN_OBJECT),
    ("JSON true", b" true ", NOT_AN_OBJECT),
    ("missing event_id", ev(event_id=_DROP), missing_field("event_id")),
    ("null event_id", ev(event_id=None), missing_field("event_id")),
    ("empty event_id", ev(event_id=""), missing_field("event_id")),
    ("missing everything", b"{}", missing_field("event_id")),
    ("empty-string integer is missing", ev(sent_ts=""), missing_field("sent_ts")),
    ("null received_ts", ev(received_ts=None), missing_field("received_ts")),
    ("numeric event_id", ev(event_id=12), wrong_type("event_id")),
    ("bool type", ev(type=True), wrong_type("type")),
    ("object user_id", ev(user_id={"id": "u-1"}), wrong_type("user_id")),
    ("array user_id", ev(user_id=["u-1"]), wrong_type("user_id")),
    ("bool device_ts", ev(device_ts=True), wrong_type("device_ts")),
    (
        "float 1.0 device_ts",
        raw(ev().decode().replace(str(T - 5_000), f"{T - 5_000}.0")),
        wrong_type("device_ts"),
    ),
    (
        "exponent device_ts",
        raw(ev().decode().replace(str(T - 5_000), "1e12")),
        wrong_type("device_ts"),
    ),
    ("numeric-string sent_ts", ev(sent_ts=str(T)), wrong_type("sent_ts")),
    ("integer above int64", ev(received_ts=2**63), wrong_type("received_ts")),
    ("integer below int64", ev(received_ts=-(2**63) - 1), wrong_type("received_ts")),
    ("40-digit integer", ev(received_ts=10**40), wrong_type("received_ts")),
    (
        "order of checks: event_id before device_ts",
        ev(event_id=1, device_ts="x"),
        wrong_type("event_id"),
    ),
    ("unknown type", ev(type="add_to_cart"), UNKNOWN_TYPE),
    ("type is case-sensitive", ev(type="PageView"), UNKNOWN_TYPE),
    ("unknown type before its fields", ev(type="scroll", page=_DROP), UNKNOWN_TYPE),
    ("page_view without page", ev(page=_DROP), missing_field("page")),
    ("page_view with empty page", ev(page=""), missing_field("page")),
    ("search without query", ev(type="search"), missing_field("query")),
    ("search with a list query", ev(type="search", query=["laptop"]), wrong_type("query")),
    ("click without page", ev(type="click", page=_DROP, search_id="s"), missing_field("page")),
    ("click without search_id", ev(type="click"), missing_field("search_id")),
    ("click, page checked before search_id", ev(type="click", page=404), wrong_type("page")),
    ("order without amount", ev(type="order"), missing_field("amount_cents")),
    ("order with a float amount", ev(type="order", amount_cents=19.99), wrong_type("amount_cents")),
    (
        "order with a string amount",
        ev(type="order", amount_cents="1999"),
        wrong_type("amount_cents"),
    ),
    ("order with a bool amount", ev(type="order", amount_cents=True), wrong_type("amount_cents")),
    ("negative amount", ev(type="order", amount_cents=-1), NEGATIVE_AMOUNT),
    (
        "negative amount before device_ts",
        ev(type="order", amount_cents=-5, device_ts=T),
        NEGATIVE_AMOUNT,
    ),
    ("device_ts after sent_ts", ev(device_ts=T - 3_999), DEVICE_AFTER_SENT),
    (
        "case of field names matters",
        raw(ev().decode().replace('"event_id"', '"Event_ID"')),
        missing_field("event_id"),
    ),
    # What Jackson (Spark's JSON parser) refuses but Python accepts: the same reasons anyway.
    ("lone surrogate escape in an unrelated field", ev(x="\ud800"), None),
    ("lone surrogate escape in the page", ev(page="/\udc00"), None),
    ("escaped backslash before u", raw(ev().decode().replace('"/home"', '"\\\\ud800"')), None),
    ("surrogate pair escape", raw(ev().decode().replace('"/home"', '"\\ud83d\\ude00"')), None),
    (
        "2000-digit integer in an unrelated field",
        raw(ev().decode()[:-1] + ', "x": ' + "7" * 2000 + "}"),
        None,
    ),
    (
        "2000-digit integer as device_ts",
        raw(ev().decode().replace(str(T - 5_000), "-" + "7" * 2000)),
        wrong_type("device_ts"),
    ),
    (
        "integer beyond Python's digit limit",
        raw(ev().decode()[:-1] + ', "x": ' + "7" * 5000 + "}"),
        NOT_JSON,
    ),
    ("3000-digit float", raw(ev().decode()[:-1] + ', "x": 0.' + "3" * 3000 + "}"), None),
    ("huge exponent", raw(ev().decode()[:-1] + ', "x": 1e999999}'), None),
    ("60000-character key", raw(ev().decode()[:-1] + ', "' + "k" * 60_000 + '": 1}'), None),
    ("lone surrogate, then trailing garbage", ev(x="\ud800") + b" x", NOT_JSON),
    (
        "nested 800 deep in an unrelated field",
        raw('{"x": ' + "[" * 800 + "]" * 800 + ", " + ev().decode()[1:]),
        None,
    ),
    ("nested 1500 deep", raw("[" * 1500 + "]" * 1500), NOT_JSON),
]


def test_spark_gives_the_python_reason_and_fields_on_every_edge_case(spark: SparkSession) -> None:
    values = [value for _, value, _ in EDGE_CASES]
    for label, value, reason in EDGE_CASES:
        assert _python_view(value)[0] == reason, f"the spec itself: {label}"
    rows = kafka_rows(values)
    got = _spark_view(parse_events(kafka_frame(spark, rows)))
    wrong = []
    for (label, value, reason), row in zip(EDGE_CASES, rows, strict=True):
        spark_reason, spark_fields = got[(row[3], row[4])]
        _, fields = _python_view(value)
        if spark_reason != reason:
            wrong.append(f"{label}: Spark {spark_reason!r}, expected {reason!r}")
        elif fields is not None and "surrogate escape" not in label:
            expected = (*fields, event_time_ms(fields[-1]))
            if spark_fields != expected:
                wrong.append(f"{label}: Spark fields {spark_fields}, expected {expected}")
    assert not wrong, "\n".join(wrong)


def test_a_lone_surrogate_becomes_the_replacement_character(spark: SparkSession) -> None:
    parsed = parse_events(kafka_frame(spark, kafka_rows([ev(page="/\udc00")])))
    assert [(r.reason, r.page) for r in parsed.collect()] == [(None, "/\ufffd")]


def test_event_ts_is_exact_or_null_and_event_time_only_in_years_1_to_9999(
    spark: SparkSession,
) -> None:
    big, low = 2**63 - 1, -(2**63)
    values = [  # (device_ts, sent_ts, received_ts): event_ts = device + (received - sent)
        ev(device_ts=low, sent_ts=low + 5, received_ts=1_500),  # received - sent overflows
        ev(device_ts=big - 10, sent_ts=big - 10, received_ts=big),
        ev(device_ts=0, sent_ts=0, received_ts=big),
        ev(device_ts=MAX_EVENT_TS, sent_ts=MAX_EVENT_TS, received_ts=MAX_EVENT_TS),
        ev(device_ts=MAX_EVENT_TS + 1, sent_ts=MAX_EVENT_TS + 1, received_ts=MAX_EVENT_TS + 1),
        ev(device_ts=MIN_EVENT_TS, sent_ts=0, received_ts=0),
        ev(device_ts=MIN_EVENT_TS - 1, sent_ts=0, received_ts=0),
        ev(device_ts=5, sent_ts=10, received_ts=7),  # negative transit: event_ts 2
        ev(device_ts=low, sent_ts=big, received_ts=low),  # below int64: no event_ts
    ]
    assert MAX_EVENT_TS == 253_402_300_799_999  # 9999-12-31T23:59:59.999Z
    assert MIN_EVENT_TS == -62_135_596_800_000  # 0001-01-01T00:00:00Z
    assert all(isinstance(parse_event(value), Event) for value in values)
    rows = parse_events(kafka_frame(spark, kafka_rows(values))).select(
        "offset", "reason", "event_ts", F.unix_millis("event_time").alias("ms")
    )
    got = [(r.reason, r.event_ts, r.ms) for r in sorted(rows.collect(), key=lambda r: r.offset)]
    assert got == [
        (None, 1_495, 1_495),
        (None, big, None),
        (None, big, None),
        (None, MAX_EVENT_TS, MAX_EVENT_TS),
        (None, MAX_EVENT_TS + 1, None),
        (None, MIN_EVENT_TS, MIN_EVENT_TS),
        (None, MIN_EVENT_TS - 1, None),
        (None, 2, 2),
        (None, None, None),
    ]


def test_deep_documents_do_not_break_the_executor(spark: SparkSession) -> None:
    """Jackson parses up to 1000 levels; nothing may recurse through them and overflow an
    executor's stack (that kills the JVM, and every later test with it). Python's own limit
    depends on its call stack, so these are checked against Spark's answer only."""
    deep_array = "[" * 999 + "]" * 999
    deep_object = '{"a": ' * 998 + "1" + "}" * 998
    values = [
        raw(deep_array),
        raw(deep_object),
        raw(ev().decode().replace('"e-1"', deep_object)),
        raw(ev().decode().replace('"/home"', deep_array)),
        raw('{"x": ' + deep_array + ", " + ev().decode()[1:]),
    ]
    assert spark_reasons(spark, values) == [
        NOT_AN_OBJECT,
        missing_field("event_id"),
        wrong_type("event_id"),
        wrong_type("page"),
        None,
    ]


@st.composite
def _flat_objects(draw: st.DrawFn) -> bytes:
    """A flat object of event fields (a few unknown ones too), each of any JSON kind, with
    repeated keys and any JSON whitespace: near the fast path's compact form, on both sides."""
    names = st.sampled_from([*EVENT_FIELDS, "x", "Page"])
    scalars = st.one_of(
        st.sampled_from(["page_view", "search", "click", "order", "", "/home", "u-1", "e-1"]),
        st.text(max_size=4),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.integers(min_value=T - 10_000, max_value=T + 10_000),
        st.floats(allow_nan=False, allow_infinity=False),
        st.booleans(),
        st.none(),
    )
    members = draw(st.lists(st.tuples(names, scalars), max_size=12))
    space = st.sampled_from(["", "", " ", "\n", "\t "])
    body = ("," + draw(space)).join(
        json.dumps(k) + draw(space) + ":" + draw(space) + json.dumps(v) for k, v in members
    )
    return (draw(space) + "{" + body + "}" + draw(space)).encode()


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(_flat_objects(), min_size=20, max_size=60))
def test_spark_matches_python_on_flat_objects_near_the_compact_form(
    spark: SparkSession, lines: list[bytes]
) -> None:
    assert_conforms(spark, lines)


# --- every line of generated workloads ----------------------------------------------------------


def test_spark_matches_python_on_every_line_of_a_generated_workload(
    spark: SparkSession, tmp_path: Path
) -> None:
    events_path, _ = generated(tmp_path, seed=7, events=4_000, invalid_fraction=0.05)
    lines: list[bytes | None] = list(load_jsonl_values(events_path))
    reasons = assert_conforms(spark, lines)
    # The workload exercises every kind of reason, and most lines are valid.
    codes = {reason.partition(":")[0] for reason in reasons if reason is not None}
    assert codes == {
        NOT_JSON,
        NOT_AN_OBJECT,
        "missing_field",
        "wrong_type",
        UNKNOWN_TYPE,
        NEGATIVE_AMOUNT,
        DEVICE_AFTER_SENT,
    }
    assert reasons[None] > 0.9 * len(lines)


# --- splitting, deduplicating ---------------------------------------------------------------------


def test_valid_events_quarantine_and_first_in_log(spark: SparkSession) -> None:
    first = ev(event_id="d-1", received_ts=T + 250)
    retry = ev(event_id="d-1", received_ts=T + 900)  # a later copy: a later event_ts too
    other = ev(event_id="d-2", user_id="u-2")
    junk = b"<html>502</html>"
    rows = kafka_rows([first, junk, retry, other, ev(event_id="d-3", type="x")])
    parsed = parse_events(kafka_frame(spark, rows))

    valid = valid_events(parsed)
    assert tuple(valid.columns) == (*EVENT_COLUMNS, "partition", "offset")
    assert valid.count() == 3

    quarantined = quarantine(parsed)
    assert tuple(quarantined.columns) == QUARANTINE_COLUMNS
    got = sorted(
        (r.topic, r.partition, r.offset, _bytes(r.key), _bytes(r.value), r.reason)
        for r in quarantined.collect()
    )
    assert got == sorted(
        [
            ("events", rows[1][3], rows[1][4], None, junk, NOT_JSON),
            ("events", rows[4][3], rows[4][4], b"u-1", rows[4][1], UNKNOWN_TYPE),
        ]
    )

    deduped = first_in_log(valid)
    assert tuple(deduped.columns) == tuple(valid.columns)
    got_events = sorted((r.event_id, r.received_ts, r.offset) for r in deduped.collect())
    assert got_events == [
        ("d-1", T + 250, rows[0][4]),
        ("d-2", BASE["received_ts"], rows[3][4]),
    ]


# --- profiles ---------------------------------------------------------------------------------


def test_parse_profiles_matches_profile_from_record(spark: SparkSession, tmp_path: Path) -> None:
    _, profiles_path = generated(tmp_path, seed=3, events=2_000)
    lines = list(load_jsonl_values(profiles_path))
    rows = kafka_rows(
        lines, topic="profiles", partitions=PROFILE_PARTITIONS, timestamp_field="updated_ts"
    )
    assert any(row[1] is None for row in rows), "the workload has tombstones"
    frame = kafka_frame(spark, rows)
    parsed = parse_profiles(frame)
    assert tuple(parsed.columns) == PROFILE_COLUMNS
    got = sorted(
        (r.partition, r.offset, r.user_id, r.segment, r.updated_ts) for r in parsed.collect()
    )
    expected = []
    for key, value, _, partition, offset, ts in rows:
        change = profile_from_record(key, value, ts)
        expected.append((partition, offset, change.user_id, change.segment, change.updated_ts))
    assert got == sorted(expected)
    assert rejected_profiles(frame).count() == 0


def test_malformed_profile_records_are_rejected_not_tombstones(spark: SparkSession) -> None:
    good = b'{"user_id": "u-1", "segment": "pro", "updated_ts": 5}'
    records = [
        (b"u-1", good, "profiles", 0, 0, 5),
        (b"u-1", None, "profiles", 0, 1, 9),  # a tombstone at its record timestamp
        (b"u-2", b"not json", "profiles", 0, 2, 7),
        (b"u-3", b'{"segment": "", "updated_ts": 5}', "profiles", 0, 3, 7),
        (b"u-4", b'{"segment": "pro", "updated_ts": 5.5}', "profiles", 0, 4, 7),
        (b"u-5", b'["pro", 5]', "profiles", 0, 5, 7),
        (None, good, "profiles", 0, 6, 7),
        (b"u-6", good + b" x", "profiles", 0, 7, 7),
    ]
    for key, value, *_, ts in records[2:]:
        if key is not None:
            with pytest.raises(ValueError):
                profile_from_record(key, value, ts)
    frame = kafka_frame(spark, records)
    got = sorted((tuple(r) for r in parse_profiles(frame).collect()), key=lambda r: r[3:])
    assert got == [("u-1", "pro", 5, 0, 0), ("u-1", None, 9, 0, 1)]
    assert sorted(r.offset for r in rejected_profiles(frame).collect()) == [2, 3, 4, 5, 6, 7]


def test_parsing_refuses_a_session_without_duplicate_key_support(spark: SparkSession) -> None:
    ((key, value),) = SPARK_CONF.items()
    frame = kafka_frame(spark, kafka_rows([ev()]))
    spark.conf.set(key, "false")
    try:
        with pytest.raises(RuntimeError, match=key):
            parse_events(frame)
    finally:
        spark.conf.set(key, value)
