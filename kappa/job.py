"""The Kappa job: the stream engine as the only path, one view version per logic.

    lk drain --architecture kappa        # the active version, through what is in the log now
    lk stream --architecture kappa       # the active version, continuously (follows the alias)

Version N of the Kappa views is the stream `kappa-vN`: its own checkpoint (with Spark's
deduplication state), its own keyed state and rows in the serving store; readers follow the
`kappa` alias. A new version is built by replaying the retained log (`kappa.reprocess`).

There is no batch layer: no cutoff, no session seeds. The profile join is as of event time
because the revenue view's partial keeps every profile version read, per user, beside the
user's orders, and the shared `revenue_by_segment` picks the version in force at each order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from core.catalog import DEFAULT_LOGIC_VERSION
from core.settings import Architecture, Settings
from core.spark import wait_stopped
from core.store import state, versions
from core.store.connection import connect, stream_lock
from core.store.streams import kappa_stream
from core.views.logic_versions import logic_query
from stream_engine.engine import StreamEngine, StreamSpec

if TYPE_CHECKING:
    import threading

    import psycopg
    from pyspark.sql import SparkSession
    from pyspark.sql.streaming import StreamingQuery

KAPPA = Architecture.KAPPA
LIVE_STATUSES = ("building", "ready", "published")
"""A version in one of these may still be written: its job keeps running."""

Echo = Callable[[str], None]


class KappaError(RuntimeError):
    """A Kappa stream job failed; the version readers see is unchanged."""


def _is_live(conn: psycopg.Connection, version: int) -> bool:
    found = versions.get(conn, KAPPA, version)
    return found is not None and found.status in LIVE_STATUSES


def kappa_spec(settings: Settings, version: int, logic_version: str) -> StreamSpec:
    stream = kappa_stream(version)
    return StreamSpec(
        stream=stream,
        checkpoint=f"s3a://{settings.checkpoints_bucket}/{stream}",
        architecture=KAPPA.value,
        watermark_delay_ms=settings.watermark_delay_ms,
        max_offsets_per_trigger=settings.stream_max_offsets_per_trigger,
        logic=lambda conn: logic_query(logic_version),
        writable=lambda conn: _is_live(conn, version),
        history_on_spark=True,  # a new version replays the log on every core and executor
    )


@dataclass(frozen=True)
class Run:
    """One bounded run of a version's job: what it did and where it stopped reading."""

    micro_batches: int
    consumed: dict[str, int]
    """The offsets its last micro-batch read up to, per ``topic/partition`` it read."""


Watch = Callable[[Run], None]


def _micro_batches(engine: StreamEngine) -> int:
    return len([o for o in engine.outcomes if not o.skipped])


def _consumed(query: StreamingQuery) -> dict[str, int]:
    consumed: dict[str, int] = {}
    for entry in query.recentProgress:
        progress = entry if isinstance(entry, dict) else json.loads(entry.json)
        for source in cast("dict[str, Any]", progress).get("sources", []):
            end = source.get("endOffset")
            end = json.loads(end) if isinstance(end, str) else end
            for topic, partitions in (end or {}).items():
                for partition, offset in partitions.items():
                    consumed[f"{topic}/{partition}"] = int(offset)
    return consumed


class KappaViews:
    """The versions of the Kappa views and the stream job of each."""

    def __init__(self, spark: SparkSession, settings: Settings) -> None:
        self.spark = spark
        self.settings = settings

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

    def run_available_now(self, version: versions.Version, watch: Watch | None = None) -> Run:
        """Process what the log holds now into `version` (`availableNow`: up to the log end at
        the start of the run); `watch` is told where the run stands every second."""
        engine = self.engine(version)
        query = engine.start(available_now=True)
        while not wait_stopped(query, None if watch is None else 1.0):
            assert watch is not None
            watch(Run(_micro_batches(engine), _consumed(query)))
        if (failure := engine.finish(query)) is not None:
            raise KappaError(f"{kappa_stream(version.version)} failed: {failure}")
        return Run(_micro_batches(engine), _consumed(query))

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
            engine = self.engine(version)
            query = engine.start(available_now=False, trigger_seconds=trigger_seconds)
            stream = kappa_stream(version.version)
            echo(f"kappa: running {stream} (logic version {version.logic_version})")
            moved = False
            while not stopping.is_set() and query.isActive and not moved:
                stopping.wait(poll_s)
                with connect(self.settings) as conn:
                    current = versions.current(conn, KAPPA)
                moved = current is not None and current.version != version.version
            query.stop()
            failure = engine.finish(query)
            if not moved and not stopping.is_set() and failure is not None:
                raise KappaError(f"{kappa_stream(version.version)} failed: {failure}")
