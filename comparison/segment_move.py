"""The segment-move scenario: a batch of users moves to a segment of their own in one
transaction of the user table (change data capture carries it; where no Kafka Connect runs,
one batch produced into `profiles`), `lk compare --moves` times over. Each move is timed from
its commit until `segment_totals`, as the serving layer answers, counts every moved user in
the new segment; then what each profile join made of the last one: the table-table join moves
all their orders, the as-of join keeps the old ones in the old segments."""

from __future__ import annotations

import json
import time
from typing import Any

from comparison.context import Context, span
from comparison.errors import ComparisonError
from comparison.figures import AS_OF_JOIN, SegmentMove, all_seen_percentile
from comparison.sampler import ARCHITECTURES, served_view
from core.cdc.table import write_batch
from core.events import Event, ProfileChange, parse_event
from core.kafka_io import produce_file
from core.settings import Settings

MOVED_USERS = 20
SEGMENT_MOVE_TIMEOUT_S = 120.0
POLL_S = 0.1


def segment_move(ctx: Context) -> None:
    def body(notes: list[str]) -> None:
        settings = ctx.settings
        users = _users_with_orders(ctx, MOVED_USERS)
        if not users:
            raise ComparisonError("segment-move: no user with an order and a profile to move")
        seen: dict[str, list[float | None]] = {a: [] for a in ARCHITECTURES}
        for move in range(1, ctx.moves + 1):
            segment = f"moved-{int(time.time())}-{move}"  # its own: its row is theirs alone
            expected_users = _move(ctx, users, segment, move)
            for a, seconds in _visible(settings, segment, expected_users).items():
                seen[a].append(seconds)
        served_totals = {
            a: _segment_row(served_view(settings, a, "segment_totals"), segment)
            for a in ARCHITECTURES
        }
        as_of = {
            a: sum(
                r["revenue_cents"]
                for r in served_view(settings, a, AS_OF_JOIN)
                if r["segment"] == segment
            )
            for a in ARCHITECTURES
        }
        ctx.run.segment_move = SegmentMove(
            users=len(users),
            segment=segment,
            through="database" if settings.cdc_enabled else "topic",
            visible_s={a: all_seen_percentile(each, 50) for a, each in seen.items()},
            expected_moved_cents={
                a: int((r or {}).get("revenue_cents", 0)) for a, r in expected_users.items()
            },
            served_moved_cents={
                a: int((r or {}).get("revenue_cents", 0)) for a, r in served_totals.items()
            },
            as_of_new_segment_cents=as_of,
            each_visible_s=seen,
        )
        how = (
            "in one transaction of the user table"
            if settings.cdc_enabled
            else "in one batch to the topic"
        )
        if ctx.moves == 1:
            notes.append(f"{len(users)} users moved to {segment} {how}")
        else:
            notes.append(f"{len(users)} users moved segment {ctx.moves} times, each {how}")
        for a, each in seen.items():
            if None in each:
                notes.append(f"{a}: a move not visible in segment_totals within the timeout")
            else:
                times = ", ".join(f"{s:.2f}s" for s in each if s is not None)
                notes.append(f"{a}: visible in segment_totals after the commit: {times}")

    span(ctx, "segment-move", "A profile changes in the database: users move segment", body)


def _move(
    ctx: Context, users: list[str], segment: str, move: int
) -> dict[str, dict[str, Any] | None]:
    """Every user of `users` moved to `segment` at once, the changes added to the run's record
    of its moves (`profiles-moved.jsonl`); per architecture, the oracle's row of the new
    segment in `segment_totals` (over the events that architecture kept)."""
    settings = ctx.settings
    at_ms = int(time.time() * 1000)
    changes = [ProfileChange(user, segment, at_ms) for user in users]
    ctx.extra_profiles += changes
    oracle = {a: ctx.full_history_oracle(a) for a in ARCHITECTURES}
    lines = "".join(
        json.dumps({"user_id": c.user_id, "segment": c.segment, "updated_ts": at_ms}) + "\n"
        for c in changes
    )
    with ctx.profiles_file.with_name("profiles-moved.jsonl").open("a") as record:
        record.write(lines)
    if settings.cdc_enabled:
        write_batch(settings, changes)  # one transaction: every user moves at once
    else:
        this_move = ctx.profiles_file.with_name(f"profiles-move-{move}.jsonl")
        this_move.write_text(lines)
        produce_file(settings, this_move, settings.profiles_topic)
    return {a: _segment_row(oracle[a]["segment_totals"], segment) for a in oracle}


def _visible(
    settings: Settings, segment: str, expected: dict[str, dict[str, Any] | None]
) -> dict[str, float | None]:
    """Per architecture, seconds from now (the commit) until its `segment_totals`, as the
    serving layer answers, counts `expected`'s users in `segment` (None: not in the timeout)."""
    committed = time.monotonic()
    visible: dict[str, float | None] = dict.fromkeys(expected)
    while None in visible.values() and time.monotonic() - committed < SEGMENT_MOVE_TIMEOUT_S:
        for a in [a for a, seen in visible.items() if seen is None]:
            row = _segment_row(served_view(settings, a, "segment_totals"), segment)
            wanted = expected[a]
            if row is not None and wanted is not None and row["users"] == wanted["users"]:
                visible[a] = time.monotonic() - committed
        time.sleep(POLL_S)
    return visible


def _users_with_orders(ctx: Context, most: int) -> list[str]:
    """Users with an order among the events produced and a profile now (not deleted)."""
    latest: dict[str, ProfileChange] = {}
    for change in [*ctx.sampler.profiles, *ctx.extra_profiles]:
        latest[change.user_id] = change
    ordering = set()
    for line in ctx.feed.lines[: ctx.feed.produced_lines]:
        event = parse_event(line)
        if isinstance(event, Event) and event.amount_cents:
            ordering.add(event.user_id)
    profiled = {u for u, c in latest.items() if not c.is_tombstone}
    return sorted(ordering & profiled)[:most]


def _segment_row(rows: list[dict[str, Any]], segment: str) -> dict[str, Any] | None:
    return next((r for r in rows if r["segment"] == segment), None)
