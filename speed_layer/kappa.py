"""Kappa: the stream engine as the only path, with versioned output and replay.

    lk drain --architecture kappa        # the active version, through what is in the log now
    lk stream --architecture kappa       # the active version, continuously (follows the alias)
    lk reprocess --architecture kappa --logic-version 2

Version N of the Kappa views is the stream `kappa-vN`: its own checkpoint (with Spark's
deduplication state), its own keyed state and rows in the serving store; readers follow the
`kappa` alias. Reprocessing starts version N+1 from the earliest offsets of the retained log
while N keeps serving, waits
until N+1 has caught up, checks it, moves the alias in one transaction, and retires N (its job
stops at its next micro-batch, its rows, state and checkpoint are deleted). Until the switch
nothing N serves is touched, so a failure at any step leaves N serving; a reprocess killed
mid-replay resumes the same version from its checkpoint when run again.

There is no batch layer: no cutoff, no session seeds. The profile join is as of event time
because the revenue view's partial keeps every profile version read, per user, beside the
user's orders, and the shared `revenue_by_segment` picks the version in force at each order.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from core.catalog import DEFAULT_LOGIC_VERSION, VIEW_NAMES, check_logic_version
from core.delta_io import delete_tree
from core.kafka_io import end_offsets
from core.settings import Settings
from core.store import realtime, state, versions
from core.store.connection import connect, stream_lock
from core.store.schema import create_all, realtime_table
from core.store.streams import kappa_stream
from core.views.logic_versions import event_filter
from speed_layer.engine import StreamEngine, StreamSpec

if TYPE_CHECKING:
    import threading

    import psycopg
    from pyspark.sql import SparkSession

KAPPA = "kappa"
LIVE_STATUSES = ("building", "ready", "published")

Echo = Callable[[str], None]


class ReprocessError(RuntimeError):
    """A reprocess step failed; the version readers see is unchanged."""


def _is_live(conn: psycopg.Connection, version: int) -> bool:
    found = versions.get(conn, KAPPA, version)
    return found is not None and found.status in LIVE_STATUSES


def kappa_spec(settings: Settings, version: int, logic_version: str) -> StreamSpec:
    stream = kappa_stream(version)
    return StreamSpec(
        stream=stream,
        checkpoint=f"s3a://{settings.checkpoints_bucket}/{stream}",
        watermark_delay_ms=settings.watermark_delay_ms,
        max_offsets_per_trigger=settings.stream_max_offsets_per_trigger,
        view_filter=lambda conn: event_filter(logic_version),
        writable=lambda conn: _is_live(conn, version),
    )


def _log_end(settings: Settings) -> dict[tuple[str, int], int]:
    ends = {}
    for topic in (settings.events_topic, settings.profiles_topic):
        for partition, (_low, high) in end_offsets(settings, topic).items():
            ends[(topic, partition)] = high
    return ends


class KappaViews:
    """The versions of the Kappa views and the stream job of each."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings
        with connect(settings) as conn:
            create_all(conn)

    def engine(self, version: versions.Version) -> StreamEngine:
        logic = version.logic_version or DEFAULT_LOGIC_VERSION
        return StreamEngine(
            self.spark, self.settings, kappa_spec(self.settings, version.version, logic)
        )

    def active(self) -> versions.Version:
        """The version readers see; on a first start, version 1 (published at once: there is
        nothing older to keep serving)."""
        with connect(self.settings) as conn, stream_lock(conn, "kappa-versions"):
            current = versions.current(conn, KAPPA)
            if current is not None:
                return current
            number = versions.begin_version(
                conn, KAPPA, cutoff=None, logic_version=DEFAULT_LOGIC_VERSION
            )
            created = versions.get(conn, KAPPA, number)
            assert created is not None
            with conn.transaction():
                versions.switch_alias(conn, created)
            return created

    def run_available_now(self, version: versions.Version) -> int:
        """Process what the log holds now into `version`; returns the micro-batches run."""
        engine = self.engine(version)
        query = engine.start(available_now=True)
        query.awaitTermination()
        if query.exception() is not None:
            raise ReprocessError(f"{kappa_stream(version.version)} failed: {query.exception()}")
        return len([o for o in engine.outcomes if not o.skipped])

    def drain(self) -> versions.Version:
        version = self.active()
        self.run_available_now(version)
        return version

    def late_event_ids(self, version: versions.Version) -> set[str]:
        """The events `version`'s watermark dropped as late (its audit table): what sets the
        Kappa answer apart from the oracle's."""
        with connect(self.settings) as conn:
            return state.late_event_ids(conn, kappa_stream(version.version))

    def follow(
        self, stopping: threading.Event, trigger_seconds: float, poll_s: float, echo: Echo
    ) -> None:
        """Run the active version's job continuously; when a reprocess moves the alias, stop it
        and run the new version from its own checkpoint."""
        while not stopping.is_set():
            version = self.active()
            query = self.engine(version).start(available_now=False, trigger_seconds=trigger_seconds)
            stream = kappa_stream(version.version)
            echo(f"kappa: running {stream} (logic version {version.logic_version})")
            moved = False
            while not stopping.is_set() and query.isActive and not moved:
                stopping.wait(poll_s)
                with connect(self.settings) as conn:
                    current = versions.current(conn, KAPPA)
                moved = current is not None and current.version != version.version
            query.stop()
            if not moved and not stopping.is_set() and query.exception() is not None:
                raise ReprocessError(f"{kappa_stream(version.version)} failed: {query.exception()}")


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


class Reprocess:
    """The steps of a Kappa reprocess; `run` does them all, the DAG runs them as tasks."""

    def __init__(
        self, spark: SparkSession, settings: Settings, echo: Echo = lambda _: None
    ) -> None:
        self.views = KappaViews(spark, settings)
        self.settings = settings
        self.echo = echo

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

    # 2. replay until caught up with the live version
    def catch_up(self, version: versions.Version) -> CatchUp:
        s = self.settings
        result = CatchUp()
        while result.rounds < s.kappa_catchup_max_rounds:
            before = _log_end(s)
            result.micro_batches += self.views.run_available_now(version)
            result.rounds += 1
            after = _log_end(s)
            result.lag_records = sum(after[tp] - before.get(tp, 0) for tp in after)
            result.watermark_gap_ms = self._watermark_gap(version)
            gap_ok = result.watermark_gap_ms is None or (
                result.watermark_gap_ms <= s.kappa_catchup_watermark_slack_s * 1000
            )
            self.echo(
                f"  replay round {result.rounds}: {result.micro_batches} micro-batches, "
                f"{result.lag_records} records arrived meanwhile, watermark gap "
                f"{result.watermark_gap_ms if result.watermark_gap_ms is not None else '-'} ms"
            )
            if result.lag_records <= s.kappa_catchup_max_lag and gap_ok:
                return result
        raise ReprocessError(
            f"{kappa_stream(version.version)} did not catch up in {result.rounds} rounds "
            f"({result.lag_records} records behind)"
        )

    def _watermark_gap(self, version: versions.Version) -> int | None:
        """How far the new version's watermark trails the live one's (None: nothing to trail)."""
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
        with connect(self.settings) as conn:
            new = _row_counts(conn, kappa_stream(version.version))
            live = versions.current(conn, KAPPA)
            old = _row_counts(conn, kappa_stream(live.version)) if live else {}
            empty = [v for v in VIEW_NAMES if old.get(v, 0) > 0 and new[v] == 0]
            if empty:
                raise ReprocessError(
                    f"{kappa_stream(version.version)} has no rows for {', '.join(empty)} "
                    "where the live version has some"
                )
        # The realtime_views suites on the new rows: a failure raises QualityGateError here,
        # before the switch, so the live version keeps serving.
        from core.quality.checks import gate_stream

        stream = kappa_stream(version.version)
        gate_stream(self.settings, stream, "kappa-reprocess", run_name=f"reprocess-{stream}")
        with connect(self.settings) as conn:
            versions.mark(conn, KAPPA, version.version, "building", row_counts=new)
        return new

    # 4. switch readers in one transaction; the old job stops at its next micro-batch
    def switch(self, version: versions.Version) -> int | None:
        with connect(self.settings) as conn, stream_lock(conn, "kappa-versions"):
            live = versions.current(conn, KAPPA)
            target = versions.get(conn, KAPPA, version.version)
            if target is None or target.status not in ("building", "ready", "published"):
                raise ReprocessError(f"version {version.version} is {target and target.status}")
            with conn.transaction():
                versions.switch_alias(conn, target)
        return None if live is None or live.version == version.version else live.version

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
        spec = kappa_spec(self.settings, version.version, version.logic_version or "1")
        with stream_lock(conn, spec.stream):  # waits for a micro-batch in flight
            realtime.drop_stream(conn, spec.stream)
        delete_tree(self.views.spark, spec.checkpoint)

    def run(self, logic_version: str) -> ReprocessResult:
        started = time.monotonic()
        timings: dict[str, float] = {}

        def lap(step: str) -> None:
            timings[step] = round(time.monotonic() - started - sum(timings.values()), 1)

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


def _row_counts(conn: psycopg.Connection, stream: str) -> dict[str, int]:
    counts = {}
    for view in VIEW_NAMES:
        row = conn.execute(
            f"select count(*) from {realtime_table(view)} where stream = %s", (stream,)
        ).fetchone()
        counts[view] = int(row[0]) if row else 0
    return counts
