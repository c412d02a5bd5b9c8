"""Kappa reprocessing: replay the retained log into a new version, then switch readers.

    lk reprocess --architecture kappa --logic-version 2     # `run`: every step below
    the `kappa_reprocess` DAG                               # the same steps, one task each

Reprocessing starts version N+1 from the earliest offsets of the retained log while N keeps
serving, replays in rounds until N+1 has caught up (`caught_up`, the one rule the CLI and the
DAG's sensor share), checks it, moves the alias in one transaction, and retires N (its job
stops at its next micro-batch; its rows, state and checkpoint are deleted). Until the switch
nothing N serves is touched, so a failure at any step leaves N serving; a reprocess killed
mid-replay resumes the same version from its checkpoint when run again, and one killed between
the switch and the retirement is retired by the next run. The switch never goes live behind N:
it compares the offsets both have read while N's job waits (`switch`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.catalog import DEFAULT_LOGIC_VERSION, VIEW_NAMES, check_logic_version
from core.checkpoints import behind
from core.delta_io import delete_tree
from core.kafka_io import log_bounds, log_end
from core.settings import Settings
from core.store import realtime, versions
from core.store.connection import connect, stream_lock
from core.store.streams import KAPPA_PREFIX, kappa_stream
from kappa.job import KAPPA, LIVE_STATUSES, Echo, KappaViews, Run, kappa_spec

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import SparkSession


class ReprocessError(RuntimeError):
    """A reprocess step failed; the version readers see is unchanged."""


def caught_up(settings: Settings, lag: Mapping[str, int], watermark_gap_ms: int | None) -> bool:
    """A replayed version has caught up with the live one when it is at most
    `LK_KAPPA_CATCHUP_MAX_LAG` records behind the log end (all partitions together) and its
    watermark is within `LK_KAPPA_CATCHUP_WATERMARK_SLACK_S` of the live version's."""
    gap_ok = watermark_gap_ms is None or (
        watermark_gap_ms <= settings.kappa_catchup_watermark_slack_s * 1000
    )
    return sum(lag.values()) <= settings.kappa_catchup_max_lag and gap_ok


@dataclass(frozen=True)
class ReplayRound:
    """One bounded replay round of a version: what it did, and how far behind it still is."""

    version: int
    micro_batches: int
    lag: dict[str, int]
    """Records behind the log end after the round, per ``topic/partition`` (zeros left out)."""
    watermark_gap_ms: int | None
    """How far its watermark trails the live version's (None: nothing to trail)."""
    caught_up: bool

    @property
    def lag_records(self) -> int:
        return sum(self.lag.values())


@dataclass(frozen=True)
class ReplayPosition:
    """Where a replay round stands, in log offsets over every partition of both topics (a
    compacted topic's gaps count as read): what a progress bar draws."""

    version: int
    round: int
    micro_batches: int
    read: int
    to_read: int


@dataclass
class CatchUp:
    rounds: int = 0
    micro_batches: int = 0
    lag_records: int = 0
    watermark_gap_ms: int | None = None


@dataclass
class ReprocessResult:
    version: int
    logic_version: str
    retired: int | None
    catch_up: CatchUp
    row_counts: dict[str, int]
    seconds_to_switch: float
    timings: dict[str, float] = field(default_factory=dict)


def find_version(settings: Settings, number: int) -> versions.Version:
    with connect(settings) as conn:
        found = versions.get(conn, KAPPA, number)
    if found is None:
        raise ReprocessError(f"there is no Kappa version {number}")
    return found


def has_superseded_build(settings: Settings, logic_version: str) -> bool:
    """Whether `start` would discard a build of another logic version (which needs Spark, to
    delete its checkpoint on MinIO): most starts find none and need no session."""
    with connect(settings) as conn:
        return any(v.logic_version != logic_version for v in versions.building(conn, KAPPA))


def left_behind(settings: Settings) -> list[int]:
    """Versions the alias has left (`retired`) whose output is still in the store: what
    `retire` has to drop, found in the store rather than remembered by the switch (a retried
    switch answers "nothing replaced", yet the old version is still there)."""
    with connect(settings) as conn:
        return versions.retired_with_output(conn, KAPPA, KAPPA_PREFIX)


class Reprocess:
    """The steps of a Kappa reprocess; `run` does them all, the DAG runs them as tasks."""

    def __init__(
        self,
        spark: SparkSession,
        settings: Settings,
        echo: Echo = lambda _: None,
        on_replay: Callable[[ReplayPosition], None] | None = None,
    ) -> None:
        self.views = KappaViews(spark, settings)
        self.settings = settings
        self.echo = echo
        self.on_replay = on_replay
        self.rounds = 0

    # 1. a new version (or the one a killed reprocess left building)
    def start(self, logic_version: str) -> versions.Version:
        check_logic_version(logic_version)
        self.views.active()  # a reprocess needs something to replace: version 1 at least
        with connect(self.settings) as conn, stream_lock(conn, "kappa-versions"):
            for unfinished in versions.building(conn, KAPPA):
                if unfinished.logic_version == logic_version:
                    return unfinished  # resume from its checkpoint
                self._discard(conn, unfinished, "superseded by a reprocess of another logic")
            number = versions.begin_version(conn, KAPPA, cutoff=None, logic_version=logic_version)
            created = versions.get(conn, KAPPA, number)
            assert created is not None
            return created

    # 2. replay, round by round, until caught up with the live version
    def replay_round(self, version: versions.Version) -> ReplayRound:
        """Replay what the log holds now (`availableNow`), then measure the lag and gap."""
        bounds = log_bounds(self.settings)
        before = {tp: high for tp, (_low, high) in bounds.items()}
        start = self._position(version, bounds)
        to_read = sum(max(0, before[tp] - at) for tp, at in start.items())
        self.rounds += 1

        def watch(run: Run, consumed: Mapping[str, int]) -> None:
            if self.on_replay is None:
                return
            read = sum(
                max(0, min(consumed.get(tp, at), before[tp]) - at) for tp, at in start.items()
            )
            self.on_replay(
                ReplayPosition(version.version, self.rounds, run.micro_batches, read, to_read)
            )

        # Polled every second only when someone draws it (`lk reprocess` on a terminal).
        polled = None if self.on_replay is None else (lambda run: watch(run, run.consumed))
        run = self.views.run_available_now(version, polled)
        # availableNow reads up to the log end at its start; the progress says exactly where.
        consumed = {**before, **run.consumed}
        watch(run, consumed)
        after = log_end(self.settings)
        lag = {
            tp: n for tp, end in sorted(after.items()) if (n := max(0, end - consumed.get(tp, 0)))
        }
        gap = self._watermark_gap(version)
        return ReplayRound(
            version.version, run.micro_batches, lag, gap, caught_up(self.settings, lag, gap)
        )

    def catch_up(self, version: versions.Version) -> CatchUp:
        result = CatchUp()
        while result.rounds < self.settings.kappa_catchup_max_rounds:
            round_ = self.replay_round(version)
            result.rounds += 1
            result.micro_batches += round_.micro_batches
            result.lag_records = round_.lag_records
            result.watermark_gap_ms = round_.watermark_gap_ms
            gap = round_.watermark_gap_ms
            self.echo(
                f"  replay round {result.rounds}: {result.micro_batches} micro-batches, "
                f"{result.lag_records} records behind the log end, watermark gap "
                f"{gap if gap is not None else '-'} ms"
            )
            if round_.caught_up:
                return result
        raise ReprocessError(
            f"{kappa_stream(version.version)} did not catch up in {result.rounds} rounds "
            f"({result.lag_records} records behind)"
        )

    def _position(
        self, version: versions.Version, bounds: Mapping[str, tuple[int, int]]
    ) -> dict[str, int]:
        """Where `version` stands per ``topic/partition``: what it has recorded reading, else the
        first offset the log retains."""
        with connect(self.settings) as conn:
            recorded = realtime.load_progress(conn, kappa_stream(version.version)).offsets
        return {tp: max(low, recorded.get(tp, low)) for tp, (low, _high) in bounds.items()}

    def _watermark_gap(self, version: versions.Version) -> int | None:
        with connect(self.settings) as conn:
            live = versions.current(conn, KAPPA)
            if live is None or live.version == version.version:
                return None
            ours = realtime.load_progress(conn, kappa_stream(version.version)).watermark_ms
            theirs = realtime.load_progress(conn, kappa_stream(live.version)).watermark_ms
        if theirs is None:
            return None
        return theirs - (ours if ours is not None else 0)

    # 3. check the new version before anyone reads it
    def check(self, version: versions.Version) -> dict[str, int]:
        from quality.checks import gate_stream  # deferred: great_expectations

        stream = kappa_stream(version.version)
        with connect(self.settings) as conn:
            new = realtime.row_counts(conn, stream)
            live = versions.current(conn, KAPPA)
            old = realtime.row_counts(conn, kappa_stream(live.version)) if live else {}
            empty = [v for v in VIEW_NAMES if old.get(v, 0) > 0 and new[v] == 0]
            if empty:
                raise ReprocessError(
                    f"{stream} has no rows for {', '.join(empty)} where the live version has some"
                )
        # The realtime_views suites on the new rows: a failure raises QualityGateError here,
        # before the switch, so the live version keeps serving.
        gate_stream(self.settings, stream, "kappa-reprocess", run_name=f"reprocess-{stream}")
        with connect(self.settings) as conn:
            versions.mark(conn, KAPPA, version.version, "building", row_counts=new)
        return new

    # 4. switch readers in one transaction; the old job stops at its next micro-batch
    def switch(self, version: versions.Version) -> int | None:
        """Move the alias to `version`, never behind the version it replaces: holding the live
        job's stream lock (its micro-batches wait), the new version's offsets must reach the
        live one's, after one more replay round if they do not yet."""
        with connect(self.settings) as conn, stream_lock(conn, "kappa-versions"):
            live = versions.current(conn, KAPPA)
            target = versions.get(conn, KAPPA, version.version)
            if target is None or target.status not in LIVE_STATUSES:
                raise ReprocessError(f"version {version.version} is {target and target.status}")
            if live is None or live.version == version.version:
                with conn.transaction():
                    versions.switch_alias(conn, target)
                return None
            with stream_lock(conn, kappa_stream(live.version)):
                if self._behind(version, live):
                    self.replay_round(version)  # up to the log's end: past the live job
                if missing := self._behind(version, live):
                    where = ", ".join(f"{tp} at {a} of {b}" for tp, (a, b) in missing.items())
                    raise ReprocessError(
                        f"{kappa_stream(version.version)} is behind the live "
                        f"{kappa_stream(live.version)} ({where}): not switched"
                    )
                with conn.transaction():
                    versions.switch_alias(conn, target)
        return live.version

    def _behind(
        self, version: versions.Version, live: versions.Version
    ) -> dict[str, tuple[int, int]]:
        """Where `version` has not read as far as `live`, per ``topic/partition``."""
        with connect(self.settings) as conn:
            ours = realtime.load_progress(conn, kappa_stream(version.version)).offsets
            theirs = realtime.load_progress(conn, kappa_stream(live.version)).offsets
        return behind(ours, theirs)

    # 5. retire what no reader can see any more
    def retire(self, old: int) -> None:
        with connect(self.settings) as conn:
            found = versions.get(conn, KAPPA, old)
            if found is not None:
                self._drop_output(conn, found)

    def _discard(self, conn: psycopg.Connection, version: versions.Version, why: str) -> None:
        self.echo(f"  discarding {kappa_stream(version.version)}: {why}")
        versions.mark(conn, KAPPA, version.version, "failed")
        self._drop_output(conn, version)

    def _drop_output(self, conn: psycopg.Connection, version: versions.Version) -> None:
        logic = version.logic_version or DEFAULT_LOGIC_VERSION
        spec = kappa_spec(self.settings, version.version, logic)
        with stream_lock(conn, spec.stream):  # waits for a micro-batch in flight
            realtime.drop_stream(conn, spec.stream)
        delete_tree(self.views.spark, spec.checkpoint)

    def run(self, logic_version: str) -> ReprocessResult:
        started = time.monotonic()
        timings: dict[str, float] = {}

        def lap(step: str) -> None:
            timings[step] = round(time.monotonic() - started - sum(timings.values()), 1)

        for old in left_behind(self.settings):  # a run that stopped after its switch
            self.echo(f"  retiring {kappa_stream(old)}, left behind by an earlier switch")
            self.retire(old)
        version = self.start(logic_version)
        self.echo(
            f"kappa: replaying the log into {kappa_stream(version.version)} "
            f"(logic version {logic_version}) while the live version keeps serving"
        )
        lap("start")
        try:
            catch_up = self.catch_up(version)
            lap("replay")
            counts = self.check(version)
            lap("check")
        except Exception as exc:
            with connect(self.settings) as conn:
                self._discard(conn, version, f"{exc}")
            raise ReprocessError(
                f"reprocess stopped, the live version keeps serving: {exc}"
            ) from exc
        retired = self.switch(version)
        seconds_to_switch = time.monotonic() - started
        lap("switch")
        if retired is not None:
            self.retire(retired)
        lap("retire")
        return ReprocessResult(
            version.version, logic_version, retired, catch_up, counts, seconds_to_switch, timings
        )
