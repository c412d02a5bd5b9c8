"""The quality of what readers see: the served views, and Lambda vs Kappa vs the oracle.

    validate_realtime(settings, "kappa", run_name)    # data_quality: what readers see now
    run_reconciliation(settings, run_name)            # data_quality: Lambda vs Kappa vs oracle

Both read the views exactly as the serving API answers them (``serving.repository``, one
snapshot), run the suites of ``quality`` and record every result's summary for the API.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

import quality.layers as layers
import quality.suites as suites
from core.catalog import DEFAULT_LOGIC_VERSION, VIEW_NAMES, VIEWS
from core.events import ProfileChange
from core.kafka_io import log_end, log_event_values, log_profile_changes
from core.oracle import compute_views, keep_all_of, logic_filter
from core.settings import Architecture, Settings
from core.spark import build_spark_session
from core.store import quality_results as records
from core.store import realtime, versions
from core.store import state as stream_state
from core.store.connection import connect
from core.times import parse_iso
from quality.checks import validate_view_frames
from quality.reconciliation import combine, cross_view, reconcile
from quality.result import QualityResult
from quality.validation import validate
from serving.filters import parse_view_query
from serving.repository import read_view

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import SparkSession

    from core.events import Event, ProfileChange

log = logging.getLogger(__name__)
Echo = Callable[[str], None]


def _served(conn: psycopg.Connection, view: str, architecture: str) -> tuple[list[Any], Any]:
    """Rows and meta of ``view`` exactly as the serving API answers (one snapshot)."""
    rows, meta = read_view(conn, parse_view_query(view, [], architecture))
    return [dict(row) for row in rows], meta


def validate_realtime(settings: Settings, architecture: str, run_name: str) -> list[QualityResult]:
    """``realtime_views.<view>`` on what readers of ``architecture`` see now (Lambda: the merged
    batch and speed rows). Returns the results, failed ones included; none when the
    architecture serves nothing yet."""
    with connect(settings) as conn:
        served = {view: _served(conn, view, architecture) for view in VIEW_NAMES}
    if all(not rows and meta.view_version is None for rows, meta in served.values()):
        return []
    frames = {view: _frame(view, rows) for view, (rows, _meta) in served.items()}
    return validate_view_frames(
        suites.REALTIME_VIEWS,
        frames,
        settings=settings,
        layer=layers.SERVING[architecture],
        run_name=run_name,
    )


def _frame(view: str, rows: list[dict[str, Any]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=list(VIEWS[view].columns))


# --- reconciliation -------------------------------------------------------------------------


@dataclass(frozen=True)
class Served:
    """One architecture's served rows of every view, and how far its windows are final."""

    architecture: str
    rows: dict[str, list[dict[str, Any]]]
    closed_before_ms: int | None
    """Windows ending at or before it no longer change (None: nothing is final yet)."""
    logic_version: str
    stream: str | None
    cutoff_ms: int | None = None
    """Lambda: the published batch's cutoff (the batch counted every event before it)."""
    offsets: dict[str, int] | None = None
    """How far the stream read had read the log (next offset per ``topic/partition``) when
    the rows were read; None if it moved while they were read."""


def _read_position(
    conn: psycopg.Connection, architecture: str, stream: str | None
) -> tuple[Any, ...]:
    """What the served rows depend on besides the log: the alias and the stream's progress."""
    current = versions.current(conn, architecture)
    alias = None if current is None else (current.version, current.cutoff_ms)
    offsets = {} if stream is None else realtime.load_progress(conn, stream).offsets
    return alias, offsets


def _served_all(settings: Settings, architecture: str) -> Served | None:
    with connect(settings) as conn:
        stream = versions.live_stream(conn, architecture)
        before = _read_position(conn, architecture, stream)
        served = {view: _served(conn, view, architecture) for view in VIEW_NAMES}
        after = _read_position(conn, architecture, stream)
        current = versions.current(conn, architecture)
    meta = served[VIEW_NAMES[0]][1]
    if current is None:
        return None
    watermark = None if meta.speed_watermark is None else parse_iso(meta.speed_watermark)
    closed = watermark
    if architecture == Architecture.LAMBDA and current.cutoff_ms is not None:
        # Windows before the cutoff are the batch's, final; after it the speed layer's.
        closed = max(current.cutoff_ms, watermark or 0)
    steady = before == after and stream == meta.stream
    return Served(
        architecture=architecture,
        rows={view: rows for view, (rows, _meta) in served.items()},
        closed_before_ms=closed,
        logic_version=current.logic_version or DEFAULT_LOGIC_VERSION,
        stream=meta.stream,
        cutoff_ms=current.cutoff_ms if architecture == Architecture.LAMBDA else None,
        offsets=after[1] if steady else None,
    )


def _late_ids(settings: Settings, served: Served) -> set[str]:
    """The events the architecture's stream dropped as late (its audit table)."""
    if served.stream is None:
        return set()
    with connect(settings) as conn:
        return stream_state.late_event_ids(conn, served.stream)


def _not_in(late: set[str], before_ms: int | None = None) -> Callable[[Event], bool]:
    """A ``keep`` that drops the events whose ids are in `late` (with `before_ms`, only those
    from that instant on: Lambda's batch counted the others)."""
    if before_ms is None:
        return lambda event: event.event_id not in late
    return lambda event: event.event_ts < before_ms or event.event_id not in late


def _unsettled(
    settings: Settings, sides: tuple[Served, ...], end: dict[str, int], from_history: bool
) -> str | None:
    """Why the served rows may lack records the oracle, read from the log ending at `end`,
    counts (None: both sides had read all of it): a view of the current state is compared only
    then, as none of it is ever final."""
    reasons = []
    for side in sides:
        if side.offsets is None:
            reasons.append(f"{side.architecture} moved while its views were read")
            continue
        behind = sum(max(0, high - side.offsets.get(tp, 0)) for tp, high in end.items())
        if behind:
            read = side.stream or side.architecture
            reasons.append(f"{read} is {behind:,} records behind the log's end")
    if from_history:  # the oracle's profiles: the master dataset's, as archived so far
        with connect(settings) as conn:
            archived = realtime.archived(conn)
        topic = f"{settings.profiles_topic}/"
        ends = {tp: high for tp, high in end.items() if tp.startswith(topic)}
        behind = sum(max(0, high - archived.get(tp, 0)) for tp, high in ends.items())
        if behind:
            reasons.append(f"the archive is {behind:,} profile records behind the log's end")
    return "; ".join(reasons) or None


def _profile_history(spark: SparkSession, settings: Settings) -> list[ProfileChange] | None:
    """Every profile version from the master dataset (which compaction never touches), in
    log order; None without a master dataset."""
    from core.ingestion import PROFILE_COLUMNS, parse_profiles  # deferred: pyspark
    from core.master_dataset import RAW_COLUMNS, MasterDataset, require_raw  # deferred: pyspark

    path = MasterDataset.from_settings(settings).profiles
    if not require_raw(spark, path):
        return None
    raw = spark.read.format("delta").load(path).select(*RAW_COLUMNS)
    rows = parse_profiles(raw).select(*PROFILE_COLUMNS).collect()
    ordered = sorted(rows, key=lambda r: (r["partition"], r["offset"]))
    return [ProfileChange(r["user_id"], r["segment"], int(r["updated_ts"])) for r in ordered]


def reconciliation_table(
    settings: Settings, spark: SparkSession, lam: Served, kap: Served
) -> pd.DataFrame:
    """Every closed window where Lambda, Kappa and the oracle (from the log's events and the
    master dataset's profile history) disagree, with the cause, and where a side breaks a
    rule across views (``quality.reconciliation.cross_view``). A view of the current state
    is compared only when both architectures had read the whole log the oracle reads.

    Late data: the oracle without the events each architecture's stream dropped as late; for
    Lambda's views whose rows span its cutoff (sessions, hopping windows, the current state),
    only those from the cutoff on, since the batch counted every event before it."""
    assert lam.closed_before_ms is not None and kap.closed_before_ms is not None
    closed_before = min(lam.closed_before_ms, kap.closed_before_ms)
    values = log_event_values(settings)
    profiles = _profile_history(spark, settings)
    from_history = profiles is not None
    if profiles is None:
        profiles = log_profile_changes(settings)
    # Read after the oracle's input: a side that had read up to it read exactly that input.
    unsettled = _unsettled(settings, (lam, kap), log_end(settings), from_history)
    logic = logic_filter(lam.logic_version)
    oracle = compute_views(values, profiles, keep=logic)
    without_late: dict[str, dict[str, list[dict[str, Any]]]] = {}
    spanning: dict[str, dict[str, list[dict[str, Any]]]] = {}  # views straddling the cutoff
    for side in (lam, kap):
        late = _late_ids(settings, side)
        if late:
            keep = keep_all_of(logic, _not_in(late))
            without_late[side.architecture] = compute_views(values, profiles, keep=keep).views
            if side.cutoff_ms is not None:
                keep = keep_all_of(logic, _not_in(late, side.cutoff_ms))
                spanning[side.architecture] = compute_views(values, profiles, keep=keep).views

    def late_free(view: str) -> dict[str, list[dict[str, Any]]]:
        straddles = VIEWS[view].straddles_cutoff
        return {
            arch: (spanning[arch] if straddles and arch in spanning else views)[view]
            for arch, views in without_late.items()
        }

    tables = [
        reconcile(
            view,
            lam.rows[view],
            kap.rows[view],
            oracle.views[view],
            closed_before=closed_before,
            without_late=late_free(view),
            unsettled=unsettled,
        )
        for view in VIEW_NAMES
    ]
    sides = {"lambda": lam.rows, "kappa": kap.rows, "oracle": oracle.views}
    tables.append(cross_view(sides, closed_before=closed_before))
    return combine(tables)


def run_reconciliation(
    settings: Settings,
    run_name: str,
    *,
    spark: SparkSession | None = None,
    jvm_log: Path | None = None,
    echo: Echo = log.info,
) -> QualityResult | None:
    """The ``reconciliation`` suite on Lambda vs Kappa vs the oracle, over the windows both
    architectures have closed. None (with the reason echoed) when there is nothing to compare:
    one architecture has published nothing yet, or they serve different logic versions.

    Late ids and the profile history are read with Spark: pass a session, or one is started
    (and stopped) here, its JVM's output in `jvm_log` if given.
    """
    lam, kap = _served_all(settings, "lambda"), _served_all(settings, "kappa")
    reason = _not_comparable(lam, kap)
    if reason is not None:
        echo(f"reconciliation skipped: {reason}")
        return None
    assert lam is not None and kap is not None
    own = spark is None
    if spark is None:
        spark = build_spark_session(settings, "lk-dq-reconciliation", jvm_log)
    try:
        table = reconciliation_table(settings, spark, lam, kap)
    finally:
        if own:
            spark.stop()
    result = validate(
        suites.RECONCILIATION, table, settings=settings, layer=layers.COMPARISON, run_name=run_name
    )
    with connect(settings) as conn:
        records.record(conn, [result])
    return result


def _not_comparable(lam: Served | None, kap: Served | None) -> str | None:
    for name, side in (("lambda", lam), ("kappa", kap)):
        if side is None:
            return f"{name} has published no version yet"
        if side.closed_before_ms is None:
            return f"{name} has closed no window yet"
    assert lam is not None and kap is not None
    if lam.logic_version != kap.logic_version:
        return (
            f"lambda serves logic version {lam.logic_version}, kappa {kap.logic_version}: "
            "their answers differ by design"
        )
    return None
