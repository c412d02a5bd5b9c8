"""Change data capture on the real stack: `lk profiles` writes the application's user table,
Debezium on Kafka Connect carries each change into `profiles` as `lk produce` would write it,
and bad input is refused in one line with nothing changed."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from core import workload
from core.cdc import capture
from core.cdc.provision import lsn, slot_confirmed, slot_retained_bytes
from core.cdc.table import app_connection, users
from core.kafka_io import end_offsets, partition_for, read_topic
from core.settings import Settings
from core.store.connection import admin_connection
from tests.conftest import run_lk
from tests.integration.helpers import isolated_settings, settings_env
from tests.isolation import drop_isolated


@pytest.fixture(scope="module")
def captured(stack: Settings) -> Iterator[Settings]:
    """A namespace of its own (topics, app database, connector, slot) on the stack's Connect."""
    # A heartbeat every second, so that the test of the slot's idle moves waits seconds.
    settings = isolated_settings(stack, "cdc").model_copy(update={"cdc_heartbeat_ms": 1000})
    capture.start(settings)
    yield settings
    capture.stop(settings)
    drop_isolated(stack, settings)


Record = tuple[bytes | None, dict[str, Any] | None, int]


def _records(settings: Settings) -> dict[int, list[Record]]:
    by_partition: dict[int, list[Record]] = defaultdict(list)
    for r in read_topic(settings, settings.profiles_topic):
        value = None if r.value is None else json.loads(r.value)
        by_partition[r.partition].append((r.key, value, r.timestamp_ms))
    return by_partition


def _expected(lines: list[dict[str, Any]], partitions: int) -> dict[int, list[Record]]:
    """What `lk produce --topic profiles` writes for these lines, per partition in file order,
    with a delete's re-stamp (the same segment, at the delete's time) before its tombstone."""
    segment: dict[str, str] = {}
    by_partition: dict[int, list[Record]] = defaultdict(list)
    for line in lines:
        user, ts = line["user_id"], line["updated_ts"]
        records = by_partition[partition_for(user.encode(), partitions)]
        if line.get("tombstone"):
            records.append(
                (
                    user.encode(),
                    {"user_id": user, "segment": segment.pop(user), "updated_ts": ts},
                    ts,
                )
            )
            records.append((user.encode(), None, ts))
        else:
            segment[user] = line["segment"]
            records.append(
                (user.encode(), {"user_id": user, "segment": line["segment"], "updated_ts": ts}, ts)
            )
    return by_partition


def test_apply_writes_each_change_as_its_record_keyed_timestamped_in_order(
    captured: Settings, tmp_path: Path
) -> None:
    out = tmp_path / "events.jsonl"
    profiles = workload.default_profiles_path(out)
    workload.generate(workload.WorkloadSpec(seed=5, events=1500), out, profiles)
    lines = [json.loads(line) for line in profiles.read_text().splitlines()]
    assert any(line.get("tombstone") for line in lines)

    result = run_lk("profiles", "apply", "--file", str(profiles), env=settings_env(captured))
    assert result.returncode == 0, result.stderr
    assert f"{len(lines):,} change(s) committed" in result.stdout
    assert "captured into" in result.stdout

    # Returned once captured: everything is in the topic now, with no wait of the test's own.
    assert _records(captured) == _expected(lines, captured.profiles_partitions)


def test_set_and_delete_take_effect_at_the_given_time(captured: Settings) -> None:
    env = settings_env(captured)
    assert (
        run_lk(
            "profiles", "set", "--user", "cdc-a", "--segment", "gold", "--at", "1000", env=env
        ).returncode
        == 0
    )
    assert (
        run_lk(
            "profiles", "set", "--user", "cdc-a", "--segment", "pro", "--at", "2000", env=env
        ).returncode
        == 0
    )
    result = run_lk("profiles", "delete", "--user", "cdc-a", "--at", "5000", env=env)
    assert result.returncode == 0, result.stderr

    partition = partition_for(b"cdc-a", captured.profiles_partitions)
    mine = [r for r in _records(captured)[partition] if r[0] == b"cdc-a"]
    assert mine == [
        (b"cdc-a", {"user_id": "cdc-a", "segment": "gold", "updated_ts": 1000}, 1000),
        (b"cdc-a", {"user_id": "cdc-a", "segment": "pro", "updated_ts": 2000}, 2000),
        (b"cdc-a", {"user_id": "cdc-a", "segment": "pro", "updated_ts": 5000}, 5000),
        (b"cdc-a", None, 5000),  # the tombstone, later in the log: on the tie, it counts
    ]


@pytest.mark.parametrize(
    ("args", "reason", "code"),
    [
        (["delete", "--user", "nobody-here"], "no profile of user 'nobody-here' to delete", 1),
        (
            ["set", "--user", "u1", "--segment", "x", "--at", "soon"],
            "'soon' is not a valid integer",
            2,
        ),
        (["set", "--user", "u1", "--segment", "x", "--at", "-5"], "updated_ts must be >= 0", 1),
    ],
)
def test_bad_input_is_refused_in_one_line_and_changes_nothing(
    captured: Settings, args: list[str], reason: str, code: int
) -> None:
    before = end_offsets(captured, captured.profiles_topic)
    with app_connection(captured) as conn:
        table_before = users(conn)
    result = run_lk("profiles", *args, env=settings_env(captured))
    assert result.returncode == code
    assert result.stderr.strip().count("\n") == 0 and result.stderr.startswith("lk: error: ")
    assert reason in result.stderr
    with app_connection(captured) as conn:
        assert users(conn) == table_before
    assert end_offsets(captured, captured.profiles_topic) == before


def test_a_bad_line_is_named_and_no_line_of_the_file_is_applied(
    captured: Settings, tmp_path: Path
) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text(
        '{"user_id": "cdc-b", "segment": "free", "updated_ts": 10}\n'
        '{"user_id": "cdc-b", "updated_ts": 20}\n'
    )
    unknown = tmp_path / "unknown.jsonl"
    unknown.write_text(
        '{"user_id": "cdc-c", "segment": "free", "updated_ts": 10}\n'
        '{"user_id": "cdc-d", "tombstone": true, "updated_ts": 20}\n'
    )
    with app_connection(captured) as conn:
        table_before = users(conn)
    for path, reason in (
        (bad, f"{bad}:2: profile segment"),
        (unknown, f"{unknown}:2: no profile of user 'cdc-d'"),
    ):
        result = run_lk("profiles", "apply", "--file", str(path), env=settings_env(captured))
        assert result.returncode == 1
        assert result.stderr.startswith(f"lk: error: {reason}"), result.stderr
    with app_connection(captured) as conn:
        assert users(conn) == table_before


def test_the_heartbeat_moves_the_slot_while_the_table_is_idle_and_others_write(
    captured: Settings,
) -> None:
    """Another database of the server (the serving store) writes WAL while `profiles` is idle:
    the connector's heartbeat still moves its slot past it, so the slot does not hold it."""
    import time
    import uuid

    filler = f"cdc_wal_{uuid.uuid4().hex[:8]}"
    with admin_connection(captured, captured.postgres_db) as conn:
        conn.execute(f"create table {filler} (n int, pad text)")
        conn.execute(
            f"insert into {filler} select n, repeat('x', 200) from generate_series(1, 50000) n"
        )
        conn.execute(f"drop table {filler}")
        row = conn.execute("select pg_current_wal_lsn()::text").fetchone()
    assert row is not None
    written = lsn(row[0])

    def held() -> int:
        return slot_retained_bytes(captured) or 0

    # The confirmed position follows within a heartbeat; the WAL the slot holds (from its
    # restart position) a little later: Postgres moves that at its next snapshot of running
    # transactions, which it logs every 15 s while the server writes.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (
        (slot_confirmed(captured) or 0) < written or held() >= 10 * 2**20
    ):
        time.sleep(0.5)
    assert (slot_confirmed(captured) or 0) >= written
    assert held() < 10 * 2**20  # the 10+ MB written elsewhere are not held
