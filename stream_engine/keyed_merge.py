"""Merging a micro-batch's partials into a stream's keyed state, on DuckDB.

For every view the shared definitions (``core.views.PARTIALS``) give the queries; this module
only moves rows between them and the store:

- additive views: the partial of the new events, the stored state of the keys it touches (a
  primary-key lookup) and, for a partial whose finish joins its rows (``link``:
  search_conversions' searches and their searcher's orders), of the rows linked to those (an
  index lookup), their merge, the delta of the touched rows' contributions, the stored totals
  of the view rows that delta touches, the new totals, and the changed view rows;
- sessions: the touched users' sessions within reach of the new events (the stream's own, and
  those another layer leaves open) merged with the new events' sessions.

Each query runs in process on Arrow tables (``core.views.query.on_duckdb``): a few
milliseconds, where the same query planned by Spark cost 150-270 ms however few its rows.
Nothing here reads more than the keys the new input touches.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.compute as pc

from core.catalog import MATCH_SPECS, VIEWS
from core.event_clock import least_watermark
from core.store import sessions, state
from core.store.realtime import Change, Replacement, Upsert
from core.store.state import StateKeys, StateRows, StateUpdate, totals_name
from core.times import to_ms
from core.views import PARTIALS
from core.views.partials import EXPIRES, ROWS, PartialAggregate
from core.views.query import Query, on_duckdb, store_rows, store_table
from core.views.sessions import reach
from core.views.tables import watermarks_table
from stream_engine import state_rows
from stream_engine.session_seeds import SessionSeeds, dedupe_seeds

if TYPE_CHECKING:
    import psycopg

PartialSeeds = Callable[["psycopg.Connection", str], list[str]]
"""Partials of another layer a recompute merges its own with, per key: (conn, view) -> stored
partial rows (Lambda: the published batch's, of the views of the current state)."""

SESSIONS = PARTIALS["sessions"]


@dataclass
class Merged:
    """What merging one micro-batch changes."""

    changes: list[Change] = field(default_factory=list)
    updates: list[StateUpdate] = field(default_factory=list)
    keys: dict[str, int] = field(default_factory=dict)
    """Per view, the partial keys touched."""
    state_rows: dict[str, int] = field(default_factory=dict)
    """Per view, the net change of the stored state rows (partials and totals): for the
    stream's metrics, without counting the store."""
    new_events: int = 0
    """The events the views saw (after the logic version's filter)."""


SMALL_BATCH = 20_000
"""A micro-batch of fewer new events than this is merged on one DuckDB thread: its queries are
too small for parallel tasks to repay their scheduling (a 100-event micro-batch's merge, 126
against 151 ms of CPU here); a replay's large ones keep every core."""


class KeyedMerge:
    """One stream's merges, on one in-memory DuckDB connection kept from one micro-batch to
    the next (nothing is stored there between them: each query's inputs are registered for it
    alone). Opening one costs 12 ms of CPU here, a tenth of a small micro-batch's merges.
    Used by one thread at a time; `close` it when the stream stops."""

    def __init__(
        self,
        stream: str,
        session_seeds: SessionSeeds,
        partial_seeds: PartialSeeds = lambda conn, view: [],
    ) -> None:
        self.stream = stream
        self.session_seeds = session_seeds
        self.partial_seeds = partial_seeds
        self._con: duckdb.DuckDBPyConnection | None = None
        self._one_thread = False

    def _sized_for(self, events: int) -> None:
        """One DuckDB thread for a small micro-batch, all of them for a large one."""
        one = events < SMALL_BATCH
        if one != self._one_thread:
            self._db.execute("set threads = 1" if one else "reset threads")
            self._one_thread = one

    def close(self) -> None:
        """Close the connection (a connection left alive at exit makes DuckDB's bindings
        complain); the next merge opens another."""
        if self._con is not None:
            self._con.close()
            self._con = None
            self._one_thread = False

    @property
    def _db(self) -> duckdb.DuckDBPyConnection:
        if self._con is None:
            # In memory, spilled (if ever) to the temporary folder: a pod's root is read-only.
            self._con = duckdb.connect(config={"temp_directory": tempfile.gettempdir()})
        return self._con

    def _run(self, query: Query, **tables: pa.Table) -> pa.Table:
        return on_duckdb(self._db, query, **tables)

    def _kept(self, events: pa.Table, logic: Query | None) -> pa.Table:
        """The events the logic version in force lets the views see."""
        return events if logic is None else self._run(logic, in_events=events)

    def _stored(
        self, conn: psycopg.Connection, name: str, keys: StateKeys, schema: pa.Schema
    ) -> pa.Table:
        return state_rows.table(self._load(conn, name, keys), schema)

    # The store's reads, in one place.
    def _load(self, conn: psycopg.Connection, name: str, keys: StateKeys) -> list[str]:
        return state.load(conn, self.stream, name, keys)

    def _load_linked(self, conn: psycopg.Connection, name: str, links: list[str]) -> list[str]:
        return state.load_linked(conn, self.stream, name, links)

    def _load_expired(self, conn: psycopg.Connection, name: str, watermark_ms: int) -> StateKeys:
        return state.expired(conn, self.stream, name, watermark_ms)

    def touched(
        self, conn: psycopg.Connection, aggregate: PartialAggregate, fresh: pa.Table
    ) -> pa.Table:
        """The stored partial rows whose contributions `fresh` (a micro-batch's partial) can
        change: those of the keys it touches and, for a partial whose finish joins its rows
        (``PartialAggregate.link``), every row linked to one of those or to a fresh row (a new
        order: the user's stored searches; a new search or click: its searcher's orders, and
        the searcher's other searches with them). Those are the rows whose contributions the
        delta takes before and after, so a search's row changes through either key."""
        schema = aggregate.schema.to_pyarrow()
        keyed = self._stored(conn, aggregate.view, state.keys(fresh, aggregate.key), schema)
        link = aggregate.link
        if link is None:
            return keyed
        links = set(fresh.column(link).to_pylist()) | set(keyed.column(link).to_pylist())
        links.discard(None)
        linked = state_rows.table(self._load_linked(conn, aggregate.view, sorted(links)), schema)
        found = set(state_rows.key_list(keyed, aggregate.key))
        more = [key not in found for key in state_rows.key_list(linked, aggregate.key)]
        return pa.concat_tables([keyed, linked.filter(pa.array(more, pa.bool_()))])

    # -- a micro-batch ------------------------------------------------------------------------

    def merge(
        self,
        conn: psycopg.Connection,
        events: pa.Table,
        profiles: pa.Table,
        cutoff: int | None,
        logic: Query | None,
        watermarks: Mapping[int, int | None] | None = None,
    ) -> Merged:
        """Every view's changes from new `events` (those `logic` keeps) and `profiles`, and
        the touched keys' state; a state bounded by the watermark loses what `watermarks`
        (per partition of `events`, every one, the event time before which an event is late;
        None: nothing read there yet) have passed."""
        merged = Merged()
        self._sized_for(events.num_rows)
        events = self._kept(events, logic)
        merged.new_events = events.num_rows
        for aggregate in PARTIALS.values():
            if aggregate.additive:
                touched = self._additive(conn, aggregate, events, profiles, merged, watermarks)
            else:
                touched = self._sessions(conn, events, cutoff, merged)
            merged.keys[aggregate.view] = touched
        return merged

    def _additive(
        self,
        conn: psycopg.Connection,
        aggregate: PartialAggregate,
        events: pa.Table,
        profiles: pa.Table,
        merged: Merged,
        watermarks: Mapping[int, int | None] | None = None,
    ) -> int:
        fresh = self._run(aggregate.partial_query, in_events=events, in_profiles=profiles)
        if fresh.num_rows == 0:  # nothing to merge; the clocks may still have moved
            swept = self._swept(conn, aggregate, fresh, watermarks)
            if swept:
                merged.updates.append(StateUpdate(aggregate.view, deletes=swept))
                merged.state_rows[aggregate.view] = -len(swept)
            return 0
        view = aggregate.view
        before = self.touched(conn, aggregate, fresh)
        after = self._run(aggregate.merge_query, in_before=before, in_fresh=fresh)
        delta = self._run(aggregate.delta_query, in_before=before, in_after=after)
        total_keys = state.keys(delta, aggregate.total_key)
        totals_schema = aggregate.totals_schema.to_pyarrow()
        old = self._stored(conn, totals_name(view), total_keys, totals_schema)
        totals = self._run(aggregate.add_totals_query, in_totals=old, in_delta=delta)
        kept = totals.filter(pc.greater(totals.column(ROWS), 0))
        gone = totals.filter(pc.less_equal(totals.column(ROWS), 0))
        changed = after
        if aggregate.changed_query is not None:
            changed = self._run(aggregate.changed_query, in_before=before, in_after=after)
        # Expired after the delta, never before it: what leaves is final, and stays counted.
        changed, emptied = self.bounded(aggregate, changed, watermarks)
        # And the stored rows no event touched that the least watermark has passed.
        swept = self._swept(conn, aggregate, before, watermarks)
        deletes = state.keys(emptied, aggregate.key)
        merged.updates.append(
            StateUpdate(
                view,
                self._state_rows(aggregate, changed),
                deletes=StateKeys([*deletes.texts, *swept.texts], [*deletes.ms, *swept.ms]),
            )
        )
        merged.updates.append(
            StateUpdate(
                totals_name(view),
                upserts=state_rows.rows(self._db, kept, aggregate.total_key),
                deletes=state.keys(gone, aggregate.total_key),
            )
        )
        # The touched keys' partials go from `before` to `after` (the new keys inserted), their
        # totals from `old` to `kept` (those at zero deleted).
        # Stored partials now: a set of facts keeps every key of `after` (it writes only the
        # new facts), any other state what it wrote back.
        partials = after.num_rows if aggregate.changed_query is not None else changed.num_rows
        merged.state_rows[view] = (
            partials - before.num_rows - len(swept) + kept.num_rows - old.num_rows
        )
        spec = VIEWS[view]
        rows = store_rows(self._run(aggregate.finish_totals_query, in_totals=kept), spec)
        deleted = store_rows(self._run(aggregate.finish_totals_query, in_totals=gone), spec)
        merged.changes.append(Upsert(view, rows, deleted))
        if aggregate.matches_query is not None:
            merged.changes.append(self._matches(aggregate, before, after))
        return fresh.num_rows

    def _matches(self, aggregate: PartialAggregate, before: pa.Table, after: pa.Table) -> Upsert:
        """A pattern view's complex events of the touched rows, replaced: those of `after`
        upserted (a later click or order can still change a match until its search expires),
        those of `before` whose search has none in `after` deleted. An expired search's match
        is in neither, and stays."""
        assert aggregate.matches_query is not None
        spec = MATCH_SPECS[aggregate.view]
        now = self._run(aggregate.matches_query, in_partial=after)
        was = self._run(aggregate.matches_query, in_partial=before)
        gone = was.filter(pc.invert(pc.is_in(was.column("search_id"), now.column("search_id"))))
        return Upsert(spec.name, store_rows(now, spec), store_rows(gone, spec))

    def _state_rows(self, aggregate: PartialAggregate, rows: pa.Table) -> StateRows:
        """Partial rows as the state keeps them, with each one's expiry for a state bounded by
        the watermark (``PartialAggregate.expires``)."""
        if aggregate.expires_query is None or rows.num_rows == 0:
            return state_rows.rows(self._db, rows, aggregate.key, aggregate.link)
        timed = self._run(aggregate.expires_query, in_partial=rows)
        values = timed.select(aggregate.schema.names)
        return state_rows.rows(
            self._db, values, aggregate.key, aggregate.link, timed.column(EXPIRES)
        )

    def _swept(
        self,
        conn: psycopg.Connection,
        aggregate: PartialAggregate,
        touched: pa.Table,
        watermarks: Mapping[int, int | None] | None,
    ) -> StateKeys:
        """Keys of stored rows the least of `watermarks` has passed (none while a partition
        has none), but `touched`'s: the merge writes those back bounded (``bounded``)."""
        least = least_watermark(watermarks)
        if aggregate.expires_query is None or least is None:
            return StateKeys()
        passed = self._load_expired(conn, aggregate.view, least)
        keys = state.keys(touched, aggregate.key)
        held = set(zip(keys.texts, keys.ms, strict=True))
        kept = [k for k in zip(passed.texts, passed.ms, strict=True) if k not in held]
        return StateKeys([k[0] for k in kept], [k[1] for k in kept])

    def bounded(
        self,
        aggregate: PartialAggregate,
        rows: pa.Table,
        watermarks: Mapping[int, int | None] | None,
    ) -> tuple[pa.Table, pa.Table]:
        """The partial rows a stream writes back, for a state bounded by the watermark without
        the facts `watermarks` have passed (``PartialAggregate.expire``: search_conversions'
        by the least of them, a partition with None holding everything back), and the rows
        left with none, whose keys the stream deletes. Any other state: `rows`, and none."""
        if aggregate.expire_query is None or not watermarks or rows.num_rows == 0:
            return rows, rows.slice(0, 0)
        marks = watermarks_table(watermarks)
        kept = self._run(aggregate.expire_query, in_partial=rows, in_watermarks=marks)
        left = set(state_rows.key_list(kept, aggregate.key))
        every = state_rows.key_list(rows, aggregate.key)
        emptied = rows.filter(pa.array([key not in left for key in every], pa.bool_()))
        return kept, emptied

    def _sessions(
        self, conn: psycopg.Connection, events: pa.Table, cutoff: int | None, merged: Merged
    ) -> int:
        """Sessions of the users with new events: their real-time sessions within reach of
        the new events (and the sessions another layer leaves open, if not yet continued)
        merged with the new ones; a user's other sessions are final and left alone."""
        fresh = self._run(SESSIONS.partial_query, in_events=events)
        users = sorted(set(fresh.column("user_id").to_pylist()))
        if not users:
            return 0
        near = reach(pc.min(fresh["session_start"]).as_py(), pc.max(fresh["session_end"]).as_py())
        known = sessions.stream_sessions(conn, self.stream, users, near)
        rows = self._merged_sessions(conn, users, cutoff, known, fresh, near)
        merged.changes.append(Replacement("sessions", rows, users=users, reach=near))
        return len(users)

    def _merged_sessions(
        self,
        conn: psycopg.Connection,
        users: list[str],
        cutoff: int | None,
        known: list[tuple],
        fresh: pa.Table,
        near: tuple[int, int] | None = None,
    ) -> pa.Table:
        """`known` sessions and the sessions another layer leaves open for `users` (those
        `near` the new events, if given), merged with `fresh` ones (the new events' sessions)
        by the shared session logic, as the store's columns."""
        seeds = self.session_seeds(conn, users, cutoff)
        if near is not None:  # a seed out of reach stays as it is, as a stored session does
            seeds = [s for s in seeds if to_ms(s[2]) >= near[0] and to_ms(s[1]) <= near[1]]
        seeds = dedupe_seeds(known + seeds)
        before = state_rows.intervals(seeds, SESSIONS.schema.to_pyarrow())
        merged = self._run(SESSIONS.merge_query, in_before=before, in_fresh=fresh)
        return store_table(merged, VIEWS["sessions"])

    # -- Lambda's hand-off: everything from the accepted events ---------------------------------

    def recompute(
        self,
        conn: psycopg.Connection,
        events: pa.Table,
        profiles: pa.Table,
        cutoff: int | None,
        logic: Query | None,
        watermarks: Mapping[int, int | None] | None = None,
    ) -> tuple[list[Change], dict[str, StateRows]]:
        """Every view's rows, a pattern view's matches, and state from `events` (those `logic`
        keeps): ``finish(partial(events))``; a view of the current state from its partial
        merged with the other layer's (``partial_seeds``) first; a state bounded by the
        watermark without what `watermarks` (as for `merge`) passed."""
        return self._recompute(conn, self._kept(events, logic), profiles, cutoff, watermarks)

    def _recompute(
        self,
        conn: psycopg.Connection,
        events: pa.Table,
        profiles: pa.Table,
        cutoff: int | None,
        watermarks: Mapping[int, int | None] | None,
    ) -> tuple[list[Change], dict[str, StateRows]]:
        changes: list[Change] = []
        states: dict[str, StateRows] = {}
        for aggregate in PARTIALS.values():
            if not aggregate.additive:
                continue
            partial = self._run(aggregate.partial_query, in_events=events, in_profiles=profiles)
            if VIEWS[aggregate.view].current_state:  # the other layer's partials, per key
                schema = aggregate.schema.to_pyarrow()
                seeds = state_rows.table(self.partial_seeds(conn, aggregate.view), schema)
                partial = self._run(aggregate.merge_query, in_before=seeds, in_fresh=partial)
            if aggregate.matches_query is not None:  # every match, an expired search's too
                spec = MATCH_SPECS[aggregate.view]
                found = self._run(aggregate.matches_query, in_partial=partial)
                changes.append(Replacement(spec.name, store_table(found, spec)))
            kept, _ = self.bounded(aggregate, partial, watermarks)
            states[aggregate.view] = self._state_rows(aggregate, kept)
            totals = self._run(aggregate.totals_query, in_partial=partial)
            states[totals_name(aggregate.view)] = state_rows.rows(
                self._db, totals, aggregate.total_key
            )
            rows = self._run(aggregate.finish_totals_query, in_totals=totals)
            changes.append(Replacement(aggregate.view, store_table(rows, VIEWS[aggregate.view])))
        fresh = self._run(SESSIONS.partial_query, in_events=events)
        users = sorted(set(fresh.column("user_id").to_pylist()))
        if users:
            changes.append(
                Replacement("sessions", self._merged_sessions(conn, users, cutoff, [], fresh))
            )
        else:
            changes.append(Replacement("sessions"))
        return changes, states
