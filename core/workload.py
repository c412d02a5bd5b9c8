"""A deterministic, realistic workload for the ``events`` and ``profiles`` topics (CONTRACT 1-2).

``lk generate --seed N --events M --out F`` calls :func:`generate`, which streams two JSONL
files: the event log (``F``, exactly ``M`` lines) and the profile change-data-capture stream
(:func:`default_profiles_path` of ``F``). The same :class:`WorkloadSpec` always gives
byte-identical files: every random draw comes from ``random.Random`` seeded by the spec, ids
are counters (``e-<seed>-<n>``, ``u-<n>``), and nothing reads the clock.

Time model. A logical event has an intended event time ``e`` (server clock). Its device clock
is off by the device's skew ``d`` (most devices within a few hundred ms, some by seconds to a
minute, a few by up to ``max_clock_skew_ms``); it happened at true time ``t = e - latency``,
was sent ``send_delay`` later and reached the server after the network latency::

    device_ts   = t + d
    sent_ts     = t + send_delay + d
    received_ts = e + send_delay

so the contract's ``event_ts = device_ts + (received_ts - sent_ts)`` is exactly ``e`` and
``device_ts <= sent_ts`` holds for every valid event. ``send_delay`` is under 1.5 s for most
events, seconds for some, 1-8 minutes for a few (still inside a 10-minute watermark) and 11-90
minutes for the late ones (offline buffering).

Guarantees of the events file (what the tests check):

* one JSON document or junk string per line, never a newline inside;
* lines are in arrival (log) order: every line that is a JSON object with an integer
  ``received_ts`` has a ``received_ts`` no smaller than any such line before it, and a line
  that is not JSON sits where its received time puts it;
* a duplicate (producer retry) repeats its original's payload byte for byte except for a later
  ``received_ts``, and comes after it (so its computed ``event_ts`` is later too: the first
  occurrence is the event); first occurrences' ``event_ts`` lie in ``[start_ms, start_ms +
  hours)``;
* a late event (``late_events``) is a valid first occurrence whose ``event_ts`` is more than
  ``watermark_delay_ms`` behind the greatest ``event_ts`` of the valid lines before it on its
  partition of ``events`` (its user's, by the producer's partitioner): CONTRACT §3's rule
  when every record is a micro-batch of its own, so a stream drops at most these;
* clicks name the ``event_id`` of a valid search of the same user, most within minutes, some
  exactly 30 minutes and some more than 30 minutes after it;
* invalid lines (each kind of CONTRACT 1) carry a ``user_id`` whenever they are JSON objects.

The profiles file is in ``updated_ts`` order (ties keep generation order, which is the log
order that decides a tie) and holds updates, tombstones, re-creations after a tombstone and
updates sharing a timestamp with another update of the same user.

Memory is bounded by the number of users and the events in flight (at most ~90 minutes of
late events), so millions of events stream straight to disk.
"""

from __future__ import annotations

import json
import random
from bisect import bisect
from collections.abc import Callable
from dataclasses import dataclass, field
from heapq import heapify, heappop, heappush
from itertools import accumulate
from pathlib import Path
from typing import Any, Final, TextIO

from core.catalog import CLICK_WINDOW_MS, SESSION_GAP_MS
from core.event_clock import EventClocks
from core.events import (
    DEVICE_AFTER_SENT,
    EVENT_TYPES,
    MISSING_FIELD,
    NEGATIVE_AMOUNT,
    NOT_AN_OBJECT,
    NOT_JSON,
    REASON_CODES,
    UNKNOWN_TYPE,
    WRONG_TYPE,
)
from core.kafka_io import partition_for
from core.settings import Settings
from core.times import DAY_MS, HOUR_MS, MINUTE_MS, iso

DEFAULT_START_MS: Final = 1_793_520_000_000  # 2026-11-01T08:00:00Z
_DEFAULT_DELAY_MINUTES: Final[int] = Settings.model_fields["watermark_delay_minutes"].default
_DEFAULT_PARTITIONS: Final[int] = Settings.model_fields["events_partitions"].default
DEFAULT_WATERMARK_DELAY_MS: Final = _DEFAULT_DELAY_MINUTES * MINUTE_MS
"""The settings' default, for a workload generated without settings (tests, benchmarks)."""

SEGMENTS: Final = ("free", "trial", "pro", "enterprise")
_SEGMENT_CUM: Final = tuple(accumulate((0.55, 0.20, 0.20, 0.05)))
_NEXT_SEGMENTS: Final[dict[str, tuple[str, ...]]] = {
    "free": ("pro", "trial", "pro"),
    "trial": ("pro", "free", "free"),
    "pro": ("enterprise", "free", "pro"),
    "enterprise": ("pro", "pro", "free"),
}

PRODUCT_PAGES: Final = tuple(f"/product/p-{i:03d}" for i in range(1, 17))
PAGES: Final = (
    "/",
    "/deals",
    PRODUCT_PAGES[0],
    "/category/electronics",
    PRODUCT_PAGES[1],
    "/cart",
    "/category/home",
    PRODUCT_PAGES[2],
    "/search",
    "/category/fashion",
    PRODUCT_PAGES[3],
    "/account",
    "/checkout",
    PRODUCT_PAGES[4],
    "/category/sports",
    PRODUCT_PAGES[5],
    "/category/books",
    PRODUCT_PAGES[6],
    "/help",
    PRODUCT_PAGES[7],
    "/orders",
    PRODUCT_PAGES[8],
    "/gift-cards",
    PRODUCT_PAGES[9],
)
QUERIES: Final = (
    "laptop",
    "running shoes",
    "headphones",
    "coffee",
    "phone case",
    "winter jacket",
    "monitor",
    "backpack",
    "usb c cable",
    "keyboard",
    "air fryer",
    "water bottle",
    "yoga mat",
    "desk lamp",
    "board games",
    "gift card",
    "wireless mouse",
    "tea",
    "camping tent",
    "sunglasses",
)
UNKNOWN_TYPES: Final = ("add_to_cart", "purchase", "scroll", "PageView")
INVALID_KINDS: Final = REASON_CODES  # not_json, not_an_object, missing_field, wrong_type, ...
_INVALID_CUM: Final = tuple(accumulate((0.20, 0.08, 0.22, 0.24, 0.10, 0.08, 0.08)))
_TYPE_FIELDS: Final[dict[str, tuple[str, ...]]] = {
    "page_view": ("page",),
    "search": ("query",),
    "click": ("page", "search_id"),
    "order": ("amount_cents",),
}
_STRING_FIELDS: Final = frozenset({"event_id", "type", "page", "query", "search_id"})
_MEAN_INTRA_GAP_MS: Final = 130_000  # mean of _intra_gap() below, used to plan sessions
_FLUSH_LINES: Final = 8192
PROGRESS_EVERY = 100_000  # event lines between progress calls

MAX_HOURS: Final = 10 * 365 * 24.0
"""The longest event-time span generated (ten years): beyond it, timestamps and the per-bucket
plan stop being a workload anyone replays."""

# Measured (`lk generate`, 100k-2M events): peak memory is about 62 MB plus 31 bytes per event
# (the users' planned sessions; events themselves are streamed to the file), and a line takes
# about 165 bytes on disk, profiles about 3 more per event. Rounded up, so that a refusal errs
# on the side of refusing.
_BASE_MEMORY_BYTES: Final = 80 * 2**20
_MEMORY_BYTES_PER_EVENT: Final = 40
_DISK_BYTES_PER_EVENT: Final = 180


def footprint(spec: WorkloadSpec) -> tuple[int, int]:
    """(peak memory, disk) in bytes that generating ``spec`` needs, estimated from measurements."""
    return (
        _BASE_MEMORY_BYTES + _MEMORY_BYTES_PER_EVENT * spec.events,
        _DISK_BYTES_PER_EVENT * spec.events,
    )


_SESSION_SEP: Final = SESSION_GAP_MS + 1 + 2 * MINUTE_MS

_dumps = json.JSONEncoder(separators=(",", ":")).encode
# Valid lines are formatted directly (5x faster than json): every string in them must be plain.
assert all(json.dumps(s) == f'"{s}"' for s in (*PAGES, *PRODUCT_PAGES, *QUERIES, *EVENT_TYPES))


def _zipf_cum(n: int, s: float) -> tuple[float, ...]:
    return tuple(accumulate(1.0 / (k**s) for k in range(1, n + 1)))


_PAGE_CUM: Final = _zipf_cum(len(PAGES), 1.1)
_QUERY_CUM: Final = _zipf_cum(len(QUERIES), 1.0)
_RESULT_CUM: Final = _zipf_cum(6, 1.3)  # rank of the clicked search result


@dataclass(frozen=True)
class WorkloadSpec:
    """What to generate. ``events`` is the number of event-log lines, everything included."""

    seed: int
    events: int
    start_ms: int = DEFAULT_START_MS
    hours: float = 4.0
    users: int | None = None  # default: max(20, events // 40)
    late_fraction: float = 0.005  # of valid events: sent 11-90 min after they happened
    delayed_fraction: float = 0.01  # of valid events: sent 1-8 min late (within the watermark)
    duplicate_fraction: float = 0.015  # of lines: producer retries of a valid event
    invalid_fraction: float = 0.01  # of lines: every invalid kind of CONTRACT 1
    skewed_device_fraction: float = 0.05  # devices off by up to max_clock_skew_ms
    max_clock_skew_ms: int = 2 * HOUR_MS
    max_retry_delay_ms: int = 30_000  # a retry arrives 0.1 s to this much after the original
    mean_session_events: int = 10
    deferred_click_fraction: float = 0.06  # of searches: a click 30 min or more later
    no_profile_fraction: float = 0.05  # users never in the profile table
    profile_change_fraction: float = 0.3  # users whose segment changes during the span
    tombstone_fraction: float = 0.05  # users deleted during the span (half come back)
    profile_tie_fraction: float = 0.03  # users with two versions at the same updated_ts
    watermark_delay_ms: int = DEFAULT_WATERMARK_DELAY_MS  # only for counting late events
    partitions: int = _DEFAULT_PARTITIONS  # of `events`: only for counting late events

    def __post_init__(self) -> None:
        if self.events < 0:
            raise ValueError(f"events must be >= 0, got {self.events}")
        if not 0 < self.hours <= MAX_HOURS:  # also refuses nan
            raise ValueError(f"hours must be > 0 and at most {MAX_HOURS:g}, got {self.hours}")
        if self.users is not None and self.users < 1:
            raise ValueError(f"users must be >= 1, got {self.users}")
        if self.partitions < 1:
            raise ValueError(f"partitions must be >= 1, got {self.partitions}")
        for name in (
            "late_fraction",
            "delayed_fraction",
            "duplicate_fraction",
            "invalid_fraction",
            "skewed_device_fraction",
            "deferred_click_fraction",
            "no_profile_fraction",
            "profile_change_fraction",
            "tombstone_fraction",
            "profile_tie_fraction",
        ):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise ValueError(f"{name} must be within [0, 1], got {value}")
        if self.duplicate_fraction + self.invalid_fraction > 0.5:
            raise ValueError("duplicate_fraction + invalid_fraction must be <= 0.5")
        if self.late_fraction + self.delayed_fraction > 1.0:
            raise ValueError("late_fraction + delayed_fraction must be <= 1")
        if self.max_clock_skew_ms < 0 or self.max_retry_delay_ms < 100:
            raise ValueError("max_clock_skew_ms must be >= 0 and max_retry_delay_ms >= 100")
        if self.mean_session_events < 1:
            raise ValueError("mean_session_events must be >= 1")

    @property
    def span_ms(self) -> int:
        return round(self.hours * HOUR_MS)

    @property
    def end_ms(self) -> int:
        """Exclusive end of the event-time span."""
        return self.start_ms + self.span_ms

    @property
    def user_count(self) -> int:
        return self.users if self.users is not None else max(20, self.events // 40)

    @property
    def duplicate_lines(self) -> int:
        return round(self.events * self.duplicate_fraction)

    @property
    def invalid_lines(self) -> int:
        return round(self.events * self.invalid_fraction)

    @property
    def unique_events(self) -> int:
        return self.events - self.duplicate_lines - self.invalid_lines


@dataclass
class WorkloadStats:
    """What :func:`generate` wrote; every count can be recomputed from the two files."""

    lines: int = 0  # event-log lines
    valid_events: int = 0  # valid, first occurrence
    duplicates: int = 0  # later copies of a valid event_id
    invalid: dict[str, int] = field(default_factory=lambda: dict.fromkeys(INVALID_KINDS, 0))
    invalid_reasons: dict[str, int] = field(default_factory=dict)  # full parse_event reasons
    late_events: int = 0  # valid events behind their partition's watermark in the log
    by_type: dict[str, int] = field(default_factory=lambda: dict.fromkeys(EVENT_TYPES, 0))
    users: int = 0  # distinct users with a valid event
    clicks_at_30_min: int = 0  # clicks exactly 30 min after their search (still counted)
    clicks_after_30_min: int = 0  # clicks more than 30 min after their search
    first_event_ts: int | None = None
    last_event_ts: int | None = None
    profile_lines: int = 0
    profile_users: int = 0
    profile_changes: int = 0  # non-tombstone versions, the first one of a user included
    tombstones: int = 0
    recreated: int = 0  # versions that follow a tombstone of the same user
    profile_ties: int = 0  # lines with the same (user_id, updated_ts) as an earlier line
    watermark_delay_ms: int = DEFAULT_WATERMARK_DELAY_MS  # what late_events was counted with

    @property
    def invalid_total(self) -> int:
        return sum(self.invalid.values())


def default_profiles_path(events_path: Path) -> Path:
    """The profiles file beside an events file: ``out/e.jsonl`` -> ``out/e.profiles.jsonl``."""
    events_path = Path(events_path)
    return events_path.with_name(f"{events_path.stem}.profiles.jsonl")


def generate(
    spec: WorkloadSpec,
    events_out: Path,
    profiles_out: Path,
    progress: Callable[[int], None] | None = None,
) -> WorkloadStats:
    """Write the events and profiles JSONL files of ``spec`` and return what was written.

    ``progress``, when given, is called with the number of event lines written so far, about
    every ``PROGRESS_EVERY`` lines, and once at the end.
    """
    return _Generator(spec, progress).run(Path(events_out), Path(profiles_out))


def summary(stats: WorkloadStats) -> str:
    """A short human-readable account of a generated workload."""
    types = ", ".join(f"{name} {count}" for name, count in stats.by_type.items())
    invalid = ", ".join(f"{kind} {count}" for kind, count in stats.invalid.items() if count)
    span = ""
    if stats.first_event_ts is not None and stats.last_event_ts is not None:
        span = f" (event time {iso(stats.first_event_ts)} .. {iso(stats.last_event_ts)})"
    return "\n".join(
        (
            f"events file: {stats.lines} lines{span}",
            f"  valid events: {stats.valid_events} from {stats.users} users ({types})",
            f"  duplicates (retries): {stats.duplicates}",
            f"  invalid: {stats.invalid_total} ({invalid or 'none'})",
            f"  late (behind a {stats.watermark_delay_ms / MINUTE_MS:g}-min watermark): "
            f"{stats.late_events}",
            f"  clicks exactly 30 min after their search: {stats.clicks_at_30_min}, "
            f"more than 30 min: {stats.clicks_after_30_min}",
            f"profiles file: {stats.profile_lines} lines for {stats.profile_users} users "
            f"({stats.profile_changes} versions, {stats.tombstones} tombstones, "
            f"{stats.recreated} re-created, {stats.profile_ties} same-timestamp ties)",
        )
    )


# --- generation -------------------------------------------------------------------------------


class _User:
    """One user and their device; sessions are planned up front, events drawn lazily."""

    __slots__ = (
        "after_search",
        "has_valid",
        "index",
        "just_over",
        "last_search",
        "left",
        "partition",
        "pos",
        "profiled",
        "session_left",
        "session_start",
        "sizes",
        "skew",
        "starts",
        "uid",
        "window_end",
    )

    def __init__(self, index: int, partitions: int) -> None:
        self.index = index
        self.uid = f"u-{index}"
        self.partition = partition_for(self.uid.encode(), partitions)
        self.skew = 0
        self.left = 0  # items (lines other than duplicates) still to come, deferred clicks too
        self.session_left = 0
        self.sizes: list[int] = []  # sizes of the sessions still to come, last one first
        self.starts: list[int] = []  # their start times, last one first
        self.session_start = -1
        self.window_end = 0  # the current session's events stay at or before this
        self.just_over = False  # end the session exactly 30 min + 1 ms before the next one
        self.pos = 0  # position in the current session
        self.last_search: tuple[str, int, int] | None = None  # (event_id, event_ts, query)
        self.has_valid = False
        self.after_search = False  # the previous in-session event was a valid search
        self.profiled = False  # has a profile and no tombstone (may get an update at an order)


class _DeferredClick:
    """A click on an old search (a tab left open), due at a fixed event time."""

    __slots__ = ("query", "search_id", "search_ts", "user")

    def __init__(self, user: _User, search_id: str, search_ts: int, query: int) -> None:
        self.user = user
        self.search_id = search_id
        self.search_ts = search_ts
        self.query = query


class _Generator:
    def __init__(self, spec: WorkloadSpec, progress: Callable[[int], None] | None = None) -> None:
        self.spec = spec
        self.progress = progress
        self.written = 0
        self.rng = random.Random(f"lk-workload:{spec.seed}:events")  # noqa: S311 - not crypto
        self.prng = random.Random(f"lk-workload:{spec.seed}:profiles")  # noqa: S311
        self.start = spec.start_ms
        self.end = spec.end_ms
        self.stats = WorkloadStats(watermark_delay_ms=spec.watermark_delay_ms)
        self.next_id = 1
        self.id_prefix = f"e-{spec.seed}-"
        self.delayed_fraction = spec.delayed_fraction
        self.seq = 0
        # The agenda: what happens next, by event time, as a calendar queue (buckets of
        # ``bucket_ms``; the current bucket is a heap): far cheaper than one heap of all users.
        self.bucket_ms = max(1, spec.span_ms * 20 // max(1, spec.events))
        self.buckets: dict[int, list[tuple[int, int, _User | _DeferredClick]]] = {}
        self.current: list[tuple[int, int, _User | _DeferredClick]] = []
        self.current_bucket = -1
        # (received_ts, seq, line, event_ts, partition); -1 for both but on valid first ones
        self.out: list[tuple[int, int, str, int, int]] = []
        self.profiles: list[tuple[int, int, int, str | None]] = []  # (ts, seq, user, segment)
        self.rem_items = spec.unique_events + spec.invalid_lines
        self.rem_invalid = spec.invalid_lines
        self.rem_unique = spec.unique_events
        self.rem_dup = spec.duplicate_lines
        self.rem_late = round(spec.unique_events * spec.late_fraction)
        kinds = list(INVALID_KINDS)
        self.rng.shuffle(kinds)
        self.kind_queue = kinds  # the first invalid lines cover every kind
        self.variants: dict[str, int] = {}  # invalid lines made so far, per kind
        self.max_event_ts = -1
        self.clocks = EventClocks()  # per partition, as CONTRACT §3's late rule reads them
        self.buffer: list[str] = []

    # -- planning ------------------------------------------------------------------------------

    def _plan_users(self) -> None:
        spec, rng = self.spec, self.rng
        n_items = self.rem_items
        if n_items == 0:
            return
        n_users = min(spec.user_count, n_items)
        weights = [rng.lognormvariate(0.0, 0.9) for _ in range(n_users)]
        total = sum(weights)
        spare = n_items - n_users
        alloc = [1 + int(spare * w / total) for w in weights]
        for i in rng.sample(range(n_users), n_items - sum(alloc)):
            alloc[i] += 1
        del weights
        for i, n in enumerate(alloc, start=1):
            user = _User(i, spec.partitions)
            first = self._plan_sessions(user, n)
            self._plan_profile(user, first)
            self._schedule(first, user)

    def _plan_sessions(self, user: _User, n: int) -> int:
        """Set the user's device and sessions; return the event time of their first event."""
        spec, rng = self.spec, self.rng
        r = rng.random()
        if r < spec.skewed_device_fraction:
            user.skew = round(rng.uniform(-spec.max_clock_skew_ms, spec.max_clock_skew_ms))
        elif r < 0.35:
            user.skew = round(rng.uniform(-60_000, 60_000))
        else:
            user.skew = round(rng.uniform(-300, 300))
        # k sessions. Each gets a window of 1.25x its expected length (less for heavy users,
        # whose gaps then shrink); the spare time is spread at random before, between (on top
        # of the 30 min + 1 ms that separate sessions) and after them.
        span = spec.span_ms
        max_sessions = max(1, span // (_SESSION_SEP + 10 * MINUTE_MS))
        k = max(1, min(round(n / spec.mean_session_events), max_sessions, n))
        cuts = sorted(rng.sample(range(1, n), k - 1)) if k > 1 else []
        sizes = [b - a for a, b in zip([0, *cuts], [*cuts, n], strict=True)]
        avail = span - 1 - (k - 1) * (SESSION_GAP_MS + 1)
        need = [1.25 * (size - 1) * _MEAN_INTRA_GAP_MS for size in sizes]
        scale = min(1.0, 0.9 * avail / (sum(need) or 1.0))
        windows = [int(x * scale) for x in need]
        free = avail - sum(windows)
        points = sorted(int(rng.random() * free) for _ in range(k))
        starts = []
        at = self.start + points[0]
        for i in range(k):
            starts.append(at)
            if i + 1 < k:
                at += windows[i] + SESSION_GAP_MS + 1 + points[i + 1] - points[i]
        user.sizes = sizes[::-1]
        user.starts = starts[::-1]
        user.left = n
        user.session_start = user.starts.pop()
        self._start_session(user)
        return user.session_start

    def _start_session(self, user: _User) -> None:
        """Begin the user's next planned session (its first event is due at its start)."""
        user.session_left = user.sizes.pop() if user.sizes else user.left
        # the session's events end at least 30 min + 1 ms before the next session starts
        user.window_end = user.starts[-1] - SESSION_GAP_MS - 1 if user.starts else self.end - 1
        user.pos = 0
        user.last_search = None
        user.just_over = bool(user.starts) and self.rng.random() < 0.1

    def _plan_profile(self, user: _User, first_ts: int) -> None:
        spec, rng = self.spec, self.prng
        if rng.random() < spec.no_profile_fraction:
            return
        end = self.end
        versions: list[tuple[int, str | None]] = []
        segment = SEGMENTS[bisect(_SEGMENT_CUM, rng.random() * _SEGMENT_CUM[-1])]
        r = rng.random()
        if r < 0.80:
            ts = first_ts - rng.randint(MINUTE_MS, 30 * DAY_MS)
        elif r < 0.92:
            ts = first_ts  # signed up right as they arrived: same ms as the first event
        else:
            ts = first_ts + rng.randint(1, max(1, (end - first_ts) // 2))  # early orders unknown
        versions.append((ts, segment))
        if rng.random() < spec.profile_change_fraction:
            for _ in range(1 if rng.random() < 0.75 else 2):
                if ts >= end - 2:
                    break
                ts = rng.randint(max(ts + 1, self.start), end - 1)
                segment = rng.choice(_NEXT_SEGMENTS[segment])
                versions.append((ts, segment))
        deleted = False
        if rng.random() < spec.tombstone_fraction and ts < end - 2:
            ts = rng.randint(max(ts + 1, self.start), end - 1)
            versions.append((ts, None))
            deleted = True
            if rng.random() < 0.5 and ts < end - 2:
                ts = rng.randint(ts + 1, end - 1)
                versions.append((ts, rng.choice(SEGMENTS)))
        if rng.random() < spec.profile_tie_fraction:
            tie_ts, tie_segment = rng.choice(versions)
            choices = [s for s in SEGMENTS if s != tie_segment]
            versions.append((tie_ts, rng.choice(choices)))
        for ts, seg in versions:
            self.profiles.append((ts, self._next_seq(), user.index, seg))
        user.profiled = not deleted

    def _schedule(self, e: int, item: _User | _DeferredClick) -> None:
        """Put ``item`` on the agenda at event time ``e`` (never before the current bucket)."""
        self.seq += 1
        bucket = (e - self.start) // self.bucket_ms
        if bucket == self.current_bucket:
            heappush(self.current, (e, self.seq, item))
        else:
            entries = self.buckets.get(bucket)
            if entries is None:
                self.buckets[bucket] = [(e, self.seq, item)]
            else:
                entries.append((e, self.seq, item))

    def _next_seq(self) -> int:
        self.seq += 1
        return self.seq

    # -- the event log ---------------------------------------------------------------------------

    def run(self, events_out: Path, profiles_out: Path) -> WorkloadStats:
        self._plan_users()
        events_out.parent.mkdir(parents=True, exist_ok=True)
        with events_out.open("w", encoding="utf-8", newline="\n") as fh:
            out, buckets = self.out, self.buckets
            last_bucket = (self.end - 1 - self.start) // self.bucket_ms
            for bucket in range(last_bucket + 1):
                current = buckets.pop(bucket, None)
                if current is None:
                    continue
                heapify(current)
                self.current, self.current_bucket = current, bucket
                while current:
                    e, _, item = heappop(current)
                    if out and out[0][0] < e:
                        self._release(fh, e)
                    if type(item) is _User:
                        self._user_item(item, e)
                    else:
                        assert isinstance(item, _DeferredClick)
                        self._deferred_item(item, e)
            assert not buckets, "the agenda must never schedule past the span"
            self._release(fh, None)
            self.stats.last_event_ts = self.max_event_ts if self.max_event_ts >= 0 else None
            self._flush(fh, final=True)
        self._write_profiles(profiles_out)
        return self.stats

    def _release(self, fh: TextIO, before: int | None) -> None:
        """Write every line received before ``before`` (all when None), in arrival order."""
        out, buffer, stats = self.out, self.buffer, self.stats
        watermark_delay = self.spec.watermark_delay_ms
        while out and (before is None or out[0][0] < before):
            _, _, line, event_ts, partition = heappop(out)
            buffer.append(line)
            if event_ts >= 0:
                if self.clocks.is_late(partition, event_ts, watermark_delay):
                    stats.late_events += 1
                else:
                    self.clocks.advance(partition, event_ts)
                self.max_event_ts = max(self.max_event_ts, event_ts)
                if stats.first_event_ts is None or event_ts < stats.first_event_ts:
                    stats.first_event_ts = event_ts
        if len(buffer) >= _FLUSH_LINES:
            self._flush(fh, final=False)

    def _flush(self, fh: TextIO, *, final: bool) -> None:
        buffer = self.buffer
        if buffer:
            fh.write("\n".join(buffer) + "\n")
        before, self.written = self.written, self.written + len(buffer)
        buffer.clear()
        if self.progress is not None and (
            final or self.written // PROGRESS_EVERY > before // PROGRESS_EVERY
        ):
            self.progress(self.written)

    def _user_item(self, user: _User, e: int) -> None:
        rng = self.rng
        user.left -= 1
        user.session_left -= 1
        search = user.last_search
        invalid_kind = self._pick_invalid()
        r = rng.random()
        if invalid_kind == NEGATIVE_AMOUNT:
            etype = "order"
        elif user.pos == 0:
            etype = "page_view" if r < 0.8 else "search"
        elif user.after_search:
            etype = "click" if r < 0.55 else "search" if r < 0.70 else "page_view"
        elif r < 0.64:
            etype = "page_view"
        elif r < 0.82:
            etype = "search"
        elif r < 0.91:
            etype = "order"
        else:
            etype = "page_view" if search is None else "click"  # back to an earlier result
        user.pos += 1
        user.after_search = False
        self._emit(user, e, etype, search, invalid_kind, in_session=True)
        self._schedule_next(user, e)

    def _deferred_item(self, item: _DeferredClick, e: int) -> None:
        invalid_kind = self._pick_invalid()
        search = (item.search_id, item.search_ts, item.query)
        etype = "order" if invalid_kind == NEGATIVE_AMOUNT else "click"
        self._emit(item.user, e, etype, search, invalid_kind, in_session=False)

    def _schedule_next(self, user: _User, e: int) -> None:
        if user.left <= 0:
            return
        if user.session_left > 0:
            r = self.rng.random()
            gap = 3_000 + int(r * 70_000) if r < 0.60 else self._intra_gap(r)
            window_end = user.window_end
            need = user.session_left * _MEAN_INTRA_GAP_MS
            if window_end - e < need and gap != SESSION_GAP_MS:
                gap = gap * (window_end - e) // need  # hurry: the window is getting short
            nxt = e + gap
            if nxt > window_end:  # squeeze into what is left of the session's window
                nxt = e + max(0, window_end - e) // 2
            elif user.session_left == 1 and user.just_over and window_end > e:
                nxt = window_end  # the next session starts 30 min + 1 ms after this event
        elif user.starts:
            nxt = user.starts.pop()
            user.session_start = nxt
            self._start_session(user)
        else:  # deferred clicks use up budget, so sessions never run out first; be safe
            nxt = e + max(0, self.end - 1 - e) // 2
            user.session_left = user.left
        self._schedule(nxt, user)

    @staticmethod
    def _intra_gap(r: float) -> int:
        """A gap inside a session from a uniform draw ``r``: seconds to minutes, <= 30 min."""
        if r < 0.60:
            return 3_000 + int(r * 70_000)
        if r < 0.90:
            return 45_000 + int((r - 0.60) * 650_000)
        if r < 0.98:
            return 240_000 + int((r - 0.90) * 8_250_000)
        if r < 0.995:
            return 900_000 + int((r - 0.98) * 59_600_000)
        return SESSION_GAP_MS  # exactly 30 min: still the same session (gaps <= 30 min)

    def _pick_invalid(self) -> str | None:
        rng = self.rng
        items = self.rem_items
        self.rem_items = items - 1
        if self.rem_invalid == 0 or rng.random() * items >= self.rem_invalid:
            return None
        self.rem_invalid -= 1
        if self.kind_queue:
            return self.kind_queue.pop()
        return INVALID_KINDS[bisect(_INVALID_CUM, rng.random() * _INVALID_CUM[-1])]

    def _emit(
        self,
        user: _User,
        e: int,
        etype: str,
        search: tuple[str, int, int] | None,
        invalid_kind: str | None,
        *,
        in_session: bool,
    ) -> None:
        rng, stats = self.rng, self.stats
        n = self.next_id
        self.next_id = n + 1
        event_id = f"{self.id_prefix}{n}"
        query = -1
        if etype == "page_view":
            value: Any = PAGES[bisect(_PAGE_CUM, rng.random() * _PAGE_CUM[-1])]
            middle = f'"page":"{value}",'
        elif etype == "search":
            query = bisect(_QUERY_CUM, rng.random() * _QUERY_CUM[-1])
            value = QUERIES[query]
            middle = f'"query":"{value}",'
        elif etype == "click":
            assert search is not None
            rank = bisect(_RESULT_CUM, rng.random() * _RESULT_CUM[-1])
            value = PRODUCT_PAGES[(search[2] * 3 + rank) % len(PRODUCT_PAGES)]
            middle = f'"page":"{value}","search_id":"{search[0]}",'
        else:
            value = self._amount()
            middle = f'"amount_cents":{value},'
        t = e - 5 - int(rng.random() * 395)  # true time: event time less the network latency
        if invalid_kind is not None:
            delay = self._send_delay(normal_only=True)
            received = e + delay
            payload: dict[str, Any] = {"event_id": event_id, "type": etype, "user_id": user.uid}
            payload[_TYPE_FIELDS[etype][0]] = value
            if etype == "click":
                assert search is not None
                payload["search_id"] = search[0]
            payload["device_ts"] = t + user.skew
            payload["sent_ts"] = t + delay + user.skew
            payload["received_ts"] = received
            line, reason = self._corrupt(invalid_kind, payload)
            stats.invalid[invalid_kind] += 1
            stats.invalid_reasons[reason] = stats.invalid_reasons.get(reason, 0) + 1
            self._push(received, line)
            return
        # a valid event, first occurrence
        rem_unique = self.rem_unique
        if self.rem_late and rng.random() * rem_unique < self.rem_late:
            self.rem_late -= 1
            delay = 11 * MINUTE_MS + int(rng.random() * 79 * MINUTE_MS)
        else:
            delay = self._send_delay()
        received = e + delay
        device = t + user.skew
        head = (
            f'{{"event_id":"{event_id}","type":"{etype}","user_id":"{user.uid}",{middle}'
            f'"device_ts":{device},"sent_ts":{device + delay},"received_ts":'
        )
        stats.lines += 1
        self.seq += 1
        heappush(self.out, (received, self.seq, f"{head}{received}}}", e, user.partition))
        stats.valid_events += 1
        stats.by_type[etype] += 1
        if not user.has_valid:
            user.has_valid = True
            stats.users += 1
        if self.rem_dup and rng.random() * rem_unique < self.rem_dup:
            self._duplicate(head, received)
        self.rem_unique = rem_unique - 1
        if etype == "search":
            user.last_search = (event_id, e, query)
            if in_session:
                user.after_search = True
                self._maybe_defer_click(user, event_id, e, query)
        elif etype == "click":
            assert search is not None
            gap = e - search[1]
            if gap == CLICK_WINDOW_MS:
                stats.clicks_at_30_min += 1
            elif gap > CLICK_WINDOW_MS:
                stats.clicks_after_30_min += 1
        elif etype == "order" and user.profiled and self.prng.random() < 0.03:
            # a profile change at the very millisecond of an order (as-of join: <= wins)
            segment = self.prng.choice(SEGMENTS)
            self.profiles.append((e, self._next_seq(), user.index, segment))

    def _duplicate(self, head: str, received: int) -> None:
        """Producer retries: the same payload, received again a little later."""
        rng = self.rng
        copies = 2 if self.rem_dup >= 2 and rng.random() < 0.1 else 1
        self.rem_dup -= copies
        span = self.spec.max_retry_delay_ms - 100
        for _ in range(copies):
            received += 100 + int(rng.random() * span)
            self._push(received, f"{head}{received}}}")
            self.stats.duplicates += 1

    def _maybe_defer_click(self, user: _User, search_id: str, e: int, query: int) -> None:
        rng = self.rng
        if user.left <= 0 or rng.random() >= self.spec.deferred_click_fraction:
            return
        r = rng.random()
        if r < 0.35:
            delta = CLICK_WINDOW_MS  # exactly at the end of the click window: counts
        elif r < 0.5:
            delta = CLICK_WINDOW_MS + 1  # one ms too late: does not count
        else:
            delta = CLICK_WINDOW_MS + 1 + int(rng.random() * 90 * MINUTE_MS)
        if e + delta >= self.end:
            return
        user.left -= 1
        item = _DeferredClick(user, search_id, e, query)
        self._schedule(e + delta, item)

    def _send_delay(self, *, normal_only: bool = False) -> int:
        rng = self.rng
        r = rng.random()
        if not normal_only and r < self.delayed_fraction:
            return MINUTE_MS + int(rng.random() * 7 * MINUTE_MS)
        if r < 0.965:
            return 5 + int(rng.random() * 1_495)
        return 1_500 + int(rng.random() * 18_500)

    def _amount(self) -> int:
        rng = self.rng
        if rng.random() < 0.01:
            return 0  # a free order: valid, amount 0
        return int(rng.lognormvariate(8.0, 0.8)) // 100 * 100 + 99

    def _push(self, received: int, line: str) -> None:
        """A line that is no valid first occurrence (a retry, an invalid line)."""
        self.stats.lines += 1
        self.seq += 1
        heappush(self.out, (received, self.seq, line, -1, -1))

    def _corrupt(self, kind: str, payload: dict[str, Any]) -> tuple[str, str]:
        """The invalid line of ``kind`` made from a valid payload, and its parse_event reason."""
        rng = self.rng
        etype = payload["type"]
        if kind == NOT_JSON:
            text = _dumps(payload)
            variant = self._variant(kind, (0.7, 0.15, 0.15))
            if variant == 0:  # cut off in transit: no strict prefix of an object is JSON
                return text[: 1 + int(rng.random() * (len(text) - 2))], NOT_JSON
            if variant == 1:  # hand-written "JSON" with bare keys and values
                body = ", ".join(f"{k}: {v}" for k, v in payload.items())
                return "{" + body + "}", NOT_JSON
            junk = ("heartbeat", "<html><body>502 Bad Gateway</body></html>", "OK")
            return rng.choice(junk), NOT_JSON
        if kind == NOT_AN_OBJECT:
            if self._variant(kind, (0.5, 0.5)) == 0:
                return json.dumps(_dumps(payload)), NOT_AN_OBJECT  # encoded twice: a string
            return _dumps(list(payload.values())), NOT_AN_OBJECT
        if kind == MISSING_FIELD:
            names = ["event_id", "type", "device_ts", "sent_ts", "received_ts"]
            names += _TYPE_FIELDS[etype]
            name = rng.choice(names)
            variant = self._variant(kind, (0.7, 0.2, 0.1))
            if variant == 0:
                del payload[name]
            elif variant == 1 or name not in _STRING_FIELDS:
                payload[name] = None
            else:
                payload[name] = ""
            return _dumps(payload), f"{MISSING_FIELD}:{name}"
        if kind == WRONG_TYPE:
            name, value = self._wrong_value(payload)
            payload[name] = value
            return _dumps(payload), f"{WRONG_TYPE}:{name}"
        if kind == UNKNOWN_TYPE:
            payload["type"] = rng.choice(UNKNOWN_TYPES)
            return _dumps(payload), UNKNOWN_TYPE
        if kind == NEGATIVE_AMOUNT:
            payload["amount_cents"] = -(1 + int(rng.random() * 20_000))  # a refund sent as order
            return _dumps(payload), NEGATIVE_AMOUNT
        if kind == DEVICE_AFTER_SENT:
            payload["device_ts"] = payload["sent_ts"] + 1 + int(rng.random() * 5_000)
            return _dumps(payload), DEVICE_AFTER_SENT
        raise AssertionError(f"unknown invalid kind {kind}")

    def _variant(self, kind: str, weights: tuple[float, ...]) -> int:
        """Which variant of an invalid kind: each in turn at first, then by weight."""
        seen = self.variants.get(kind, 0)
        self.variants[kind] = seen + 1
        if seen < len(weights):
            return seen
        return bisect(list(accumulate(weights)), self.rng.random() * sum(weights))

    def _wrong_value(self, payload: dict[str, Any]) -> tuple[str, Any]:
        """A mistyped required field: numeric string, float, number for a string, boolean."""
        options: list[tuple[str, Any]] = [
            ("device_ts", str(payload["device_ts"])),  # a numeric string
            ("sent_ts", payload["sent_ts"] + 0.5),  # a float
            ("received_ts", str(payload["received_ts"])),
            ("received_ts", payload["received_ts"] + 0.25),
            ("event_id", self.next_id * 1000 + 7),  # a number where a string belongs
            ("type", True),  # a boolean
        ]
        etype = payload["type"]
        if etype == "order":
            cents = payload["amount_cents"]
            options += [
                ("amount_cents", True),
                ("amount_cents", cents / 100),
                ("amount_cents", str(cents)),
            ]
        elif etype in ("page_view", "click"):
            options.append(("page", 404))
        elif etype == "search":
            options.append(("query", ["laptop"]))
        return options[self._variant(WRONG_TYPE, (1.0,) * len(options))]

    # -- profiles ------------------------------------------------------------------------------

    def _write_profiles(self, path: Path) -> None:
        stats = self.stats
        records = self.profiles
        records.sort()
        path.parent.mkdir(parents=True, exist_ok=True)
        last: dict[int, tuple[int, bool]] = {}  # user -> (updated_ts, tombstone) of last line
        seen_ts: dict[int, set[int]] = {}
        buffer: list[str] = []
        with path.open("w", encoding="utf-8", newline="\n") as fh:
            for ts, _, index, segment in records:
                uid = f"u-{index}"
                if segment is None:
                    buffer.append(_dumps({"user_id": uid, "tombstone": True, "updated_ts": ts}))
                    stats.tombstones += 1
                else:
                    buffer.append(_dumps({"user_id": uid, "segment": segment, "updated_ts": ts}))
                    stats.profile_changes += 1
                    previous = last.get(index)
                    if previous is not None and previous[1]:
                        stats.recreated += 1
                stamps = seen_ts.setdefault(index, set())
                if ts in stamps:
                    stats.profile_ties += 1
                stamps.add(ts)
                last[index] = (ts, segment is None)
                if len(buffer) >= 8192:
                    fh.write("\n".join(buffer) + "\n")
                    buffer.clear()
            if buffer:
                fh.write("\n".join(buffer) + "\n")
        stats.profile_lines = len(records)
        stats.profile_users = len(seen_ts)
