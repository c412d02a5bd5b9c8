"""Validate a frame with a suite, record the result, and stop a pipeline on failure.

    from quality import gate, validate
    result = validate("raw_events", events, settings=settings, layer="lambda-batch",
                      run_name=run_id)
    gate("batch_views.search_ctr", view_df, settings=settings, layer="lambda-batch",
         run_name=run_id)                              # raises QualityGateError on failure

Event frames (``raw_events``, ``master_partition``) are Spark DataFrames and stay in Spark:
the frame is narrowed to the checked columns and cached for the duration of the validation
(every expectation then reads memory, not the source). View frames may be pandas, a small
Spark frame (collected) or rows (dicts); the ``reconciliation`` frame is
``quality.reconciliation.reconcile``'s table.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import quality.context as ctx
import quality.prepare as prepare
import quality.result_store as result_store
import quality.suites as suites
from core.settings import Settings
from quality.reconciliation import notes as reconciliation_notes
from quality.result import QualityGateError, QualityResult, summarize

QUICK: dict[str, Any] = {"result_format": "BOOLEAN_ONLY"}
"""First pass on Spark: pass/fail only. With any other format GX runs, per expectation, one
more Spark job that fetches example values (a full scan when nothing is wrong); a validation
of six rows then takes seconds."""
DETAILED: dict[str, Any] = {"result_format": "BASIC", "partial_unexpected_count": 20}
"""Counts and up to 20 unexpected values per expectation: for views, and on Spark for a second
pass when the first failed (stored under the same run id, so it replaces the first pass's)."""


@contextmanager
def _cached(source: Any, prepared: Any) -> Iterator[Any]:
    """The frame to validate, cached for the block: every expectation's Spark job then reads
    memory instead of recomputing the source. When the caller already cached the source, the
    derived columns are cheap to recompute and nothing more is cached."""
    if source.is_cached:
        yield prepared
        return
    cached = prepared.persist()
    try:
        yield cached
    finally:
        cached.unpersist()


def _prepared(kind: str, df: Any) -> Any:
    if kind in (suites.RAW_EVENTS, suites.MASTER_PARTITION):
        if not hasattr(df, "sparkSession"):
            raise TypeError(f"suite {kind} validates a Spark DataFrame, got {type(df).__name__}")
        return prepare.events(df, partitioned=kind == suites.MASTER_PARTITION)
    view = suites.view_of(kind)
    if view is not None:
        return prepare.view(view, df)
    return prepare.reconciliation(df)


def _run_spark(definition: Any, frame: Any, run_id: Any) -> tuple[Any, int]:
    """Validate quickly, again in detail on failure (see ``QUICK``); with the row count."""
    rows = frame.count()  # also fills the cache, before GX's jobs read it
    batch = {"dataframe": frame}
    result = definition.run(batch_parameters=batch, result_format=QUICK, run_id=run_id)
    if not result.success:
        result = definition.run(batch_parameters=batch, result_format=DETAILED, run_id=run_id)
    return result, rows


def validate(kind: str, df: Any, *, settings: Settings, layer: str, run_name: str) -> QualityResult:
    """Run suite ``kind`` on ``df``, store the result for Data Docs (in the local project and,
    with ``dq_share_results``, in the object store: ``quality.result_store``), and return it.

    ``layer`` names where the data comes from (e.g. ``lambda-batch``, ``lambda-speed``,
    ``kappa``, ``comparison``); ``run_name`` groups one pipeline run's validations (an Airflow
    run id is fine: unsafe characters are replaced).
    """
    started = time.monotonic()  # the first call's import of Great Expectations counts too
    import great_expectations as gx

    suites.check_kind(kind)
    ctx.check_name("layer", layer)
    run = ctx.safe_run_name(run_name)
    prepared = _prepared(kind, df)
    notes = reconciliation_notes(prepared) if kind == suites.RECONCILIATION else None
    store = ctx.validations_dir(settings)
    with ctx.project_lock(settings):
        before = result_store.snapshot(store)
        definition = ctx.validation_definition(settings, kind, layer, notes=notes)
        run_id = gx.RunIdentifier(run_name=run)
        rows: int | None = None
        if suites.engine(kind) == "spark":
            with _cached(df, prepared) as frame:
                gx_result, rows = _run_spark(definition, frame, run_id)
        else:
            gx_result = definition.run(
                batch_parameters={"dataframe": prepared}, result_format=DETAILED, run_id=run_id
            )
            rows = len(prepared)
        written = result_store.written_since(store, before)  # under the lock: ours only
    if settings.dq_share_results:
        # Where `dq-docs` reads every process's results: this one may be a pod that ends.
        result_store.upload(settings, written)
    return summarize(
        gx_result,
        suite=kind,
        layer=layer,
        run_name=run,
        rows=rows,
        seconds=time.monotonic() - started,
    )


def gate(kind: str, df: Any, *, settings: Settings, layer: str, run_name: str) -> QualityResult:
    """``validate``, raising ``QualityGateError`` (with the one-line reasons) on failure."""
    result = validate(kind, df, settings=settings, layer=layer, run_name=run_name)
    if not result.success:
        raise QualityGateError(result)
    return result
