"""The streams' keyed state in Postgres: keys are typed columns, and a store from before, which
kept each key as the JSON of its columns, is carried over once with nothing lost."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest

from core.settings import Settings
from core.store import state
from core.store.connection import connect, connection_kwargs
from core.store.state import NO_MS, NO_TEXT, StateKeys, StateRows, StateUpdate, StateWrites
from tests.integration.helpers import own_database

OLD_STATE = """create table stream_state (
    stream text not null, view text not null, key text not null, value text not null,
    primary key (stream, view, key))"""
OLD_ROWS = [
    # (view, key as the JSON of its columns, value)
    ("page_views", '{"page":"/café \\"x\\"","_window_start_ms":1793520060000}', '{"count":3}'),
    ("search_ctr", '{"search_id":"e-7-12"}', '{"search_id":"e-7-12","clicks":[]}'),
    ("unique_users:totals", '{"_window_start_ms":1793523600000}', '{"users":9,"_rows":9}'),
]


@pytest.fixture
def store(stack: Settings) -> Iterator[Settings]:
    with own_database(stack, "state") as settings:
        yield settings


def test_a_store_from_before_keeps_every_state_row_under_its_typed_key(store: Settings) -> None:
    with psycopg.connect(**connection_kwargs(store), autocommit=True) as old:
        old.execute(OLD_STATE)
        for view, key, value in OLD_ROWS:
            old.execute("insert into stream_state values ('s', %s, %s, %s)", (view, key, value))
    with connect(store) as conn:  # the first connection brings the store up to date
        found = {
            name: state.load(conn, "s", name, keys)
            for name, keys in (
                ("page_views", StateKeys(['/café "x"'], [1793520060000])),
                ("search_ctr", StateKeys(["e-7-12"], [NO_MS])),
                ("unique_users:totals", StateKeys([NO_TEXT], [1793523600000])),
            )
        }
        assert found == {view: [value] for view, _key, value in OLD_ROWS}
        columns = conn.execute(
            "select column_name from information_schema.columns "
            "where table_name = 'stream_state' order by column_name"
        ).fetchall()
        assert [c for (c,) in columns] == [
            "expires_ms",
            "key_ms",
            "key_text",
            "link_text",
            "stream",
            "value",
            "view",
        ]


def test_a_key_is_its_values_written_looked_up_and_deleted_alike(store: Settings) -> None:
    keys = StateKeys(["u-1", "u-1", "ü\n\\u0000"], [0, 60_000, -(2**63)])
    rows = StateRows(keys, ['{"a":1}', '{"a":2}', '{"a":3}'])
    with connect(store) as conn:
        with conn.transaction():
            state.apply(conn, "s", 0, StateWrites(updates=[StateUpdate("v", upserts=rows)]))
        assert sorted(state.load(conn, "s", "v", keys)) == ['{"a":1}', '{"a":2}', '{"a":3}']
        assert state.load(conn, "s", "v", StateKeys(["u-1"], [1])) == []
        assert state.load(conn, "s", "other", keys) == []
        again = StateRows(StateKeys(["u-1"], [60_000]), ['{"a":5}'])
        gone = StateKeys(["ü\n\\u0000"], [-(2**63)])
        with conn.transaction():
            update = StateUpdate("v", upserts=again, deletes=gone)
            state.apply(conn, "s", 1, StateWrites(updates=[update]))
        assert sorted(state.load(conn, "s", "v", keys)) == ['{"a":1}', '{"a":5}']
        assert state.sizes(conn, "s")["v"]["rows"] == 2
