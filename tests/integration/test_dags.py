"""Each DAG, run by `airflow dags test` (every task in one process, as Airflow runs them) on the
real test stack with the `local` backend: what each run leaves in the serving store, a
`lambda_batch` with nothing new to compute (an empty log, or nothing since the published
version) skipping rather than failing, and a corrupted raw partition stopping `lambda_batch`
at its gate with nothing published.

One small workload and one deployment (`both`) serve the module; the tests run in file order
and each leaves the deployment as the next expects it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from core import workload
from core.kafka_io import produce_file
from core.oracle import OracleResult, compute_views, load_jsonl_values, load_profiles_jsonl
from core.settings import Architecture, Settings
from core.store import versions
from core.store.connection import connect
from core.times import iso
from infra.airflow import config as airflow_config
from kappa.job import KAPPA, KappaViews
from serving.main import create_app
from tests.conftest import ROOT
from tests.integration.helpers import isolated_settings, settings_env
from tests.serving_pages import read_whole

LAMBDA = "lambda"
DAY_MS = 24 * 3_600_000


@pytest.fixture(scope="module")
def deployment(
    airflow_settings: Settings,
    airflow_env: dict[str, str],
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    settings = isolated_settings(airflow_settings, "dags").model_copy(
        update={"architecture": Architecture.BOTH}
    )
    folder = tmp_path_factory.mktemp("dags")
    events, profiles = folder / "events.jsonl", folder / "events.profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=33, events=400), events, profiles)
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, events, settings.events_topic)
    oracle = compute_views(load_jsonl_values(events), load_profiles_jsonl(profiles))
    env = {**os.environ, **airflow_env, **settings_env(settings)}
    yield {"settings": settings, "env": env, "oracle": oracle, "events": events}


def dags_test(
    deployment: dict[str, Any], dag_id: str, conf: dict[str, Any] | None = None
) -> tuple[subprocess.CompletedProcess[str], dict[str, str]]:
    """`airflow dags test DAG_ID` and the state of each task of the run it made."""
    airflow = Path(sys.executable).with_name("airflow")
    argv = [str(airflow), "dags", "test", dag_id]
    if conf is not None:
        argv += ["-c", json.dumps(conf)]
    done = subprocess.run(
        argv,
        cwd=ROOT,
        env=deployment["env"],
        capture_output=True,
        text=True,
        timeout=1200,
        check=False,
    )
    settings: Settings = deployment["settings"]
    url = airflow_config.database_url(settings).replace("+psycopg", "")
    with psycopg.connect(url) as conn:
        run = conn.execute(
            "select run_id from dag_run where dag_id = %s order by id desc limit 1", (dag_id,)
        ).fetchone()
        assert run is not None, done.stdout[-3000:] + done.stderr[-3000:]
        rows = conn.execute(
            "select task_id, state from task_instance where dag_id = %s and run_id = %s",
            (dag_id, run[0]),
        ).fetchall()
    return done, {task: str(state) for task, state in rows}


def _alias(settings: Settings, architecture: str) -> versions.Version | None:
    with connect(settings) as conn:
        return versions.current(conn, architecture)


def _served(settings: Settings, view: str) -> dict[str, Any]:
    with TestClient(create_app(settings)) as client:
        return read_whole(client.get, view, architecture=LAMBDA)


def _before(rows: list[dict[str, Any]], cutoff: str) -> list[dict[str, Any]]:
    return [row for row in rows if row["window_start"] < cutoff]


def _ok(done: subprocess.CompletedProcess[str], states: dict[str, str]) -> None:
    assert done.returncode == 0 and set(states.values()) == {"success"}, (
        f"{states}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )


def test_lambda_batch_publishes_a_checked_version(deployment: dict[str, Any]) -> None:
    settings: Settings = deployment["settings"]
    oracle: OracleResult = deployment["oracle"]
    done, states = dags_test(deployment, "lambda_batch")
    _ok(done, states)
    assert set(states) == {
        "close_archive",
        "validate_raw",
        "compute_views",
        "validate_views",
        "publish",
    }
    alias = _alias(settings, LAMBDA)
    assert alias is not None and alias.status == "published" and alias.cutoff is not None
    cutoff = iso(int(alias.cutoff.timestamp() * 1000))
    for view in ("page_views", "search_ctr", "revenue_by_segment"):
        expected = _before(oracle.views[view], cutoff)
        assert expected, view  # the workload spans hours on both sides of the cutoff
        assert _before(_served(settings, view)["rows"], cutoff) == expected, view
    deployment["lambda_version"] = alias.version


def test_lambda_batch_with_nothing_new_skips_and_keeps_the_published_version(
    deployment: dict[str, Any],
) -> None:
    """Nothing archived since the published version's snapshot, the same cutoff and logic: the
    run skips the recompute (no identical version), and the run is a success, not a failure."""
    settings: Settings = deployment["settings"]
    before = _alias(settings, LAMBDA)
    done, states = dags_test(deployment, "lambda_batch")
    _skipped_from_compute_views(done, states)
    assert f"nothing archived since batch version {deployment['lambda_version']}" in (
        done.stdout + done.stderr
    )
    assert _alias(settings, LAMBDA) == before
    assert _newest(settings) == deployment["lambda_version"]  # no version written at all


def test_lambda_batch_on_an_empty_log_skips_rather_than_fails(
    airflow_settings: Settings, airflow_env: dict[str, str]
) -> None:
    """A fresh install: the hourly run starts before anything was produced. The master dataset
    is empty, so there is nothing to compute: the run succeeds with the rest skipped."""
    settings = isolated_settings(airflow_settings, "dags-empty")
    empty = {"settings": settings, "env": {**os.environ, **airflow_env, **settings_env(settings)}}
    done, states = dags_test(empty, "lambda_batch")
    _skipped_from_compute_views(done, states)
    # The archive ran, so the master dataset exists, with no record: no valid event to cut at.
    assert "nothing new to compute: the master dataset holds no valid event" in done.stdout, (
        done.stdout[-4000:]
    )
    # A reprocess of it: no partition to validate again, nothing to compute.
    done, states = dags_test(empty, "lambda_reprocess", {"logic_version": "2"})
    assert done.returncode == 0, done.stdout[-4000:]
    assert states == {
        "validate_raw": "success",
        "compute_views": "skipped",
        "validate_views": "skipped",
        "publish": "skipped",
    }
    assert _alias(settings, LAMBDA) is None and _newest(settings) is None


def _skipped_from_compute_views(
    done: subprocess.CompletedProcess[str], states: dict[str, str]
) -> None:
    why = f"{states}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    assert done.returncode == 0, why
    assert states == {
        "close_archive": "success",
        "validate_raw": "success",
        "compute_views": "skipped",
        "validate_views": "skipped",
        "publish": "skipped",
    }, why


def _newest(settings: Settings) -> int | None:
    with connect(settings) as conn:
        row = conn.execute(
            "select max(version) from view_versions where architecture = %s", (LAMBDA,)
        ).fetchone()
    return None if row is None else row[0]


def test_lambda_reprocess_publishes_the_chosen_logic_up_to_until(
    deployment: dict[str, Any],
) -> None:
    settings: Settings = deployment["settings"]
    first = deployment["lambda_version"]
    with connect(settings) as conn:
        published = versions.get(conn, LAMBDA, first)
    assert published is not None and published.cutoff is not None
    # The workload lies within one day, whose end is past what the archive closes: the new
    # version's cutoff is capped at the scheduled one.
    day = published.cutoff.date().isoformat()
    done, states = dags_test(
        deployment, "lambda_reprocess", {"logic_version": "2", "since": day, "until": day}
    )
    _ok(done, states)
    alias = _alias(settings, LAMBDA)
    assert alias is not None and alias.version > first
    assert (alias.logic_version, alias.cutoff) == ("2", published.cutoff)
    served = _served(settings, "page_views")
    assert served["meta"]["view_version"] == alias.version


def test_kappa_reprocess_replays_checks_and_switches(
    deployment: dict[str, Any],
    spark,  # type: ignore[no-untyped-def]
) -> None:
    settings: Settings = deployment["settings"]
    assert KappaViews(spark, settings).drain().version == 1  # the live version, with rows
    done, states = dags_test(deployment, "kappa_reprocess", {"logic_version": "2"})
    _ok(done, states)
    alias = _alias(settings, KAPPA)
    assert alias is not None and (alias.version, alias.logic_version) == (2, "2")
    with connect(settings) as conn:
        old = versions.get(conn, KAPPA, 1)
        leftover = conn.execute(
            "select count(*) from stream_progress where stream = 'kappa-v1'"
        ).fetchone()
    assert old is not None and old.status == "retired"
    assert leftover == (0,)  # retired: its rows and progress are gone


def test_data_quality_runs_the_suites_and_publishes_data_docs(
    deployment: dict[str, Any],
) -> None:
    settings: Settings = deployment["settings"]
    done, states = dags_test(deployment, "data_quality")
    _ok(done, states)
    assert set(states) == {
        "realtime_lambda",
        "realtime_kappa",
        "reconciliation",
        "data_docs",
        "verdict",
    }
    from core.store import quality_results as records

    with connect(settings) as conn:
        docs = records.docs(conn)
    assert docs is not None
    assert httpx.get(docs[0], timeout=30).status_code == 200


def test_a_corrupted_raw_partition_stops_lambda_batch_at_the_gate(
    deployment: dict[str, Any], tmp_path: Path
) -> None:
    settings: Settings = deployment["settings"]
    before = _alias(settings, LAMBDA)
    newest = _newest(settings)
    # Valid for the parser (device_ts <= sent_ts): but sent 30 days after it happened, which
    # the raw suite refuses. It is archived after the published batch: the gate checks it.
    received = max(
        json.loads(line)["received_ts"]
        for line in deployment["events"].read_text().splitlines()
        if line.startswith("{")
    )
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text(
        json.dumps(
            {
                "event_id": "corrupt-1",
                "type": "page_view",
                "user_id": "u-corrupt",
                "page": "/corrupt",
                "device_ts": received - 30 * DAY_MS,
                "sent_ts": received,
                "received_ts": received,
            }
        )
        + "\n"
    )
    produce_file(settings, corrupt, settings.events_topic)

    done, states = dags_test(deployment, "lambda_batch")
    assert done.returncode != 0
    assert states["close_archive"] == "success"
    assert states["validate_raw"] == "failed", states
    for task in ("compute_views", "validate_views", "publish"):
        assert states[task] == "upstream_failed", states
    assert "7 days" in done.stdout + done.stderr  # the reason is in the task's log
    assert _newest(settings) == newest  # no version computed, let alone published
    assert _alias(settings, LAMBDA) == before
