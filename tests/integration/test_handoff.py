"""Lambda's hand-off: a new batch version takes over from the speed layer, with no double
count and no gap on either side of the cutoff, while events keep arriving."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from batch_layer import archiver
from batch_layer.errors import BatchError
from batch_layer.pipeline import run_batch
from core import workload
from core.catalog import VIEWS
from core.events import Event, ProfileChange, Rejected, parse_event
from core.kafka_io import produce_file
from core.oracle import (
    OracleResult,
    compute_views,
    keep_all_of,
    load_profiles_jsonl,
    logic_filter,
)
from core.settings import Settings
from core.store import state as stream_state
from core.store.connection import connect
from core.store.streams import LAMBDA_SPEED
from core.times import iso
from serving.main import create_app
from speed_layer.lambda_speed import SpeedLayer
from tests.integration.helpers import isolated_settings
from tests.serving_pages import ANSWERS, oracle_answers, read_answers


def _served(settings: Settings) -> dict[str, dict]:
    """Every view and pattern view's matches, as the API serves them (`ANSWERS`)."""
    with TestClient(create_app(settings)) as client:
        return read_answers(client.get)


def _assert_equal(served: dict[str, dict], expected: OracleResult) -> None:
    answers = oracle_answers(expected)
    for name in ANSWERS:
        assert served[name]["rows"] == answers[name], name


def _event_ids(lines: list[bytes]) -> set[str]:
    ids = set()
    for line in lines:
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("event_id"), str):
            ids.add(obj["event_id"])
    return ids


def expected_events(lines: list[bytes], kept: Callable[[Event], bool]) -> list[Event]:
    """The valid first occurrences of `lines` that `kept` keeps."""
    seen: set[str] = set()
    events = []
    for line in lines:
        parsed = parse_event(line)
        if isinstance(parsed, Rejected) or parsed.event_id in seen:
            continue
        seen.add(parsed.event_id)
        if kept(parsed):
            events.append(parsed)
    return events


def expected_across_the_cutoff(
    lines: list[bytes],
    profile_changes: list[ProfileChange],
    cutoff: int,
    speed_side: Callable[[Event], bool],
    batch_side: Callable[[Event], bool],
) -> OracleResult:
    """The merged answer: a tumbling window before the cutoff is the batch's, computed from
    what the batch saw (a search there counts a click of the 30 minutes after the cutoff,
    late or not: the batch sees every event), and so are its searches' matches; every other
    row as the speed layer kept it."""
    speed = compute_views(lines, profile_changes, keep=speed_side)
    batch = compute_views(lines, profile_changes, keep=batch_side)
    for name, spec in VIEWS.items():
        if spec.straddles_cutoff:
            continue
        order = (*spec.keys, *spec.time_fields)
        speed.views[name] = sorted(
            [row for row in batch.views[name] if row["window_start"] < iso(cutoff)]
            + [row for row in speed.views[name] if row["window_start"] >= iso(cutoff)],
            key=lambda row: tuple(row[field] for field in order),
        )
    # The matches as the views: a search before the cutoff is the batch's (``oracle_answers``
    # puts them in reading order).
    speed.matches = [m for m in batch.matches if m["window_start"] < iso(cutoff)] + [
        m for m in speed.matches if m["window_start"] >= iso(cutoff)
    ]
    return speed


def _user_with_orders_before(events: list[Event], cutoff: int) -> tuple[str, int]:
    """A user with orders, all before `cutoff` (event time), and their revenue."""
    orders: dict[str, list[Event]] = {}
    for event in events:
        if event.type == "order":
            orders.setdefault(event.user_id, []).append(event)
    for user, placed in sorted(orders.items()):
        if all(order.event_ts < cutoff for order in placed):
            return user, sum(order.amount_cents or 0 for order in placed)
    raise AssertionError("the workload has no user whose orders all lie before the cutoff")


def test_handoff_is_exact_on_both_sides_of_the_cutoff(
    stack: Settings,
    spark,
    tmp_path: Path,  # type: ignore[no-untyped-def]
) -> None:
    settings = isolated_settings(stack, "handoff")
    events, profiles = tmp_path / "events.jsonl", tmp_path / "events.profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=41, events=5000), events, profiles)
    lines = events.read_bytes().splitlines()
    split = len(lines) * 6 // 10
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_bytes(b"\n".join(lines[:split]) + b"\n")
    second.write_bytes(b"\n".join(lines[split:]) + b"\n")
    profile_changes = load_profiles_jsonl(profiles)
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, first, settings.events_topic)

    speed = SpeedLayer(spark, settings)

    def late_ids() -> set[str]:
        with connect(settings) as conn:
            return stream_state.late_event_ids(conn, LAMBDA_SPEED)

    # 1. The speed layer alone answers for the first part of the log.
    speed.drain()
    dropped = late_ids()
    _assert_equal(
        _served(settings),
        compute_views(lines[:split], profile_changes, keep=lambda e: e.event_id not in dropped),
    )

    # 2. The batch layer archives and recomputes up to a cutoff; until the hand-off, readers
    #    still see the speed layer's answer, unchanged.
    archiver.drain(spark, settings)
    batch = run_batch(spark, settings, cutoff_ms=None)
    before = _served(settings)
    assert before["page_views"]["meta"]["view_version"] is None

    # 3. More events arrive; the speed layer hands off to the batch, then processes them.
    produce_file(settings, second, settings.events_topic)
    speed.drain()
    served = _served(settings)
    assert served["page_views"]["meta"]["view_version"] == batch.version
    assert served["page_views"]["meta"]["batch_cutoff"] is not None

    dropped = late_ids()
    in_second = _event_ids(lines[split:]) - _event_ids(lines[:split])
    cutoff = batch.cutoff_ms

    def processed(event: Event) -> bool:
        if event.event_id in in_second:  # only the speed layer saw these, from the cutoff on
            return event.event_ts >= cutoff and event.event_id not in dropped
        # The batch saw all of the first part; the speed layer what is after the cutoff.
        return event.event_ts < cutoff or event.event_id not in dropped

    def seen_by_the_batch(event: Event) -> bool:
        if event.event_id in in_second:
            return event.event_ts >= cutoff and event.event_id not in dropped
        return True

    def expected_with(logic: Callable[[Event], bool] | None = None) -> OracleResult:
        return expected_across_the_cutoff(
            lines,
            profile_changes,
            cutoff,
            keep_all_of(processed, logic),  # type: ignore[arg-type]
            keep_all_of(seen_by_the_batch, logic),  # type: ignore[arg-type]
        )

    expected = expected_with()
    _assert_equal(served, expected)
    # Both sides contribute, so the test exercises the hand-off rather than one layer alone.
    starts = [row["window_start"] for row in served["unique_users"]["rows"]]
    assert min(starts) < served["page_views"]["meta"]["batch_cutoff"] <= max(starts)

    # 3b. The table-table join across the hand-off: a profile change after the cutoff, for a
    #     user whose orders all lie before it, moves that user's batch-side revenue at once
    #     (the batch's partial and the speed layer's combine per user, before the join).
    user, revenue = _user_with_orders_before(expected_events(lines, processed), cutoff)
    change = tmp_path / "change.profiles.jsonl"
    moved = ProfileChange(user, "moved-after-cutoff", cutoff + 3_600_000)
    change.write_text(json.dumps(asdict(moved)) + "\n")
    produce_file(settings, change, settings.profiles_topic)
    speed.drain()
    profile_changes.append(moved)
    served = _served(settings)
    expected = expected_with()
    _assert_equal(served, expected)
    assert {"segment": moved.segment, "users": 1, "revenue_cents": revenue} in served[
        "segment_totals"
    ]["rows"]

    # 4. A batch of another logic version (as `lambda_reprocess` writes it) at the same cutoff:
    #    at its hand-off the real-time rows follow the new logic too, so every answer, on both
    #    sides of the cutoff, is logic 2's. A cutoff before the published one is refused.
    with pytest.raises(BatchError, match="before the published batch's"):
        run_batch(spark, settings, cutoff_ms=cutoff - 3_600_000, logic_version="2")
    relogic = run_batch(spark, settings, cutoff_ms=cutoff, logic_version="2")
    assert speed.handoff() == relogic.version
    served = _served(settings)
    expected = expected_with(logic_filter("2"))
    _assert_equal(served, expected)
    assert expected.views != expected_with().views
    # A scheduled batch after it keeps the published logic.
    assert run_batch(spark, settings, cutoff_ms=None).version > relogic.version
    speed.handoff()
    _assert_equal(_served(settings), expected)
