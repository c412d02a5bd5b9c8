"""Small helpers for integration tests: fresh topics, the env a subprocess `lk` needs.

A namespace of a test's own (topics, buckets, database) comes from `tests.isolation`, which the
benchmarks share; it is re-exported here for the tests that import it from this module.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from core import workload
from core.settings import Settings
from tests.isolation import fresh_topic_named, isolated_settings, settings_env

__all__ = [
    "apply_profiles_through_faults",
    "fresh_topic",
    "fresh_topic_named",
    "isolated_settings",
    "own_database",
    "settings_env",
    "workload_in_parts",
]


def fresh_topic(
    settings: Settings, prefix: str, partitions: int = 6, config: dict[str, str] | None = None
) -> str:
    """Create a topic no other test uses, so assertions see only this test's records."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    fresh_topic_named(settings, name, partitions, config)
    return name


def workload_in_parts(
    folder: Path, seed: int, events: int, parts: int
) -> tuple[list[Path], Path, Path]:
    """A generated workload's events cut into `parts` files of consecutive lines (to produce
    one after another), its profiles, and the whole events file."""
    all_events, profiles = folder / "events.jsonl", folder / "profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=seed, events=events), all_events, profiles)
    lines = all_events.read_bytes().splitlines(keepends=True)
    size = -(-len(lines) // parts)
    files = []
    for n in range(parts):
        part = folder / f"events-{n}.jsonl"
        part.write_bytes(b"".join(lines[n * size : (n + 1) * size]))
        files.append(part)
    return files, profiles, all_events


@contextmanager
def own_database(stack: Settings, prefix: str) -> Iterator[Settings]:
    """The stack's settings pointing at a serving database of their own, dropped afterwards."""
    from psycopg import sql

    from core.store.connection import connect

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = stack.model_copy(update={"postgres_db": "postgres"})
    with connect(admin) as conn:
        conn.execute(sql.SQL("create database {}").format(sql.Identifier(name)))
    try:
        yield stack.model_copy(update={"postgres_db": name})
    finally:
        with connect(admin) as conn:
            conn.execute(sql.SQL("drop database {} with (force)").format(sql.Identifier(name)))


FAULT_APPLY_S = 30.0
"""How long an apply with faults takes (its rate follows): long enough that both faults land
in its middle, one after the other."""


def apply_profiles_through_faults(stack: Settings, settings: Settings, path: Path) -> None:
    """`lk profiles apply --rate` of a workload's profiles (a user's process) while, a quarter
    of the way in, Kafka Connect is killed (SIGKILL) and started again and, once it captures
    again and two thirds of the way in, Postgres restarts; then waited for until every change
    is in the topic. The capture resumes from Connect's last committed offset (a change may
    come twice) and from the slot (none is lost); the application connects again; Debezium
    restarts its task itself after the database went away."""
    import os
    import signal
    import subprocess
    import sys
    import time

    from core.cdc.arrival import profiles_end, wait_captured
    from core.cdc.table import read_changes
    from infra.stack.connect import KafkaConnect
    from infra.stack.postgres import Postgres
    from infra.stack.process import wait_until

    since = profiles_end(settings)
    changes, _ = read_changes(path)
    lk = Path(sys.executable).with_name("lk")
    rate = len(changes) / FAULT_APPLY_S
    command = [str(lk), "profiles", "apply", "--file", str(path), "--rate", f"{rate:.3f}"]
    apply = subprocess.Popen(
        [*command, "--no-wait"],
        env={**os.environ, **settings.as_env()},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    started = time.monotonic()
    time.sleep(FAULT_APPLY_S / 4)
    connect = KafkaConnect(stack)
    pid = connect.process.pid()
    assert pid is not None, "the stack's Kafka Connect is not running"
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: connect.process.pid() is None, 30, interval_s=0.1)
    held = sum(profiles_end(settings).values())
    connect.up()
    # Capturing again (the apply goes on writing), before the second fault: two faults at
    # once are another test.
    assert wait_until(lambda: sum(profiles_end(settings).values()) > held, 60, interval_s=0.2)
    time.sleep(max(0.0, started + 2 * FAULT_APPLY_S / 3 - time.monotonic()))
    postgres = Postgres(stack)
    postgres.stop()
    postgres.up()
    out, err = apply.communicate(timeout=300)
    assert apply.returncode == 0, err
    assert "connected again" in out, out  # the restart landed in the apply's middle
    wait_captured(settings, since, changes, timeout_s=120)
