"""The quality checks the pipelines, the DAGs and ``lk dq`` run against the stored views.

    gate_batch_version(settings, version, run_name)   # lambda_batch: before a version is ready
    gate_stream(settings, "kappa-v3", KAPPA_REPROCESS, run_name)   # a reprocess, before the switch

(What readers see, and Lambda vs Kappa vs the oracle, are checked by ``serving.quality``.)

Each check reads the serving store, runs the suites, and records every result's summary
(``core.store.quality_results``) for the serving API. A gate raises ``QualityGateError`` after
validating every view, so Data Docs shows all of a version's failures, not just the first.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import pandas as pd
from psycopg import sql

import core.store.quality_results as records
import quality.layers as layers
import quality.suites as suites
from core.catalog import VIEW_NAMES, VIEWS
from core.settings import Settings
from core.store.connection import connect
from core.store.schema import batch_table, realtime_table
from quality.result import QualityGateError, QualityResult
from quality.validation import validate

if TYPE_CHECKING:
    import psycopg


# --- reading the store ----------------------------------------------------------------------


def _rows(conn: psycopg.Connection, view: str, table: str, where: str, value: Any) -> pd.DataFrame:
    spec = VIEWS[view]
    statement = sql.SQL("select {columns} from {table} where {where} = %s").format(
        columns=sql.SQL(", ").join(sql.Identifier(c) for c in spec.columns),
        table=sql.Identifier(table),
        where=sql.Identifier(where),
    )
    rows = conn.execute(statement, (value,)).fetchall()
    return pd.DataFrame([tuple(r) for r in rows], columns=list(spec.columns))


def batch_version_rows(conn: psycopg.Connection, view: str, version: int) -> pd.DataFrame:
    """One batch version's rows of ``view``, published or not."""
    return _rows(conn, view, batch_table(view), "version", version)


def stream_rows(conn: psycopg.Connection, view: str, stream: str) -> pd.DataFrame:
    """One stream's real-time rows of ``view`` (``lambda-speed``, ``kappa-v3``, ...)."""
    return _rows(conn, view, realtime_table(view), "stream", stream)


# --- gates and validations ------------------------------------------------------------------


def validate_view_frames(
    family: str, frames: dict[str, pd.DataFrame], *, settings: Settings, layer: str, run_name: str
) -> list[QualityResult]:
    results = [
        validate(f"{family}.{view}", frame, settings=settings, layer=layer, run_name=run_name)
        for view, frame in frames.items()
    ]
    with connect(settings) as conn:
        records.record(conn, results)
    return results


def raise_on_failure(results: Iterable[QualityResult]) -> None:
    """``QualityGateError`` naming every failed suite, the first one's reasons in full."""
    failed = [r for r in results if not r.success]
    if failed:
        raise QualityGateError(*failed)


def gate_batch_version(settings: Settings, version: int, run_name: str) -> list[QualityResult]:
    """``batch_views.<view>`` on each view of a batch version; raises if one fails."""
    with connect(settings) as conn:
        frames = {view: batch_version_rows(conn, view, version) for view in VIEW_NAMES}
    results = validate_view_frames(
        suites.BATCH_VIEWS, frames, settings=settings, layer=layers.LAMBDA_BATCH, run_name=run_name
    )
    raise_on_failure(results)
    return results


def gate_stream(settings: Settings, stream: str, layer: str, run_name: str) -> list[QualityResult]:
    """``realtime_views.<view>`` on one stream's rows; raises if one fails."""
    with connect(settings) as conn:
        frames = {view: stream_rows(conn, view, stream) for view in VIEW_NAMES}
    results = validate_view_frames(
        suites.REALTIME_VIEWS, frames, settings=settings, layer=layer, run_name=run_name
    )
    raise_on_failure(results)
    return results
