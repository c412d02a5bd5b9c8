"""The keyed merge of a pattern whose finish joins its rows (``search_conversions``: a search's
row and its searcher's orders, ``PartialAggregate.link``), and the state it writes back bounded
by the least watermark of all partitions (``stream_engine.keyed_merge.KeyedMerge.touched``,
``bounded``), on DuckDB with the store's reads and writes kept in memory (``MemoryState``):
no store needed.

Streamed micro-batch by micro-batch, with the late events dropped and the state expired as
the engine does, a log's ``search_conversions`` totals are the oracle's: a search is reached
through either key (a new order re-derives the user's stored searches; a new click, another
user's on another partition included, derives its search with the searcher's stored orders),
and expiry never takes what an event that is not late still needs.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from core.catalog import MATCH_ORDER, MATCH_SPECS, PATTERN_WINDOW_MS
from core.event_clock import EventClocks, least_watermark
from core.events import Rejected, parse_event
from core.oracle import compute_views, late_event_ids
from core.store.reads import decode_rows
from core.store.realtime import Change, Replacement, Upsert
from core.store.schema import primary_key
from core.store.state import StateKeys, StateRows, StateUpdate, totals_name
from core.times import MINUTE_MS
from core.views import PARTIALS
from core.views.partials import ROWS
from core.views.query import store_rows
from core.views.tables import EVENTS, PROFILES
from stream_engine import state_rows
from stream_engine.keyed_merge import KeyedMerge, Merged
from tests.unit.test_partial_laws import (
    EVENT_PARTITIONS,
    LAW_SETTINGS,
    Split,
    Workload,
    _line_partition,
    _sort_key,
    arrow_inputs,
    boundary_workloads,
)
from tests.unit.test_spark_views import duckdb_rows, event

if TYPE_CHECKING:
    import psycopg

T = 1_793_527_200_000  # 2026-11-01T10:00:00Z
PATTERN = PARTIALS["search_conversions"]
MATCHES = MATCH_SPECS["search_conversions"]
NO_CONN = cast("psycopg.Connection", None)  # the reads go to MemoryState


class MemoryState:
    """A stream's keyed state as ``core.store.state`` keeps it (value and link per key), in
    memory: what ``KeyedMerge`` reads (``_load``, ``_load_linked``) and its updates applied."""

    def __init__(self) -> None:
        self.states: dict[str, dict[tuple[str, int], tuple[str, str | None]]] = {}
        self.expires: dict[str, dict[tuple[str, int], int | None]] = {}
        """Per state and key, the row's ``expires_ms``."""
        self.matches: dict[tuple, tuple] = {}
        """The stream's matches rows by primary key, as ``core.store.realtime`` upserts them."""

    def load(self, _conn: psycopg.Connection, name: str, keys: StateKeys) -> list[str]:
        rows = self.states.get(name, {})
        return [rows[k][0] for k in zip(keys.texts, keys.ms, strict=True) if k in rows]

    def load_linked(self, _conn: psycopg.Connection, name: str, links: list[str]) -> list[str]:
        wanted = set(links)
        return [value for value, link in self.states.get(name, {}).values() if link in wanted]

    def expired(self, _conn: psycopg.Connection, name: str, watermark_ms: int) -> StateKeys:
        """As ``core.store.state.expired``."""
        passed = [
            k
            for k, ms in self.expires.get(name, {}).items()
            if ms is not None and ms < watermark_ms
        ]
        return StateKeys([k[0] for k in passed], [k[1] for k in passed])

    def apply(self, updates: Sequence[StateUpdate]) -> None:
        """As ``core.store.state.apply``: each update's deletes, then its upserts."""
        for update in updates:
            rows = self.states.setdefault(update.name, {})
            ends = self.expires.setdefault(update.name, {})
            for key in zip(update.deletes.texts, update.deletes.ms, strict=True):
                rows.pop(key, None)
                ends.pop(key, None)
            upserts = update.upserts
            for text, ms, value, link, end in zip(
                upserts.keys.texts, upserts.keys.ms, upserts.values, upserts.link_column(),
                upserts.expires_column(), strict=True,
            ):  # fmt: skip
                rows[(text, ms)] = (value, link)
                ends[(text, ms)] = end

    def apply_matches(self, changes: Sequence[Change]) -> None:
        """The pattern's matches upserts: each one's deleted rows, then its rows, by key."""
        key = [MATCHES.columns.index(c) for c in primary_key(MATCHES)]
        for change in changes:
            if change.view == MATCHES.name:
                assert isinstance(change, Upsert)
                for row in change.deleted:
                    self.matches.pop(tuple(row[i] for i in key), None)
                for row in change.rows:
                    self.matches[tuple(row[i] for i in key)] = row

    def replace_all(self, changes: Sequence[Change], states: Mapping[str, StateRows]) -> None:
        """As a hand-off (``core.store.realtime.replace_all``, ``core.store.state.replace_all``):
        every state named and the matches replaced."""
        for name, rows in states.items():
            self.states[name], self.expires[name] = {}, {}
            self.apply([StateUpdate(name, upserts=rows)])
        for change in changes:
            if change.view == MATCHES.name:
                assert isinstance(change, Replacement) and change.rows is not None
                self.matches = {}
                self.apply_matches([Upsert(MATCHES.name, store_rows(change.rows, MATCHES))])

    def match_rows(self) -> list[dict[str, Any]]:
        """The stream's matches as the oracle spells them, in reading order."""
        rows = decode_rows(MATCHES, list(self.matches.values()))
        return sorted(rows, key=lambda r: tuple(r[c] for c in MATCH_ORDER))

    def table(self, name: str, schema: pa.Schema) -> pa.Table:
        return state_rows.table([v for v, _ in self.states.get(name, {}).values()], schema)


@pytest.fixture
def keyed() -> Iterator[KeyedMerge]:
    merge = KeyedMerge("test", session_seeds=lambda conn, users, cutoff: [])
    yield merge
    merge.close()


@pytest.fixture
def store(keyed: KeyedMerge, monkeypatch: pytest.MonkeyPatch) -> MemoryState:
    memory = MemoryState()
    monkeypatch.setattr(keyed, "_load", memory.load)
    monkeypatch.setattr(keyed, "_load_linked", memory.load_linked)
    monkeypatch.setattr(keyed, "_load_expired", memory.expired)
    return memory


def _events(rows: list[dict[str, object]]) -> pa.Table:
    return pa.Table.from_pylist(rows, schema=EVENTS.to_pyarrow())


NO_PROFILES = PROFILES.to_pyarrow().empty_table()


def _partial(keyed: KeyedMerge, rows: list[dict[str, object]]) -> pa.Table:
    return keyed._run(PATTERN.partial_query, in_events=_events(rows), in_profiles=NO_PROFILES)


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


def _merge(
    keyed: KeyedMerge,
    store: MemoryState,
    events: pa.Table,
    watermarks: Mapping[int, int | None] | None = None,
) -> Merged:
    """One micro-batch of `search_conversions` through the keyed merge, written to `store`."""
    merged = Merged()
    keyed._additive(NO_CONN, PATTERN, events, NO_PROFILES, merged, watermarks)
    store.apply(merged.updates)
    store.apply_matches(merged.changes)
    return merged


def _totals(store: MemoryState) -> dict[tuple[str, int], tuple[int, int, int]]:
    """The stored totals: (query, window start) -> (searches, clicked, converted)."""
    table = store.table(totals_name(PATTERN.view), PATTERN.totals_schema.to_pyarrow())
    return {
        (r["query"], r["_window_start_ms"]): (r["searches"], r["clicked"], r["converted"])
        for r in table.to_pylist()
        if r[ROWS] > 0
    }


# --- expiry by the least watermark ----------------------------------------------------------------


def test_the_least_watermark_of_all_partitions_expires_and_an_emptied_row_is_deleted(
    keyed: KeyedMerge,
) -> None:
    partial = _partial(
        keyed,
        [
            _event("s-old", "search", "u-1", T, 0, query="q"),
            _event("s-new", "search", "u-1", T + 30 * MINUTE_MS, 0, query="q"),
            _event("o-old", "order", "u-2", T, 0, amount_cents=1),
            _event("c-stray", "click", "u-3", T, 1, search_id="s-none"),
        ],
    )
    # Partition 1's watermark, the least, 1 ms past the old facts' bound.
    marks = {0: T + 2 * PATTERN_WINDOW_MS, 1: T + PATTERN_WINDOW_MS + 1}
    kept, emptied = keyed.bounded(PATTERN, partial, marks)
    assert kept.column("row_key").to_pylist() == ["search:s-new"]
    assert sorted(emptied.column("row_key").to_pylist()) == [
        "search:s-none",
        "search:s-old",
        "user:u-2",
    ]
    # A partition at the bound itself, or one not read yet (None), keeps them all.
    for lagging in ({0: marks[0], 1: T + PATTERN_WINDOW_MS}, {0: marks[0], 1: None}):
        kept, emptied = keyed.bounded(PATTERN, partial, lagging)
        assert kept.num_rows == partial.num_rows and emptied.num_rows == 0


def test_a_row_no_event_touches_leaves_once_the_least_watermark_passes_it(
    keyed: KeyedMerge, store: MemoryState
) -> None:
    """The sweep (``PartialAggregate.expires``, ``state.expired``): a search no one clicks and
    whose searcher orders nothing is deleted by a later micro-batch that never touches it,
    even one with no event of the pattern, once every partition's watermark is past its
    bound; its counts stay."""
    _merge(keyed, store, _events([_event("s-1", "search", "u-1", T, 0, query="q")]), {0: T})
    assert store.expires[PATTERN.view] == {("search:s-1", 0): T + PATTERN_WINDOW_MS}
    later = T + 2 * PATTERN_WINDOW_MS
    views = _events([_event("p-1", "page_view", "u-9", later, 0, page="/")])
    merged = _merge(keyed, store, views, {0: later, 1: None})  # partition 1 unread: held
    assert ("search:s-1", 0) in store.states[PATTERN.view] and not merged.state_rows
    merged = _merge(keyed, store, views, {0: later, 1: T + PATTERN_WINDOW_MS})  # at the bound
    assert ("search:s-1", 0) in store.states[PATTERN.view]
    merged = _merge(keyed, store, views, {0: later, 1: T + PATTERN_WINDOW_MS + 1})
    assert store.states[PATTERN.view] == {} and merged.state_rows == {PATTERN.view: -1}
    assert _totals(store) == {("q", T): (1, 0, 0)}


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
    # A partition the stream reads and has no clock for yet holds everything back: None.
    assert clocks.thresholds(10, (2, 0)) == {0: T - 10, 1: T - 5, 2: None}


# --- the joined path: a search reached through either key -----------------------------------------


def test_a_new_order_re_derives_the_users_stored_searches(
    keyed: KeyedMerge, store: MemoryState
) -> None:
    """Batch 1: u-1's search and u-3's click on it (partition 1); batch 2: u-1's order, which
    touches only the key ``user:u-1``: the link finds the stored search and converts it."""
    _merge(
        keyed,
        store,
        _events(
            [
                _event("s-1", "search", "u-1", T, 0, query="q"),
                _event("c-1", "click", "u-3", T + 5 * MINUTE_MS, 1, search_id="s-1"),
            ]
        ),
    )
    assert _totals(store) == {("q", T): (1, 1, 0)}
    merged = _merge(
        keyed, store, _events([_event("o-1", "order", "u-1", T + 9 * MINUTE_MS, 0, amount_cents=1)])
    )
    assert _totals(store) == {("q", T): (1, 1, 1)}
    assert merged.state_rows[PATTERN.view] == 1  # the user's row, new


def test_a_click_from_a_lagging_partition_still_counts_and_converts(
    keyed: KeyedMerge, store: MemoryState
) -> None:
    """The searcher's partition far ahead, the clicker's an hour behind: the least watermark
    keeps the search and the order until the click comes, which then converts the search (a
    per-partition expiry would have dropped both with partition 0's clock)."""
    ahead = T + 3 * PATTERN_WINDOW_MS
    batch = [
        _event("s-1", "search", "u-1", T, 0, query="q"),
        _event("o-1", "order", "u-1", T + 40 * MINUTE_MS, 0, amount_cents=1),
        _event("p-1", "page_view", "u-1", ahead, 0, page="/p"),
    ]
    _merge(keyed, store, _events(batch), {0: ahead, 1: T})
    assert sorted(store.states[PATTERN.view]) == [("search:s-1", 0), ("user:u-1", 0)]
    click = _event("c-1", "click", "u-3", T + 20 * MINUTE_MS, 1, search_id="s-1")
    _merge(keyed, store, _events([click]), {0: ahead, 1: T + 20 * MINUTE_MS})
    assert _totals(store) == {("q", T): (1, 1, 1)}
    # Once partition 1 passes the bound too, the pattern's facts leave the state on touch.
    late_click = _event("c-2", "click", "u-3", T + 2 * PATTERN_WINDOW_MS, 1, search_id="s-1")
    _merge(keyed, store, _events([late_click]), {0: ahead, 1: T + 2 * PATTERN_WINDOW_MS})
    assert store.states[PATTERN.view] == {}
    assert _totals(store) == {("q", T): (1, 1, 1)}  # final, and kept


# --- any log, any micro-batches: the oracle's totals ---------------------------------------------


def _micro_batches(data: st.DataObject, workload: Workload, batches: int) -> list[int]:
    """Per line of the log, its micro-batch: each partition's lines cut into `batches`
    consecutive runs (a stream reads a partition in offset order)."""
    parts = [_line_partition(line) for line in workload.events]
    batch_of = [0] * len(parts)
    for partition in range(EVENT_PARTITIONS):
        offsets = [i for i, p in enumerate(parts) if p == partition]
        cuts = sorted(
            data.draw(st.integers(0, len(offsets)), f"cut {partition}") for _ in range(batches - 1)
        )
        for n, offset in enumerate(offsets):
            batch_of[offset] = sum(cut <= n for cut in cuts)
    return batch_of


@settings(LAW_SETTINGS, max_examples=40)
@given(
    workload=boundary_workloads(),
    data=st.data(),
    batches=st.integers(1, 4),
    delay=st.sampled_from((0, 10 * MINUTE_MS, 30 * MINUTE_MS)),
    handoff=st.none() | st.integers(0, 3),
)
def test_streamed_with_expiry_the_totals_are_the_oracles(
    keyed: KeyedMerge,
    store: MemoryState,
    workload: Workload,
    data: st.DataObject,
    batches: int,
    delay: int,
    handoff: int | None,
) -> None:
    """...and so they are when, after micro-batch `handoff`, a hand-off (no cutoff) replaces
    the state and the matches by ``KeyedMerge.recompute`` of every on-time event so far, its
    state bounded by the clocks' watermarks, and the stream goes on from it."""
    store.states.clear()  # one store per example (the fixtures are the test's)
    store.expires.clear()
    store.matches.clear()
    batch_of = _micro_batches(data, workload, batches)
    records = [(_line_partition(v), i, v) for i, v in enumerate(workload.events)]
    late = late_event_ids(records, delay)
    note(f"batches {batch_of}, late {sorted(late)}")
    ids: dict[str, int] = {}
    for index, line in enumerate(workload.events):
        parsed = parse_event(line)
        if not isinstance(parsed, Rejected):
            ids.setdefault(parsed.event_id, batch_of[index])  # the first occurrence's batch
    inputs = arrow_inputs(workload, Split(1, dict.fromkeys(ids, 0), (0,) * len(workload.profiles)))
    events = inputs.part()["in_events"]
    clocks: dict[int, int] = {}
    accepted = events.slice(0, 0)  # Lambda's accepted log: the on-time events so far
    for batch in range(batches):
        in_batch = [event_id for event_id, b in ids.items() if b == batch]
        read = events.filter(pc.is_in(events.column("event_id"), pa.array(in_batch, pa.string())))
        for row in read.select(["partition", "event_ts"]).to_pylist():
            clocks[row["partition"]] = max(
                clocks.get(row["partition"], row["event_ts"]), row["event_ts"]
            )
        on_time = read.filter(
            pc.invert(pc.is_in(read.column("event_id"), pa.array(sorted(late), pa.string())))
        )
        marks = {p: (clocks[p] - delay if p in clocks else None) for p in range(EVENT_PARTITIONS)}
        _merge(keyed, store, on_time, marks)
        accepted = pa.concat_tables([accepted, on_time])
        if batch == handoff:
            changes, states = keyed.recompute(NO_CONN, accepted, NO_PROFILES, None, None, marks)
            store.replace_all(changes, states)
    expected = compute_views(workload.events, keep=lambda e: e.event_id not in late)
    table = store.table(totals_name(PATTERN.view), PATTERN.totals_schema.to_pyarrow())
    table = table.filter(pc.greater(table.column(ROWS), 0))
    got = duckdb_rows(keyed._run(PATTERN.finish_totals_query, in_totals=table), PATTERN.view)
    want = sorted(expected.views[PATTERN.view], key=_sort_key(PATTERN.view))
    assert got == want
    # The state is bounded: no row the least watermark has passed stays, touched or not.
    least = least_watermark(marks)
    if least is not None:
        assert all(end is not None and end >= least for end in store.expires[PATTERN.view].values())
    # And the complex events the stream upserted, expired searches' included, are the oracle's.
    assert store.match_rows() == sorted(
        expected.matches, key=lambda r: tuple(r[c] for c in MATCH_ORDER)
    )


def test_a_hand_made_cross_user_log_streamed_one_event_at_a_time(
    keyed: KeyedMerge, store: MemoryState
) -> None:
    """Each event its own micro-batch, in log order: the search, another user's click (on
    another partition), the clicker's order (no conversion), the searcher's order."""
    lines = (
        event("s-1", "search", "u-1", T, query="q"),
        event("c-1", "click", "u-2", T + MINUTE_MS, page="/p", search_id="s-1"),
        event("o-2", "order", "u-2", T + 2 * MINUTE_MS, amount_cents=1),
        event("o-1", "order", "u-1", T + 3 * MINUTE_MS, amount_cents=1),
    )
    workload = Workload(lines, ())
    ids = [e.event_id for _, e in workload.first_events()]
    events = arrow_inputs(workload, Split(1, dict.fromkeys(ids, 0), ())).part()["in_events"]
    steps: list[Any] = []
    for event_id in ("s-1", "c-1", "o-2", "o-1"):
        one = events.filter(pc.equal(events.column("event_id"), event_id))
        _merge(keyed, store, one)
        steps.append(_totals(store))
    assert steps == [
        {("q", T): (1, 0, 0)},
        {("q", T): (1, 1, 0)},
        {("q", T): (1, 1, 0)},
        {("q", T): (1, 1, 1)},
    ]
