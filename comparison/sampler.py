"""Every few seconds, each architecture's served answer against the oracle; and freshness.

A sample reads every view of both architectures as a reader would (`serving.repository`, one
snapshot per view) and measures its distance from the oracle computed over the lines the feed
has produced so far, under the logic version the run intends to serve. Between samples the
streams' committed offsets are polled: the moment an architecture's offsets pass a produced
record's offset in its partition, that record is visible, and its freshness is the time since
its line was handed to the producer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from comparison.errors import ComparisonError
from comparison.feed import Clock, Mark, SteadyFeed
from comparison.figures import Freshness, Sample
from core.catalog import VIEW_NAMES
from core.comparison import view_distance
from core.oracle import OracleResult, compute_views, logic_filter
from core.settings import Settings
from core.store import realtime, versions
from core.store.connection import connect
from serving.filters import parse_view_query
from serving.repository import read_view

ARCHITECTURES = ("lambda", "kappa")
PROGRESS_POLL_S = 0.5


def _rows(conn: Any, architecture: str, view: str) -> tuple[list[dict[str, Any]], Any]:
    rows, meta = read_view(conn, parse_view_query(view, [], architecture))  # type: ignore[arg-type]
    return [dict(r) for r in rows], meta


def served(settings: Settings, architecture: str) -> dict[str, tuple[list[dict[str, Any]], Any]]:
    """Every view of `architecture` as the serving layer answers it: view → (rows, meta)."""
    with connect(settings) as conn:
        return {view: _rows(conn, architecture, view) for view in VIEW_NAMES}


def served_view(settings: Settings, architecture: str, view: str) -> list[dict[str, Any]]:
    """One view's rows, as the serving layer answers them."""
    with connect(settings) as conn:
        return _rows(conn, architecture, view)[0]


class Visibility:
    """Which of the feed's records each architecture's stream has made visible, partition by
    partition: a record is visible once the stream's committed offset in its partition passes
    it, whatever the other partitions' progress."""

    def __init__(self, architectures: Sequence[str]) -> None:
        self._marks: dict[str, list[Mark]] = {}
        """Per partition, in offset order (a partition's acknowledgements come in order)."""
        self._taken = 0
        self._seen: dict[str, dict[str, int]] = {a: {} for a in architectures}
        """Per architecture and partition: how many of its marks are visible."""

    def take(self, marks: Sequence[Mark]) -> None:
        """The feed's marks so far (a list it only appends to): the new ones are kept."""
        for mark in marks[self._taken : len(marks)]:
            self._marks.setdefault(mark.partition, []).append(mark)
            self._taken += 1

    def advance(self, architecture: str, offsets: Mapping[str, int], now: float) -> list[float]:
        """The lags (`now` less the produced time) of the records `offsets`, the stream's next
        offset per ``topic/partition``, made visible since the last call."""
        seen, lags = self._seen[architecture], []
        for tp, marks in self._marks.items():
            n, read_up_to = seen.get(tp, 0), offsets.get(tp, 0)
            while n < len(marks) and marks[n].offset < read_up_to:
                lags.append(round(now - marks[n].produced_at_s, 3))
                n += 1
            seen[tp] = n
        return lags

    def complete(self) -> bool:
        """Whether every architecture has made every record taken so far visible."""
        return all(
            seen.get(tp, 0) >= len(marks)
            for seen in self._seen.values()
            for tp, marks in self._marks.items()
        )


class Sampler:
    """Samples both architectures in a thread of its own until stopped."""

    def __init__(
        self,
        settings: Settings,
        clock: Clock,
        feed: SteadyFeed,
        profiles: list[Any],
        every_s: float,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.feed = feed
        self.profiles = profiles
        self.every_s = every_s
        self.scenario = "steady"
        self.logic_version = "1"
        """The logic version the run means to serve: the oracle's (a bug is measured as the
        distance from the intended logic, not from the deployed one)."""
        self.samples: list[Sample] = []
        self.lags: dict[str, list[float]] = {a: [] for a in ARCHITECTURES}
        self._visibility = Visibility(ARCHITECTURES)
        self._oracles: dict[tuple[int, str], OracleResult] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._progress_lock = threading.Lock()

    # -- the oracle ------------------------------------------------------------------------

    def oracle(self, produced: int | None = None, logic_version: str | None = None) -> OracleResult:
        """The views over the first `produced` lines (default: all produced so far)."""
        n = self.feed.produced_lines if produced is None else produced
        logic = logic_version or self.logic_version
        key = (n, logic)
        if key not in self._oracles:
            self._oracles = {k: v for k, v in self._oracles.items() if k[0] == n}  # keep one
            self._oracles[key] = compute_views(
                self.feed.lines[:n], self.profiles, keep=logic_filter(logic)
            )
        return self._oracles[key]

    # -- samples ---------------------------------------------------------------------------

    def sample(self) -> list[Sample]:
        """One sample of every view of both architectures, now."""
        with self._lock:
            produced = self.feed.produced_lines
            oracle = self.oracle(produced)
            taken = []
            for architecture in ARCHITECTURES:
                at = self.clock.now()
                try:
                    answers = served(self.settings, architecture)
                except Exception:  # the store is down: a gap in what readers get
                    taken += [
                        Sample(at, self.scenario, architecture, v, produced, 0, 0, None, 503)
                        for v in VIEW_NAMES
                    ]
                    continue
                for view, (rows, meta) in answers.items():
                    distance = view_distance(view, rows, oracle.views[view])
                    taken.append(
                        Sample(
                            at,
                            self.scenario,
                            architecture,
                            view,
                            produced,
                            distance.expected,
                            distance.off,
                            meta.view_version,
                        )
                    )
            self.samples += taken
            return taken

    def rows_off(self, architecture: str, logic_version: str | None = None) -> int:
        """Rows off in every view of `architecture` now, against the whole produced log."""
        return sum(self.views_off(architecture, logic_version).values())

    def views_off(self, architecture: str, logic_version: str | None = None) -> dict[str, int]:
        """Rows off in each view of `architecture` now, against the whole produced log."""
        with self._lock:  # the oracle's cache is shared with the sampler's thread
            oracle = self.oracle(logic_version=logic_version)
        answers = served(self.settings, architecture)
        return {
            view: view_distance(view, rows, oracle.views[view]).off
            for view, (rows, _meta) in answers.items()
        }

    # -- freshness -------------------------------------------------------------------------

    def _poll_progress(self) -> None:
        with self._progress_lock:  # the sampler's thread and `caught_up`'s caller both poll
            self._poll_progress_once()

    def _poll_progress_once(self) -> None:
        with connect(self.settings) as conn:
            streams = {a: versions.live_stream(conn, a) for a in ARCHITECTURES}
            read = {
                a: realtime.load_progress(conn, s).offsets
                for a, s in streams.items()
                if s is not None
            }
        now = self.clock.now()
        self._visibility.take(self.feed.marks)
        for architecture, offsets in read.items():
            self.lags[architecture] += self._visibility.advance(architecture, offsets, now)

    def caught_up(self) -> bool:
        """Whether both architectures' streams have made every acknowledged record visible."""
        self._poll_progress()
        return self._visibility.complete()

    def freshness(self) -> list[Freshness]:
        return [Freshness.of(a, lags) for a, lags in self.lags.items()]

    # -- the thread ------------------------------------------------------------------------

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()

    def _run(self) -> None:
        next_sample = 0.0
        while not self._stop.is_set():
            try:
                self._poll_progress()
                if self.clock.now() >= next_sample:
                    self.sample()
                    next_sample = self.clock.now() + self.every_s
            except Exception:  # noqa: S110 - a store outage is sampled as such, never fatal
                pass
            self._stop.wait(PROGRESS_POLL_S)


def wait_for(
    condition: Callable[[], bool], timeout_s: float, what: str, step_s: float = 1.0
) -> float:
    """Poll `condition` until it holds; the seconds it took. `ComparisonError` naming `what`
    after `timeout_s`."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started >= timeout_s:
            raise ComparisonError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(step_s)
    return time.monotonic() - started
