"""Reference oracle: the eight views of CONTRACT section 3, computed the obvious way.

This is the ground truth every architecture is checked against, so it favours being plainly
correct over being fast, and shares nothing with the Spark code but the event model
(``core.events``), the view catalogue (``core.catalog``) and the timestamp formatter.

Pipeline, in this order:

1. validate every raw record value (``core.events.parse_event``); invalid ones are counted
   by reason as quarantined and never reach a view;
2. deduplicate the valid events by ``event_id``: the first valid occurrence in log order wins,
   later ones are counted as duplicates (even when their ``received_ts``, hence ``event_ts``,
   differs);
3. apply the optional ``keep`` filter (used to model what a watermark dropped);
4. compute each view from the surviving events, with windows on ``event_ts``.

Rows are what the serving API returns: key fields, then ``window_start``/``window_end`` (or
``session_start``/``session_end``) as ISO strings, then value fields; sorted by key fields,
then time. Only windows that contain at least one event appear.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from core.catalog import (
    CLICK_WINDOW_MS,
    SESSION_GAP_MS,
    UNKNOWN_SEGMENT,
    UNTRUSTED_CLOCK_MS,
    VIEW_NAMES,
    check_logic_version,
)
from core.events import Event, ProfileChange, Rejected, parse_event, parse_profile_line
from core.oracle_patterns import Row, search_conversion_matches, search_conversions
from core.oracle_patterns import window_row as _window
from core.times import HOUR_MS, MINUTE_MS, iso, window_start


@dataclass
class OracleResult:
    views: dict[str, list[Row]]
    """View name -> rows, as the serving API returns them."""
    quarantined: int
    """Invalid records (never in a view)."""
    duplicates: int
    """Valid records whose ``event_id`` had already been seen in log order."""
    rejected_by_reason: dict[str, int]
    """Full reason (e.g. ``missing_field:page``) -> count; sums to ``quarantined``."""
    not_kept: int = field(default=0)
    """Deduplicated events the ``keep`` filter excluded."""
    matches: list[Row] = field(default_factory=list)
    """The complex events of ``search_conversions`` (``search_conversion_matches``)."""


# --- the eight views, each a pure function of the deduplicated events --------------------------


def page_views(events: Iterable[Event]) -> list[Row]:
    """Per page and 1-minute window: the number of ``page_view`` events."""
    size = MINUTE_MS
    counts: Counter[tuple[str, int]] = Counter()
    for e in events:
        if e.type == "page_view":
            assert e.page is not None
            counts[(e.page, window_start(e.event_ts, size))] += 1
    return [
        {"page": page, **_window(start, size), "count": n}
        for (page, start), n in sorted(counts.items())
    ]


def unique_users(events: Iterable[Event]) -> list[Row]:
    """Per 1-hour window: the number of distinct users with any valid event."""
    size = HOUR_MS
    users: defaultdict[int, set[str]] = defaultdict(set)
    for e in events:
        users[window_start(e.event_ts, size)].add(e.user_id)
    return [{**_window(start, size), "users": len(users[start])} for start in sorted(users)]


def search_ctr(events: Iterable[Event]) -> list[Row]:
    """Per query and 1-hour window of the search: searches, clicked searches, and their ratio.

    A search is clicked when at least one click has ``search_id == search.event_id`` and an
    ``event_ts`` in the closed interval [search event_ts, search event_ts + 30 min].
    """
    size = HOUR_MS
    searches: list[Event] = []
    click_times: defaultdict[str, list[int]] = defaultdict(list)
    for e in events:
        if e.type == "search":
            searches.append(e)
        elif e.type == "click":
            assert e.search_id is not None
            click_times[e.search_id].append(e.event_ts)

    totals: defaultdict[tuple[str, int], list[int]] = defaultdict(lambda: [0, 0])
    for s in searches:
        assert s.query is not None
        clicked = any(
            s.event_ts <= t <= s.event_ts + CLICK_WINDOW_MS for t in click_times[s.event_id]
        )
        total = totals[(s.query, window_start(s.event_ts, size))]
        total[0] += 1
        total[1] += int(clicked)
    return [
        {
            "query": query,
            **_window(start, size),
            "searches": n_searches,
            "clicks": n_clicks,
            "ctr": n_clicks / n_searches,
        }
        for (query, start), (n_searches, n_clicks) in sorted(totals.items())
    ]


def segment_as_of(history: Sequence[tuple[int, int, str | None]], ts: int) -> str:
    """The segment in force at ``ts`` given one user's ``(updated_ts, log_index, segment)``.

    The version with the greatest ``updated_ts <= ts`` wins, the later in the log on a tie;
    none, or a tombstone (``segment is None``), gives ``unknown``.
    """
    candidates = [version for version in history if version[0] <= ts]
    if not candidates:
        return UNKNOWN_SEGMENT
    _, _, segment = max(candidates, key=lambda version: (version[0], version[1]))
    return UNKNOWN_SEGMENT if segment is None else segment


def revenue_by_segment(
    events: Iterable[Event], profiles: Iterable[ProfileChange] = ()
) -> list[Row]:
    """Per segment (as of the order's event_ts) and 1-hour window: the sum of ``amount_cents``."""
    size = HOUR_MS
    history: defaultdict[str, list[tuple[int, int, str | None]]] = defaultdict(list)
    for log_index, change in enumerate(profiles):
        history[change.user_id].append((change.updated_ts, log_index, change.segment))

    revenue: Counter[tuple[str, int]] = Counter()
    for e in events:
        if e.type == "order":
            assert e.amount_cents is not None
            segment = segment_as_of(history[e.user_id], e.event_ts)
            revenue[(segment, window_start(e.event_ts, size))] += e.amount_cents
    return [
        {"segment": segment, **_window(start, size), "revenue_cents": cents}
        for (segment, start), cents in sorted(revenue.items())
    ]


def sessions(events: Iterable[Event]) -> list[Row]:
    """Per user: maximal runs of events (by event_ts) whose consecutive gaps are <= 30 min."""
    times: defaultdict[str, list[int]] = defaultdict(list)
    for e in events:
        times[e.user_id].append(e.event_ts)

    rows: list[Row] = []
    for user_id in sorted(times):
        ordered = sorted(times[user_id])
        start = last = ordered[0]
        count = 1
        for ts in ordered[1:]:
            if ts - last <= SESSION_GAP_MS:
                last, count = ts, count + 1
                continue
            rows.append(_session_row(user_id, start, last, count))
            start = last = ts
            count = 1
        rows.append(_session_row(user_id, start, last, count))
    return rows


def _session_row(user_id: str, start: int, end: int, count: int) -> Row:
    return {
        "user_id": user_id,
        "session_start": iso(start),
        "session_end": iso(end),
        "events": count,
    }


def page_views_hopping(events: Iterable[Event]) -> list[Row]:
    """Per page and 10-minute window starting on every minute: the number of ``page_view``
    events; an event is in the 10 windows ``[m, m + 10 min)`` that contain its event_ts."""
    size, hop = 10 * MINUTE_MS, MINUTE_MS
    counts: Counter[tuple[str, int]] = Counter()
    for e in events:
        if e.type == "page_view":
            assert e.page is not None
            last = window_start(e.event_ts, hop)  # the latest window holding it
            for start in range(last - size + hop, last + hop, hop):
                counts[(e.page, start)] += 1
    return [
        {"page": page, **_window(start, size), "count": n}
        for (page, start), n in sorted(counts.items())
    ]


def segment_totals(events: Iterable[Event], profiles: Iterable[ProfileChange] = ()) -> list[Row]:
    """Per segment: the users with at least one event whose *current* segment it is (their
    last profile record in the log; none, or a tombstone, gives ``unknown``), and the sum of
    those users' orders' ``amount_cents``."""
    current: dict[str, str | None] = {}
    for change in profiles:  # log order: the last record wins
        current[change.user_id] = change.segment
    revenue: Counter[str] = Counter()
    for e in events:
        revenue[e.user_id] += e.amount_cents if e.type == "order" and e.amount_cents else 0
    totals: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for user_id, cents in revenue.items():
        total = totals[current.get(user_id) or UNKNOWN_SEGMENT]
        total[0] += 1
        total[1] += cents
    return [
        {"segment": segment, "users": users, "revenue_cents": cents}
        for segment, (users, cents) in sorted(totals.items())
    ]


# --- the whole computation ---------------------------------------------------------------------


def compute_views(
    event_values: Iterable[bytes | str | None],
    profiles: Iterable[ProfileChange] = (),
    *,
    keep: Callable[[Event], bool] | None = None,
) -> OracleResult:
    """All eight views from raw event values and profile changes, both in log order."""
    rejected: Counter[str] = Counter()
    seen: set[str] = set()
    duplicates = 0
    events: list[Event] = []
    for value in event_values:
        parsed = parse_event(value)
        if isinstance(parsed, Rejected):
            rejected[parsed.reason] += 1
        elif parsed.event_id in seen:
            duplicates += 1
        else:
            seen.add(parsed.event_id)
            events.append(parsed)

    kept = events if keep is None else [e for e in events if keep(e)]
    profiles = list(profiles)  # read by two views
    views = {
        "page_views": page_views(kept),
        "unique_users": unique_users(kept),
        "search_ctr": search_ctr(kept),
        "revenue_by_segment": revenue_by_segment(kept, profiles),
        "sessions": sessions(kept),
        "page_views_hopping": page_views_hopping(kept),
        "segment_totals": segment_totals(kept, profiles),
        "search_conversions": search_conversions(kept),
    }
    assert tuple(views) == VIEW_NAMES, "every catalogued view is computed, in catalogue order"
    return OracleResult(
        views=views,
        quarantined=sum(rejected.values()),
        duplicates=duplicates,
        rejected_by_reason=dict(sorted(rejected.items())),
        not_kept=len(events) - len(kept),
        matches=search_conversion_matches(kept),
    )


def late_event_ids(records: Iterable[tuple[int, int, bytes | None]], delay_ms: int) -> set[str]:
    """The events a stream drops as late (CONTRACT §3) reading `records`, the `events` log's
    ``(partition, offset, value)``: a valid first occurrence is late when its ``event_ts`` is
    more than `delay_ms` before the greatest ``event_ts`` of the valid first occurrences that
    precede it in its own partition, record by record in offset order. A function of the log
    alone: however a stream cuts it into micro-batches, it drops these."""
    by_partition: defaultdict[int, list[tuple[int, bytes | None]]] = defaultdict(list)
    for partition, offset, value in records:
        by_partition[partition].append((offset, value))
    seen: set[str] = set()
    late: set[str] = set()
    for _partition, rows in sorted(by_partition.items()):
        greatest: int | None = None  # of the partition's valid first occurrences so far
        for _offset, value in sorted(rows, key=lambda r: r[0]):
            event = parse_event(value)
            if isinstance(event, Rejected) or event.event_id in seen:
                continue
            seen.add(event.event_id)
            if greatest is not None and event.event_ts < greatest - delay_ms:
                late.add(event.event_id)
            greatest = event.event_ts if greatest is None else max(greatest, event.event_ts)
    return late


def logic_filter(logic_version: str) -> Callable[[Event], bool] | None:
    """The events a logic version keeps (``core.catalog.LOGIC_VERSIONS``), as a ``keep``."""
    version = check_logic_version(logic_version)
    if version == "2":
        return lambda event: abs(event.received_ts - event.sent_ts) < UNTRUSTED_CLOCK_MS
    if version == "bug":
        return lambda event: abs(event.received_ts - event.sent_ts) >= UNTRUSTED_CLOCK_MS
    return None


def keep_all_of(*keeps: Callable[[Event], bool] | None) -> Callable[[Event], bool] | None:
    """A ``keep`` that keeps what every given one keeps (None: keep everything)."""
    given = [k for k in keeps if k is not None]
    if not given:
        return None
    return lambda event: all(k(event) for k in given)


# --- inputs from files ------------------------------------------------------------------------


def _jsonl_lines(path: str | Path) -> list[tuple[int, bytes]]:
    """(line number, raw bytes) of a JSONL file's lines: split on ``\\n``, one trailing ``\\r``
    removed, blank (empty or whitespace-only) lines skipped."""
    lines = Path(path).read_bytes().split(b"\n")
    numbered = ((n, line.removesuffix(b"\r")) for n, line in enumerate(lines, start=1))
    return [(n, line) for n, line in numbered if line.strip()]


def load_jsonl_values(path: str | Path) -> list[bytes]:
    """Each non-blank line of a JSONL event file, as the raw bytes ``lk produce`` sends."""
    return [line for _, line in _jsonl_lines(path)]


def load_profiles_jsonl(path: str | Path) -> list[ProfileChange]:
    """The profile changes of a JSONL file in the ``lk produce --topic profiles`` form."""
    changes = []
    for number, line in _jsonl_lines(path):
        try:
            changes.append(parse_profile_line(json.loads(line)))
        except ValueError as exc:
            raise ValueError(f"{path}: profile line {number}: {exc}") from exc
    return changes
