"""The state a stream writes back for a pattern bounded by the watermark
(``stream_engine.keyed_merge.KeyedMerge.bounded``), on DuckDB alone: no store needed."""

from __future__ import annotations

from collections.abc import Iterator

import pyarrow as pa
import pytest

from core.catalog import PATTERN_WINDOW_MS
from core.event_clock import EventClocks
from core.times import MINUTE_MS
from core.views import PARTIALS
from core.views.tables import EVENTS
from stream_engine.keyed_merge import KeyedMerge

T = 1_793_527_200_000  # 2026-11-01T10:00:00Z
PATTERN = PARTIALS["search_conversions"]


@pytest.fixture
def keyed() -> Iterator[KeyedMerge]:
    merge = KeyedMerge("test", session_seeds=lambda conn, users, cutoff: [])
    yield merge
    merge.close()


def _partial(keyed: KeyedMerge, rows: list[dict[str, object]]) -> pa.Table:
    events = pa.Table.from_pylist(rows, schema=EVENTS.to_pyarrow())
    profiles = pa.table({"user_id": pa.array([], pa.string())})
    return keyed._run(PATTERN.partial_query, in_events=events, in_profiles=profiles)


def _event(event_id: str, type_: str, user: str, ts: int, partition: int, **fields: object) -> dict:
    return {
        "event_id": event_id,
        "type": type_,
        "user_id": user,
        "event_ts": ts,
        "partition": partition,
        "offset": ts - T,
        **fields,
    }


def test_facts_past_their_bound_leave_and_an_emptied_user_is_deleted(keyed: KeyedMerge) -> None:
    partial = _partial(
        keyed,
        [
            _event("s-old", "search", "u-1", T, 0, query="q"),
            _event("s-new", "search", "u-1", T + 30 * MINUTE_MS, 0, query="q"),
            _event("s-2", "search", "u-2", T, 0, query="q"),
            _event("s-3", "search", "u-3", T, 1, query="q"),  # another partition's clock
        ],
    )
    # Partition 0's watermark 1 ms past the old searches' bound; partition 1's before it.
    marks = {0: T + PATTERN_WINDOW_MS + 1, 1: T + PATTERN_WINDOW_MS}
    kept, emptied = keyed.bounded(PATTERN, partial, marks)
    searches = {r["user_id"]: [s["event_id"] for s in r["searches"]] for r in kept.to_pylist()}
    assert searches == {"u-1": ["s-new"], "u-3": ["s-3"]}
    assert emptied.column("user_id").to_pylist() == ["u-2"]


def test_without_watermarks_or_for_an_unbounded_state_everything_is_written(
    keyed: KeyedMerge,
) -> None:
    partial = _partial(keyed, [_event("s-1", "search", "u-1", T, 0, query="q")])
    kept, emptied = keyed.bounded(PATTERN, partial, {})
    assert kept.equals(partial) and emptied.num_rows == 0
    other = PARTIALS["search_ctr"]
    kept, emptied = keyed.bounded(other, partial, {0: T + 10 * PATTERN_WINDOW_MS})
    assert kept.equals(partial) and emptied.num_rows == 0


def test_thresholds_are_each_partitions_clock_less_the_delay() -> None:
    clocks = EventClocks({1: T + 5, 0: T})
    assert clocks.thresholds(10) == {0: T - 10, 1: T - 5}
    assert EventClocks().thresholds(10) == {}
