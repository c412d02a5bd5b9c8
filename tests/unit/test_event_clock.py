"""The event-time clock per partition (CONTRACT §3, late data): record by record in offset order,
so the stream engine drops exactly the oracle's late events however the log is cut into
micro-batches (one for all of it, one a record, anything between), the replay's Spark form
agrees, and a partition read ahead never makes another's events late."""

from __future__ import annotations

import json
from typing import Any

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from core.event_clock import EventClocks, late_column
from core.events import Event, parse_event
from core.oracle import late_event_ids
from core.views import tables
from stream_engine.engine import behind_watermark

DELAY = 10 * 60_000
T0 = 1_793_520_000_000
Record = tuple[int, int, bytes]


def _value(event_id: str, event_ts: int) -> bytes:
    return json.dumps(
        {
            "event_id": event_id,
            "type": "page_view",
            "user_id": "u",
            "page": "/",
            "device_ts": event_ts,
            "sent_ts": event_ts,
            "received_ts": event_ts,
        }
    ).encode()


def _engine_late(records: list[Record], batch_ends: list[dict[int, int]]) -> set[str]:
    """What the stream engine drops, micro-batch by micro-batch (its first occurrences as
    Spark's deduplication hands them over, in no particular order)."""
    clocks, seen, late = EventClocks(), set(), set()
    start: dict[int, int] = {}
    for ends in batch_ends:
        rows = []
        for partition, offset, value in records:
            if not start.get(partition, 0) <= offset < ends.get(partition, 0):
                continue
            event = parse_event(value)
            if isinstance(event, Event) and event.event_id not in seen:
                seen.add(event.event_id)
                rows.append(
                    {
                        "event_id": event.event_id,
                        "event_ts": event.event_ts,
                        "partition": partition,
                        "offset": offset,
                    }
                )
        rows.reverse()  # Spark hands a micro-batch over in no particular order
        batch = pa.Table.from_pylist(rows, schema=_SCHEMA)
        _, dropped = behind_watermark(batch, clocks, DELAY)
        late |= set(dropped["event_id"].to_pylist())
        start = {**start, **ends}
    return late


_SCHEMA = tables.EVENTS.to_pyarrow()
_SCHEMA = pa.schema([_SCHEMA.field(n) for n in ("event_id", "event_ts", "partition", "offset")])


@st.composite
def logs(draw: st.DrawFn) -> tuple[list[Record], list[dict[int, int]]]:
    """A log of 1-3 partitions whose events wander up to 25 minutes back and forth in event
    time (so some are late), with repeated ids, cut into micro-batches at random offsets: one
    batch for all of it, one record a batch, or anything between. An id repeats within its
    partition only: a retry carries its user's key, so its partition (a copy in another
    partition would make the first occurrence depend on how partitions interleave, which no
    log of this key can)."""
    partitions = draw(st.integers(1, 3))
    records: list[Record] = []
    for partition in range(partitions):
        offsets = draw(st.lists(st.integers(-25, 25), max_size=12))
        ts = T0 + draw(st.integers(0, 30)) * 60_000
        for offset, step in enumerate(offsets):
            ts += step * 60_000
            repeated = f"e{partition}-{draw(st.integers(0, 30))}"
            event_id = repeated if step % 7 == 0 else f"p{partition}-{offset}"
            records.append((partition, offset, _value(event_id, ts)))
    lengths = {p: sum(1 for r in records if r[0] == p) for p in range(partitions)}
    cut = draw(st.sampled_from(("one batch", "one record a batch", "random")))
    if cut == "one batch":
        return records, [lengths]
    if cut == "one record a batch":
        ends, at = [], dict.fromkeys(lengths, 0)
        for partition, offset, _ in records:
            at = {**at, partition: offset + 1}
            ends.append(at)
        return records, ends
    batches = draw(st.integers(1, 6))
    cuts = {}
    for p, n in lengths.items():
        inner = draw(st.lists(st.integers(0, n), min_size=batches - 1, max_size=batches - 1))
        cuts[p] = [*sorted(inner), n]
    return records, [{p: cuts[p][b] for p in cuts} for b in range(batches)]


@settings(max_examples=300, deadline=None)
@given(logs())
def test_the_engine_drops_the_contracts_late_events_however_the_log_is_cut(
    log: tuple[list[Record], list[dict[int, int]]],
) -> None:
    records, batch_ends = log
    assert _engine_late(records, batch_ends) == late_event_ids(records, DELAY)


def test_a_later_event_in_the_same_micro_batch_makes_an_earlier_offsets_peer_late() -> None:
    """Within one micro-batch the rule reads offset order, not the batch's row order: the
    event at offset 1 is 20 minutes behind offset 0's, and late, even when it reaches the
    driver first and when no micro-batch came before."""
    records = [(0, 0, _value("ahead", T0 + 20 * 60_000)), (0, 1, _value("behind", T0))]
    assert late_event_ids(records, DELAY) == {"behind"}
    assert _engine_late(records, [{0: 2}]) == {"behind"}


def test_a_partition_read_ahead_never_makes_another_partitions_events_late() -> None:
    """A burst: partition 0 delivers 12 minutes of event time in one micro-batch before
    partition 1's events of the same minutes arrive. One watermark over both would drop
    partition 1's; a clock per partition drops none."""
    ahead = [(0, i, _value(f"a{i}", T0 + i * 60_000)) for i in range(13)]
    behind = [(1, i, _value(f"b{i}", T0 + i * 60_000)) for i in range(13)]
    batch_ends = [{0: 13}, {0: 13, 1: 13}]
    assert late_event_ids(ahead + behind, DELAY) == set()
    assert _engine_late(ahead + behind, batch_ends) == set()
    # Behind its own partition's clock, an event is late whatever the batching.
    stray = (1, 13, _value("stray", T0 + 60_000))
    assert late_event_ids([*ahead, *behind, stray], DELAY) == {"stray"}
    for ends in ([{0: 13, 1: 13}, {0: 13, 1: 14}], [{0: 13, 1: 14}]):
        assert _engine_late([*ahead, *behind, stray], ends) == {"stray"}


def test_the_watermark_is_the_least_partitions() -> None:
    clocks = EventClocks()
    assert clocks.watermark(DELAY) is None
    clocks.advance(0, T0 + 20 * 60_000)
    clocks.advance(1, T0 + 15 * 60_000)
    clocks.advance(1, T0)  # a clock never goes back
    assert clocks.watermark(DELAY) == T0 + 5 * 60_000
    assert clocks.latest() == T0 + 20 * 60_000
    assert EventClocks.parse(clocks.stored()) == clocks


@settings(max_examples=25, deadline=None)
@given(logs())
def test_the_replays_spark_form_drops_the_same_events(
    spark: Any, log: tuple[list[Record], list[dict[int, int]]]
) -> None:
    """`late_column`, a window per partition in offset order over the deduplicated history,
    as the replay's micro-batch on Spark applies it (`stream_engine.history`)."""
    records, _ = log
    seen: set[str] = set()
    rows = []
    for partition, offset, value in records:
        event = parse_event(value)
        if isinstance(event, Event) and event.event_id not in seen:
            seen.add(event.event_id)
            rows.append((event.event_id, event.event_ts, partition, offset))
    schema = "event_id string, event_ts long, partition int, offset long"
    frame = spark.createDataFrame(rows, schema).withColumn("late", late_column(DELAY))
    dropped = {row["event_id"] for row in frame.where("late").collect()}
    assert dropped == late_event_ids(records, DELAY)
