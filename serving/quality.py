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
from core.kafka_io import log_event_values, log_profile_changes
from core.oracle import compute_views, keep_all_of, logic_filter
from core.settings import Architecture, Settings
from core.spark import build_spark_session
from core.store import quality_results as records
from core.store import state as stream_state
from core.store import versions
from core.store.connection import connect
from core.times import parse_iso
from quality.checks import validate_view_frames
from quality.reconciliation import combine, reconcile
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


def _served_all(settings: Settings, architecture: str) -> Served | None:
    with connect(settings) as conn:
        served = {view: _served(conn, view, architecture) for view in VIEW_NAMES}
        current = versions.current(conn, architecture)
    meta = served[VIEW_NAMES[0]][1]
    if current is None:
        return None
    watermark = None if meta.speed_watermark is None else parse_iso(meta.speed_watermark)
    closed = watermark
    if architecture == Architecture.LAMBDA and current.cutoff_ms is not None:
        # Windows before the cutoff are the batch's, final; after it the speed layer's.
        closed = max(current.cutoff_ms, watermark or 0)
    return Served(
        architecture=architecture,
        rows={view: rows for view, (rows, _meta) in served.items()},
        closed_before_ms=closed,
        logic_version=current.logic_version or DEFAULT_LOGIC_VERSION,
        stream=meta.stream,
    )


def _late_ids(settings: Settings, served: Served) -> set[str]:
    """The events the architecture's stream dropped as late (its audit table)."""
    if served.stream is None:
        return set()
    with connect(settings) as conn:
        return stream_state.late_event_ids(conn, served.stream)


def _not_in(late: set[str]) -> Callable[[Event], bool]:
    """A ``keep`` that drops the events whose ids are in `late`."""
    return lambda event: event.event_id not in late


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
    master dataset's profile history) disagree, with the cause."""
    assert lam.closed_before_ms is not None and kap.closed_before_ms is not None
    closed_before = min(lam.closed_before_ms, kap.closed_before_ms)
    values = log_event_values(settings)
    profiles = _profile_history(spark, settings)
    if profiles is None:
        profiles = log_profile_changes(settings)
    logic = logic_filter(lam.logic_version)
    oracle = compute_views(values, profiles, keep=logic)
    without_late = {}
    for side in (lam, kap):
        late = _late_ids(settings, side)
        if late:
            keep = keep_all_of(logic, _not_in(late))
            without_late[side.architecture] = compute_views(values, profiles, keep=keep).views
    tables = [
        reconcile(
            view,
            lam.rows[view],
            kap.rows[view],
            oracle.views[view],
            closed_before=closed_before,
            without_late={arch: views[view] for arch, views in without_late.items()},
        )
        for view in VIEW_NAMES
    ]
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
