"""The Lambda speed layer: the stream engine after the batch cutoff, and the hand-off.

    lk drain --architecture lambda     # archive, batch, then the speed layer until caught up

The speed layer covers event time from the published batch cutoff on. When the batch layer
marks a new version ready, the speed layer performs the hand-off in one transaction: it
recomputes its rows from the new cutoff on (continuing the sessions the batch leaves open, and
merging the batch's partials of the current state per user), replaces them, and moves the
alias to the new version. Readers see either the old batch with
the old real-time rows or the new batch with the new ones: never both, never neither. The
speed layer keeps the events it accepted (``stream_engine.accepted_log``) for this recomputation
alone; its micro-batches merge partial aggregates into keyed state like Kappa's. The
real-time rows follow the published batch's logic version, so a `lambda_reprocess` into
another logic changes the answers on both sides of the cutoff at once.
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from core.object_store import object_store
from core.settings import Architecture, Settings
from core.spark import wait_stopped
from core.store import realtime, sessions, state, versions
from core.store.connection import connect, stream_lock
from core.store.streams import LAMBDA_SPEED as STREAM
from core.store.streams import batch_partials_stream
from core.times import to_timestamp
from core.views.logic_versions import logic_query
from core.views.sessions import reach
from stream_engine.accepted_log import AcceptedLog
from stream_engine.engine import StreamEngine, StreamSpec, recompute_accepted

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import SparkSession

    from core.views.query import Query

LAMBDA = Architecture.LAMBDA


def published_cutoff(conn: psycopg.Connection) -> int | None:
    current = versions.current(conn, LAMBDA)
    return None if current is None else current.cutoff_ms


def open_batch_sessions(
    conn: psycopg.Connection, users: list[str], cutoff: int | None
) -> list[tuple]:
    current = versions.current(conn, LAMBDA)
    cutoff_ms = None if current is None else current.cutoff_ms
    if current is None or cutoff_ms is None:
        return []
    # A batch session ending less than a session gap before the cutoff may go on after it.
    horizon, _ = reach(cutoff_ms, cutoff_ms)
    return sessions.open_batch_sessions(conn, current.version, to_timestamp(horizon), users)


def batch_partials(conn: psycopg.Connection, view: str) -> list[str]:
    """The published batch version's partial rows of `view` (a view of the current state),
    which the hand-off merges with the speed layer's own, per key, before the join: a profile
    change after the cutoff moves the user's batch-side revenue too."""
    current = versions.current(conn, LAMBDA)
    if current is None:
        return []
    return state.load_all(conn, batch_partials_stream(current.version), view)


def published_logic(conn: psycopg.Connection) -> Query | None:
    """The published batch version's logic, for the real-time rows after its cutoff: a batch
    of another logic version (`lambda_reprocess`) changes both sides at the hand-off."""
    current = versions.current(conn, LAMBDA)
    if current is None or current.logic_version is None:
        return None
    return logic_query(current.logic_version)


def speed_spec(settings: Settings) -> StreamSpec:
    return StreamSpec(
        stream=STREAM,
        checkpoint=f"s3a://{settings.checkpoints_bucket}/{STREAM}",
        architecture=LAMBDA.value,
        accepted_log=AcceptedLog(
            object_store(settings), f"{settings.views_bucket}/state/{STREAM}/accepted"
        ),
        watermark_delay_ms=settings.watermark_delay_ms,
        cutoff=published_cutoff,
        session_seeds=open_batch_sessions,
        partial_seeds=batch_partials,
        logic=published_logic,
        max_offsets_per_trigger=settings.stream_max_offsets_per_trigger,
    )


class SpeedLayer:
    """The engine plus the hand-off, serialised by a lock on the stream. The hand-off needs
    no Spark (it recomputes from the accepted log on DuckDB): `spark` may be None for it."""

    def __init__(self, spark: SparkSession | None, settings: Settings) -> None:
        self.settings = settings
        self.spec = speed_spec(settings)
        self._spark = spark
        self.published: int | None = None
        """The batch version readers saw at the last `handoff` call (None: none yet)."""

    @cached_property
    def engine(self) -> StreamEngine:
        if self._spark is None:
            raise RuntimeError("the speed layer's stream needs a Spark session")
        return StreamEngine(self._spark, self.settings, self.spec)

    def handoff(self) -> int | None:
        """Publish the newest ready batch version, if any; returns it."""
        with connect(self.settings) as conn, stream_lock(conn, STREAM):
            return self._handoff(conn)

    def _handoff(self, conn: psycopg.Connection) -> int | None:
        ready = versions.latest_ready(conn, LAMBDA)
        current = versions.current(conn, LAMBDA)
        self.published = None if current is None else current.version
        if ready is None or (current is not None and ready.version <= current.version):
            return None
        cutoff = ready.cutoff_ms
        with conn.transaction():
            versions.switch_alias(conn, ready)  # seen by the seeds below, committed below
            changes, states = recompute_accepted(
                self.spec, conn, cutoff, self.settings.events_topic
            )
            realtime.replace_all(conn, STREAM, changes)
            state.replace_all(conn, STREAM, states)
        self.published = ready.version
        versions.drop_batch_rows(conn, ready.version)
        log = self.spec.accepted_log
        if cutoff is not None and log is not None:  # the batch holds these events now
            log.trim(cutoff)
        return ready.version

    def drain(self) -> None:
        """Process everything now in the log, then hand off to a ready batch version."""
        self.handoff()
        query = self.engine.start(available_now=True)
        wait_stopped(query)
        if (failure := self.engine.finish(query)) is not None:
            raise RuntimeError(f"speed layer failed: {failure}")
        self.handoff()
