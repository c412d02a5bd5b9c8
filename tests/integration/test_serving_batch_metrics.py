"""The serving API's `/metrics` exports what the batch steps and quality gates recorded in the
store (`serving.store_metrics`): steps are processes or pods that end, the API stays up.

A database of its own, written through the store's own functions as the steps write it: a
published Lambda batch version with its rows per view, each step's last run (`lk step` itself),
a failed and a passed gate, and a Kappa version being replayed.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

import pytest
from fastapi.testclient import TestClient

from core.settings import Settings
from core.store import quality_results, step_runs, versions
from core.store.connection import connect, ensure_reader
from core.store.streams import kappa_stream
from serving.main import create_app
from tests.conftest import run_lk
from tests.integration.helpers import own_database, settings_env

CUTOFF = datetime(2026, 11, 1, 10, tzinfo=UTC)
REPLAY_WATERMARK = datetime(2026, 11, 1, 9, 30, tzinfo=UTC)


@dataclass(frozen=True)
class Gate:
    layer: str
    suite: str
    run_name: str
    success: bool
    rows: int | None
    evaluated: int
    failed: int
    failures: tuple[str, ...]
    seconds: float


@pytest.fixture(scope="module")
def recorded(stack: Settings) -> Iterator[Settings]:
    with own_database(stack, "batch_metrics") as settings:
        ensure_reader(settings)
        with connect(settings) as conn:
            version = versions.begin_version(conn, "lambda", cutoff=CUTOFF)
            versions.mark(conn, "lambda", version, "ready", row_counts={"page_views": 42})
            with conn.transaction():
                found = versions.get(conn, "lambda", version)
                assert found is not None
                versions.switch_alias(conn, found)
            quality_results.record(
                conn,
                [
                    Gate("lambda-batch", "master_partition", "r1", True, 9, 12, 0, (), 1.0),
                    Gate("lambda-batch", "batch_views.page_views", "r1", True, 4, 5, 0, (), 0.1),
                    # The latest result of a suite counts: this one failed after a pass.
                    Gate("lambda-batch", "batch_views.page_views", "r2", False, 4, 5, 2, (), 0.1),
                ],
            )
            step_runs.record(conn, "compute-views", 12.5, success=True)
            replay = versions.begin_version(conn, "kappa", cutoff=None, logic_version="2")
            conn.execute(
                "insert into stream_progress (stream, watermark) values (%s, %s)",
                (kappa_stream(replay), REPLAY_WATERMARK),
            )
        yield settings


def _samples(text: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    from prometheus_client.parser import text_string_to_metric_families

    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def _metrics(settings: Settings) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    with TestClient(create_app(settings)) as client:
        response = client.get("/metrics")
    assert response.status_code == 200
    return _samples(response.text)


def test_a_published_batch_and_its_gates_appear_in_metrics(recorded: Settings) -> None:
    values = _metrics(recorded)

    def value(name: str, **labels: str) -> float:
        return values[(name, frozenset(labels.items()))]

    assert value("lk_batch_view_rows", view="page_views") == 42
    assert value("lk_batch_run_duration_seconds", step="compute-views") == 12.5
    published = value("lk_batch_last_success_timestamp_seconds")
    assert abs(published - datetime.now(UTC).timestamp()) < 600
    gate = {"layer": "lambda-batch", "suite": "batch_views.page_views"}
    assert value("lk_quality_gate_success", **gate) == 0  # the latest result, not the first
    assert value("lk_quality_gate_failed_expectations", **gate) == 2
    partition = {"layer": "lambda-batch", "suite": "master_partition"}
    assert value("lk_quality_gate_success", **partition) == 1
    assert value("lk_quality_gate_failed_expectations", **partition) == 0
    [version] = [
        dict(labels)["version"]
        for name, labels in values
        if name == "lk_kappa_version_watermark_seconds" and dict(labels)["status"] == "building"
    ]
    assert int(version) >= 1
    assert (
        value("lk_kappa_version_watermark_seconds", version=version, status="building")
        == REPLAY_WATERMARK.timestamp()
    )


def test_a_step_run_by_lk_step_records_its_duration(recorded: Settings) -> None:
    """`lk step` (what a step pod runs) ends; its run stays in the store for the scrape."""
    result = run_lk("step", "kappa-check", "version=999", env=settings_env(recorded))
    assert result.returncode != 0  # no such version: a failed run is recorded too
    with connect(recorded) as conn:
        row = conn.execute(
            "select seconds, success from step_runs where step = 'kappa-check'"
        ).fetchone()
    assert row is not None and row[0] > 0 and row[1] is False
    assert ("lk_batch_run_duration_seconds", frozenset({("step", "kappa-check")})) in _metrics(
        recorded
    )
