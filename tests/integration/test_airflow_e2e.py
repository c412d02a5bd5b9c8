"""Airflow itself, end to end: the project's local Airflow (`make airflow-up`: api-server,
scheduler, dag-processor, LocalExecutor) on the test stack runs `kappa_reprocess`, triggered
through the REST API with a logic version as the README shows, which moves the serving alias to
the version it built; its task logs are on MinIO. A person clicking Trigger in the UI (headless
Chromium) is the cluster's test (tests/k8s: the same DAG, the chart's Airflow).

Airflow 3's REST API: a JWT from `POST /auth/token`, then `/api/v2/...` with it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Iterator

import pytest

from core import workload
from core.kafka_io import produce_file
from core.provision import s3_client
from core.settings import Architecture, Settings
from core.store import versions
from core.store.connection import connect
from infra.airflow import config as airflow_config
from infra.airflow import service as airflow_service
from kappa.job import KAPPA, KappaViews
from tests.airflow_api import AirflowApi
from tests.integration.helpers import isolated_settings, settings_env

DAG_ID = "kappa_reprocess"
RUN_TIMEOUT_S = 900
LOG_UPLOAD_S = 60


@pytest.fixture(scope="module")
def deployment(
    airflow_settings: Settings,
    airflow_env: dict[str, str],
    spark,  # type: ignore[no-untyped-def]
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Settings, AirflowApi]]:
    """A Kappa deployment serving version 1 of a small workload, and Airflow running on it."""
    settings = isolated_settings(airflow_settings, "airflow").model_copy(
        update={"architecture": Architecture.KAPPA}
    )
    folder = tmp_path_factory.mktemp("airflow-e2e")
    events, profiles = folder / "events.jsonl", folder / "events.profiles.jsonl"
    workload.generate(workload.WorkloadSpec(seed=71, events=300), events, profiles)
    produce_file(settings, profiles, settings.profiles_topic)
    produce_file(settings, events, settings.events_topic)
    assert KappaViews(spark, settings).drain().version == 1

    # Tasks read the deployment's LK_* settings from the environment Airflow runs with.
    env = {**settings_env(settings), "LK_CACHE_DIR": os.environ.get("LK_CACHE_DIR", "")}
    env = {k: v for k, v in env.items() if v}
    try:
        airflow_service.up(settings, progress=lambda _: None, extra_env=env, paused=True)
        api = AirflowApi(
            airflow_config.api_url(settings),
            airflow_config.ADMIN_USER,
            airflow_config.ADMIN_PASSWORD,
        )
        api.wait_for_dag(DAG_ID, timeout_s=120)
        # Paused at creation (nothing scheduled runs behind the test's back): unpause this one.
        api.unpause(DAG_ID)
        yield settings, api
    finally:
        airflow_service.down(settings, progress=lambda _: None)


def _alias(settings: Settings) -> versions.Version:
    with connect(settings) as conn:
        current = versions.current(conn, KAPPA)
    assert current is not None
    return current


def _check_run(api: AirflowApi, settings: Settings, run_id: str, version: int, logic: str) -> None:
    run = api.wait_for_run(DAG_ID, run_id, RUN_TIMEOUT_S)
    states = api.task_states(DAG_ID, run_id)
    assert run["state"] == "success", states
    assert set(states.values()) == {"success"}, states
    alias = _alias(settings)
    assert (alias.version, alias.logic_version, alias.status) == (version, logic, "published")
    with connect(settings) as conn:
        retired = versions.get(conn, KAPPA, version - 1)
    assert retired is not None and retired.status == "retired"


def test_a_run_triggered_through_the_rest_api_moves_the_alias(
    deployment: tuple[Settings, AirflowApi],
) -> None:
    settings, api = deployment
    assert _alias(settings).version == 1
    run_id = api.trigger(DAG_ID, {"logic_version": "2"})
    _check_run(api, settings, run_id, version=2, logic="2")


def test_task_logs_are_on_minio_and_read_back_after_the_local_files_are_gone(
    deployment: tuple[Settings, AirflowApi],
) -> None:
    """Remote logging (infra/airflow/config.py, as the chart sets it): each task try's log is an
    object under the logs folder, and the API still serves it once the local file is deleted
    (what a restarted scheduler pod has lost)."""
    settings, api = deployment
    run_id = next(r["dag_run_id"] for r in api.runs(DAG_ID) if r["state"] == "success")
    ran = {t for t, state in api.task_states(DAG_ID, run_id).items() if state == "success"}
    s3 = s3_client(settings)
    prefix = f"{airflow_config.LOGS_FOLDER}/dag_id={DAG_ID}/run_id={run_id}/"

    def uploaded() -> tuple[list[str], set[str]]:
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=settings.logs_bucket, Prefix=prefix
        )
        keys = [item["Key"] for page in pages for item in page.get("Contents", [])]
        return keys, {
            key.removeprefix(prefix).split("/")[0].removeprefix("task_id=") for key in keys
        }

    # The task runner uploads a try's log once the try has reported its state: the last task's
    # log may land a moment after the run shows success.
    deadline = time.monotonic() + LOG_UPLOAD_S
    keys, logged = uploaded()
    while not (ran <= logged) and time.monotonic() < deadline:
        time.sleep(1)
        keys, logged = uploaded()
    assert ran and ran <= logged, (ran, keys)

    task_id = sorted(ran)[0]
    [key] = [k for k in keys if k.startswith(f"{prefix}task_id={task_id}/")]
    stored = s3.get_object(Bucket=settings.logs_bucket, Key=key)["Body"].read().decode()
    assert stored.strip()
    local = airflow_config.airflow_home(settings) / "logs" / f"dag_id={DAG_ID}" / f"run_id={run_id}"
    shutil.rmtree(local, ignore_errors=True)
    served = api.task_log(DAG_ID, run_id, task_id, 1)
    # Airflow 3 stores structured lines (JSON); the API serves their events.
    events = [json.loads(line).get("event") for line in stored.splitlines() if line[:1] == "{"]
    assert any(event and event in served for event in events), (stored[:500], served[:500])
