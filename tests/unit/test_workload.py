"""The workload generator: deterministic, realistic, and its stats match what it wrote.

Every property is checked by reading the files back with the contract's own parser
(``core.events.parse_event``), never by trusting the generator's bookkeeping.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from core import workload
from core.events import (
    MISSING_FIELD,
    NOT_JSON,
    REASON_CODES,
    WRONG_TYPE,
    Event,
    ProfileChange,
    Rejected,
    parse_event,
    parse_profile_line,
    reason_code,
)
from core.kafka_io import partition_for
from core.workload import (
    DEFAULT_START_MS,
    PAGES,
    QUERIES,
    WorkloadSpec,
    WorkloadStats,
    default_profiles_path,
    generate,
    summary,
)

MINUTE = 60_000
HOUR = 60 * MINUTE
THIRTY_MIN = 30 * MINUTE
WATERMARK = 10 * MINUTE
SEED = 11
EVENTS = 5_000


@dataclass
class Line:
    text: str
    doc: Any  # the decoded JSON, or None when the line is not JSON
    parsed: Event | Rejected


@dataclass
class Workload:
    spec: WorkloadSpec
    stats: WorkloadStats
    events_path: Path
    profiles_path: Path
    lines: list[Line]
    first: dict[str, Event]  # event_id -> first valid occurrence, in log order
    first_index: dict[str, int]  # event_id -> line number of that occurrence
    profiles: list[ProfileChange]


def _decode(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _load(spec: WorkloadSpec, folder: Path) -> Workload:
    events_path = folder / "events.jsonl"
    profiles_path = default_profiles_path(events_path)
    stats = generate(spec, events_path, profiles_path)
    raw = events_path.read_text(encoding="utf-8")
    texts = raw.split("\n")
    assert texts[-1] == "", "the file must end with a newline"
    lines = [Line(t, _decode(t), parse_event(t)) for t in texts[:-1]]
    first: dict[str, Event] = {}
    first_index: dict[str, int] = {}
    for i, line in enumerate(lines):
        if isinstance(line.parsed, Event) and line.parsed.event_id not in first:
            first[line.parsed.event_id] = line.parsed
            first_index[line.parsed.event_id] = i
    profile_text = profiles_path.read_text(encoding="utf-8").splitlines()
    profiles = [parse_profile_line(json.loads(t)) for t in profile_text]
    return Workload(spec, stats, events_path, profiles_path, lines, first, first_index, profiles)


@pytest.fixture(scope="module")
def wl(tmp_path_factory: pytest.TempPathFactory) -> Workload:
    return _load(WorkloadSpec(seed=SEED, events=EVENTS), tmp_path_factory.mktemp("workload"))


def _valid(wl: Workload) -> list[Event]:
    return list(wl.first.values())


# --- determinism ------------------------------------------------------------------------------


def test_same_seed_gives_identical_bytes_and_another_seed_differs(tmp_path: Path) -> None:
    spec = WorkloadSpec(seed=5, events=2_000)
    outputs = []
    for name, seed in (("a", 5), ("b", 5), ("c", 6)):
        events = tmp_path / name / "events.jsonl"
        profiles = tmp_path / name / "profiles.jsonl"
        generate(WorkloadSpec(seed=seed, events=spec.events), events, profiles)
        outputs.append((events.read_bytes(), profiles.read_bytes()))
    assert outputs[0] == outputs[1]
    assert outputs[0][0] != outputs[2][0]
    assert outputs[0][1] != outputs[2][1]


def test_ids_are_counters_of_the_seed(wl: Workload) -> None:
    for event in _valid(wl):
        prefix, seed, number = event.event_id.rsplit("-", 2)
        assert (prefix, seed) == ("e", str(SEED))
        assert number.isdigit()
        assert event.user_id.startswith("u-")
        assert event.user_id[2:].isdigit()


# --- shape and order of the log ---------------------------------------------------------------


def test_exactly_the_requested_number_of_single_line_records(wl: Workload) -> None:
    assert len(wl.lines) == EVENTS
    assert all(line.text and "\r" not in line.text for line in wl.lines)
    assert wl.stats.lines == EVENTS


def test_lines_are_in_arrival_order(wl: Workload) -> None:
    """Invariant: lines that are objects with an integer received_ts never go back in time."""
    received = [
        line.doc["received_ts"]
        for line in wl.lines
        if isinstance(line.doc, dict)
        and type(line.doc.get("received_ts")) is int  # not a bool, float or string
    ]
    assert len(received) > 0.98 * EVENTS
    assert all(a <= b for a, b in pairwise(received))
    # ... while event time is out of order (late and delayed events, retries)
    event_ts = [event.event_ts for event in _valid(wl)]
    inversions = sum(1 for a, b in pairwise(event_ts) if b < a)
    assert inversions > 0.01 * len(event_ts)


def test_event_time_stays_in_the_span(wl: Workload) -> None:
    spec = wl.spec
    assert spec.start_ms == DEFAULT_START_MS
    event_ts = [event.event_ts for event in _valid(wl)]
    assert min(event_ts) >= spec.start_ms
    assert max(event_ts) < spec.start_ms + 4 * HOUR
    # spread over the whole span, not bunched: every 15 minutes has events
    quarters = Counter((ts - spec.start_ms) // (15 * MINUTE) for ts in event_ts)
    assert sorted(quarters) == list(range(16))
    assert min(quarters.values()) > 0.4 * len(event_ts) / 16


# --- invalid records --------------------------------------------------------------------------


def test_about_one_percent_invalid_covering_every_kind(wl: Workload) -> None:
    rejected = [line for line in wl.lines if isinstance(line.parsed, Rejected)]
    assert len(rejected) == wl.spec.invalid_lines == round(0.01 * EVENTS)
    reasons = Counter(line.parsed.reason for line in rejected if isinstance(line.parsed, Rejected))
    codes = Counter(reason_code(reason) for reason in reasons.elements())
    assert set(codes) == set(REASON_CODES)
    assert dict(reasons) == wl.stats.invalid_reasons
    assert dict(codes) == {code: n for code, n in wl.stats.invalid.items() if n}
    assert wl.stats.invalid_total == len(rejected)


def test_invalid_objects_carry_a_user_id_and_variants_are_realistic(wl: Workload) -> None:
    rejected = [(line, line.parsed) for line in wl.lines if isinstance(line.parsed, Rejected)]
    for line, _ in rejected:
        if isinstance(line.doc, dict):
            assert isinstance(line.doc.get("user_id"), str)
            assert line.doc["user_id"].startswith("u-")
    not_json = [(line.text, why.reason) for line, why in rejected if line.doc is None]
    assert all(reason == NOT_JSON for _, reason in not_json)
    assert any(text.startswith('{"event_id":') for text, _ in not_json)  # a truncated record
    field_of = {line.text: why.reason.partition(":")[2] for line, why in rejected}
    mistyped = [
        line.doc[field_of[line.text]]
        for line, why in rejected
        if reason_code(why.reason) == WRONG_TYPE
    ]
    assert {str, float, bool} <= {type(value) for value in mistyped}  # "123", 1.5, true
    missing = [line for line, why in rejected if reason_code(why.reason) == MISSING_FIELD]
    assert any(field_of[line.text] not in line.doc for line in missing)  # absent, not null
    assert any(line.doc.get(field_of[line.text], 0) is None for line in missing)  # null


# --- duplicates -------------------------------------------------------------------------------


def test_duplicates_are_retries_of_the_same_payload(wl: Workload) -> None:
    copies = 0
    for i, line in enumerate(wl.lines):
        event = line.parsed
        if not isinstance(event, Event) or wl.first_index[event.event_id] == i:
            continue
        copies += 1
        original = wl.first[event.event_id]
        assert i > wl.first_index[event.event_id]
        assert (event.user_id, event.device_ts, event.sent_ts) == (
            original.user_id,
            original.device_ts,
            original.sent_ts,
        )
        assert event.received_ts > original.received_ts
        assert event.received_ts - original.received_ts <= wl.spec.max_retry_delay_ms * 2
        same = dict(line.doc, received_ts=original.received_ts)
        assert same == wl.lines[wl.first_index[event.event_id]].doc
    assert copies == wl.stats.duplicates == wl.spec.duplicate_lines == round(0.015 * EVENTS)


# --- event time, skew and lateness ------------------------------------------------------------


def test_late_events_exist_and_are_counted(wl: Workload) -> None:
    """Late: behind a 10-minute watermark on the greatest event_ts seen so far in the log on
    the event's own partition of `events` (its user's, by Kafka's murmur2 partitioner)."""
    max_seen: dict[int, int] = {}
    late = []
    for i, line in enumerate(wl.lines):
        event = line.parsed
        if not isinstance(event, Event) or wl.first_index[event.event_id] != i:
            continue
        partition = partition_for(event.user_id.encode(), 6)
        seen = max_seen.get(partition)
        if seen is not None and event.event_ts < seen - WATERMARK:
            late.append(event)
        max_seen[partition] = event.event_ts if seen is None else max(seen, event.event_ts)
    assert len(late) == wl.stats.late_events
    assert 0.5 * 0.005 * len(wl.first) <= len(late) <= 2 * 0.005 * len(wl.first)
    for event in late:
        assert 11 * MINUTE <= event.received_ts - event.event_ts <= 90 * MINUTE


def test_clock_skew_is_corrected_by_the_event_time_formula(wl: Workload) -> None:
    valid = _valid(wl)
    # how far each user's device clock is from event time (the skew, less network latency)
    device_off = {event.user_id: abs(event.device_ts - event.event_ts) for event in valid}
    assert sum(1 for d in device_off.values() if d > HOUR) >= 1  # badly skewed devices
    assert sum(1 for d in device_off.values() if d > 5 * MINUTE) >= 3
    assert sum(1 for d in device_off.values() if d > 1_000) > 0.15 * len(device_off)
    assert sum(1 for d in device_off.values() if d < 1_000) > 0.5 * len(device_off)
    delays = [event.received_ts - event.event_ts for event in valid]
    assert all(0 <= d <= 90 * MINUTE for d in delays)
    assert sum(1 for d in delays if d < 2_000) > 0.9 * len(valid)  # within seconds
    assert sum(1 for d in delays if d > WATERMARK) <= 2 * 0.005 * len(valid)
    assert all(event.device_ts <= event.sent_ts for event in valid)


# --- behaviour: sessions, searches and clicks, pages, orders ---------------------------------


def test_clicks_reference_searches_of_the_same_user(wl: Workload) -> None:
    searches = {e.event_id: e for e in _valid(wl) if e.type == "search"}
    clicks = [e for e in _valid(wl) if e.type == "click"]
    assert len(clicks) > 0.5 * len(searches) > 0
    gaps = []
    for click in clicks:
        search = searches[click.search_id or ""]
        assert search.user_id == click.user_id
        gaps.append(click.event_ts - search.event_ts)
    assert all(gap >= 0 for gap in gaps)
    at_30 = sum(1 for gap in gaps if gap == THIRTY_MIN)
    after_30 = sum(1 for gap in gaps if gap > THIRTY_MIN)
    assert at_30 == wl.stats.clicks_at_30_min > 0
    assert after_30 == wl.stats.clicks_after_30_min > 0
    assert any(gap == THIRTY_MIN + 1 for gap in gaps)  # one ms too late
    assert sum(1 for gap in gaps if gap < 5 * MINUTE) > 0.6 * len(gaps)
    clicked = {click.search_id for click in clicks}
    assert 0.3 * len(searches) < len(clicked) < 0.9 * len(searches)  # not every search


def test_sessions_exercise_the_thirty_minute_boundary(wl: Workload) -> None:
    by_user: dict[str, list[int]] = defaultdict(list)
    for event in _valid(wl):
        by_user[event.user_id].append(event.event_ts)
    gaps: list[int] = []
    sessions = []
    for stamps in by_user.values():
        stamps.sort()
        user_gaps = [b - a for a, b in pairwise(stamps)]
        gaps += user_gaps
        sessions.append(1 + sum(1 for gap in user_gaps if gap > THIRTY_MIN))
    assert THIRTY_MIN in gaps  # one session
    assert THIRTY_MIN + 1 in gaps  # two sessions
    assert sum(1 for gap in gaps if gap > THIRTY_MIN) > len(by_user)
    assert sum(1 for gap in gaps if gap < 2 * MINUTE) > 0.5 * len(gaps)  # bursts in a session
    assert sum(1 for s in sessions if s >= 2) > 0.5 * len(sessions)


def test_pages_and_queries_are_few_and_skewed(wl: Workload) -> None:
    valid = _valid(wl)
    pages = Counter(e.page for e in valid if e.type == "page_view")
    queries = Counter(e.query for e in valid if e.type == "search")
    assert set(pages) <= set(PAGES)
    assert set(queries) <= set(QUERIES)
    assert len(pages) >= 10
    assert len(queries) >= 10
    ranked_pages = [n for _, n in pages.most_common()]
    assert ranked_pages[0] > 5 * ranked_pages[len(ranked_pages) // 2]
    ranked_queries = [n for _, n in queries.most_common()]
    assert ranked_queries[0] > 3 * ranked_queries[-1]


def test_orders_have_non_negative_integer_amounts(wl: Workload) -> None:
    amounts = [e.amount_cents for e in _valid(wl) if e.type == "order"]
    assert len(amounts) > 0.02 * len(wl.first)
    assert all(isinstance(a, int) and a >= 0 for a in amounts)
    assert len(set(amounts)) > 20


# --- profiles ---------------------------------------------------------------------------------


def test_profiles_are_ordered_and_hold_tombstones_recreations_and_ties(wl: Workload) -> None:
    profiles = wl.profiles
    stamps = [p.updated_ts for p in profiles]
    assert all(a <= b for a, b in pairwise(stamps))
    history: dict[str, list[ProfileChange]] = defaultdict(list)
    for change in profiles:
        history[change.user_id].append(change)
    tombstones = sum(1 for p in profiles if p.is_tombstone)
    recreated = sum(
        1
        for changes in history.values()
        for before, after in pairwise(changes)
        if before.is_tombstone and not after.is_tombstone
    )
    ties = sum(len(changes) - len({c.updated_ts for c in changes}) for changes in history.values())
    assert tombstones == wl.stats.tombstones > 0
    assert recreated == wl.stats.recreated > 0
    assert ties == wl.stats.profile_ties > 0
    assert len(profiles) == wl.stats.profile_lines
    assert len(profiles) - tombstones == wl.stats.profile_changes
    assert len(history) == wl.stats.profile_users
    assert {p.segment for p in profiles if not p.is_tombstone} == {
        "free",
        "trial",
        "pro",
        "enterprise",
    }
    # the segment changes during the span for some users
    changed = [u for u, c in history.items() if len({p.segment for p in c}) > 1]
    assert len(changed) > 0.1 * len(history)


def test_most_users_have_a_profile_before_their_first_event(wl: Workload) -> None:
    first_event: dict[str, int] = {}
    for event in _valid(wl):
        first_event[event.user_id] = min(event.event_ts, first_event.get(event.user_id, 1 << 62))
    first_profile: dict[str, int] = {}
    for change in wl.profiles:
        first_profile.setdefault(change.user_id, change.updated_ts)
    users = list(first_event)
    without = [u for u in users if u not in first_profile]
    on_time = [u for u in users if u in first_profile and first_profile[u] <= first_event[u]]
    at_first_event = [u for u in on_time if first_profile[u] == first_event[u]]
    assert 0 < len(without) < 0.15 * len(users)
    assert len(on_time) > 0.75 * len(users)
    assert at_first_event  # a profile at the very millisecond of the first event
    assert len(on_time) + len(without) < len(users)  # a few sign up after their first event


# --- stats and helpers ------------------------------------------------------------------------


def test_stats_match_the_files(wl: Workload) -> None:
    valid = _valid(wl)
    stats = wl.stats
    assert stats.valid_events == len(valid) == wl.spec.unique_events
    assert stats.by_type == dict(Counter(e.type for e in valid)) | {
        t: 0 for t in stats.by_type if t not in {e.type for e in valid}
    }
    assert stats.users == len({e.user_id for e in valid})
    assert stats.users <= wl.spec.user_count == max(20, EVENTS // 40)
    assert stats.first_event_ts == min(e.event_ts for e in valid)
    assert stats.last_event_ts == max(e.event_ts for e in valid)
    assert stats.lines == stats.valid_events + stats.duplicates + stats.invalid_total
    text = summary(stats)
    assert len(text.splitlines()) >= 5
    assert f"{EVENTS} lines" in text
    assert f"late (behind a 10-min watermark): {stats.late_events}" in text


def test_default_profiles_path_sits_beside_the_events() -> None:
    assert default_profiles_path(Path("out/events.jsonl")) == Path("out/events.profiles.jsonl")
    assert default_profiles_path(Path("/tmp/w.jsonl")) == Path("/tmp/w.profiles.jsonl")


def test_tiny_and_empty_workloads(tmp_path: Path) -> None:
    empty = generate(WorkloadSpec(seed=1, events=0), tmp_path / "e.jsonl", tmp_path / "p.jsonl")
    assert (tmp_path / "e.jsonl").read_text() == ""
    assert (empty.lines, empty.valid_events, empty.profile_lines) == (0, 0, 0)
    one = generate(WorkloadSpec(seed=1, events=1), tmp_path / "e1.jsonl", tmp_path / "p1.jsonl")
    lines = (tmp_path / "e1.jsonl").read_text().splitlines()
    assert len(lines) == 1
    assert isinstance(parse_event(lines[0]), Event)
    assert (one.lines, one.valid_events, one.users) == (1, 1, 1)


@pytest.mark.parametrize(
    "bad",
    [
        {"events": -1},
        {"hours": 0},
        {"users": 0},
        {"late_fraction": 1.5},
        {"duplicate_fraction": 0.3, "invalid_fraction": 0.3},
    ],
)
def test_spec_rejects_nonsense(bad: dict[str, Any]) -> None:
    with pytest.raises(ValueError):
        WorkloadSpec(**{"seed": 1, "events": 10, **bad})


def test_progress_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(workload, "PROGRESS_EVERY", 5_000)
    calls: list[int] = []
    spec = WorkloadSpec(seed=2, events=20_000)
    generate(spec, tmp_path / "e.jsonl", tmp_path / "p.jsonl", progress=calls.append)
    assert len(calls) >= 3
    assert calls == sorted(calls)
    assert calls[-1] == 20_000


def test_lk_generate_counts_late_events_against_the_configured_watermark(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`lk generate` reports late events behind the streams' watermark, not a default one."""
    from click.testing import CliRunner

    from lk.cli import cli

    out = tmp_path / "events.jsonl"
    monkeypatch.setenv("LK_WATERMARK_DELAY_MINUTES", "1")
    result = CliRunner().invoke(
        cli, ["generate", "--seed", "1", "--events", "2000", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    assert "behind a 1-min watermark" in result.output
