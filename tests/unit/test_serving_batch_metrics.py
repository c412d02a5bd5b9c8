"""The batch and quality gauges read from the store (`serving.store_metrics`), rendered by the
serving API's metrics in one process and in multiprocess mode (`lk serve --workers`). The read
itself, against a real store, is tests/integration/test_serving_batch_metrics.py's."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from core.store import step_runs
from serving.metrics import MULTIPROC_ENV, ServingMetrics

ROWS = [
    ("step", "compute-views", None, 12.5, None),
    ("rows", "page_views", None, 42.0, None),
    ("published", None, None, 1_795_000_000.0, None),
    ("gate", "lambda-batch", "master_partition", 0.0, 3.0),
    ("kappa", "4", "building", 1_794_999_000.0, None),
]


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def _expected() -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    gate = frozenset({("layer", "lambda-batch"), ("suite", "master_partition")})
    return {
        ("lk_batch_run_duration_seconds", frozenset({("step", "compute-views")})): 12.5,
        ("lk_batch_view_rows", frozenset({("view", "page_views")})): 42.0,
        ("lk_batch_last_success_timestamp_seconds", frozenset()): 1_795_000_000.0,
        ("lk_quality_gate_success", gate): 0.0,
        ("lk_quality_gate_failed_expectations", gate): 3.0,
        (
            "lk_kappa_version_watermark_seconds",
            frozenset({("version", "4"), ("status", "building")}),
        ): 1_794_999_000.0,
    }


def test_what_the_store_read_is_rendered_with_the_serving_metrics() -> None:
    metrics = ServingMetrics()
    metrics.store.latest = step_runs.batch_metrics(ROWS)
    values = _samples(metrics.render().decode())
    assert _expected().items() <= values.items()


def test_multiprocess_mode_renders_the_store_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(MULTIPROC_ENV, str(tmp_path))
    metrics = ServingMetrics()
    metrics.store.latest = step_runs.batch_metrics(ROWS)
    text = metrics.render().decode()
    assert _expected().items() <= _samples(text).items()
    assert text.count("# TYPE lk_batch_view_rows gauge") == 1


def test_no_store_read_renders_no_batch_metric() -> None:
    metrics = ServingMetrics()
    assert "lk_batch_" not in metrics.render().decode()  # absent, not stale or zero
