"""Airflow itself, end to end: the project's local Airflow (api-server, scheduler, dag-processor,
LocalExecutor) on the test stack runs `kappa_reprocess`, triggered once through the REST API
and once by a person clicking Trigger in the UI (headless Chromium), and each run moves the
serving alias to the version it built.

Airflow 3's REST API: a JWT from `POST /auth/token`, then `/api/v2/...` with it.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from core import workload
from core.kafka_io import produce_file
from core.settings import Architecture, Settings
from core.store import versions
from core.store.connection import connect
from infra.airflow import config as airflow_config
from infra.airflow import service as airflow_service
from speed_layer.kappa import KAPPA, KappaViews
from tests.integration.helpers import isolated_settings, settings_env

DAG_ID = "kappa_reprocess"
RUN_TIMEOUT_S = 900
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


class Api:
    """The REST API as the admin user."""

    def __init__(self, base: str) -> None:
        token = httpx.post(
            f"{base}/auth/token",
            json={
                "username": airflow_config.ADMIN_USER,
                "password": airflow_config.ADMIN_PASSWORD,
            },
            timeout=30,
        )
        assert token.status_code in (200, 201), token.text
        self.client = httpx.Client(
            base_url=f"{base}/api/v2",
            headers={"Authorization": f"Bearer {token.json()['access_token']}"},
            timeout=30,
        )

    def get(self, path: str, **params: Any) -> Any:
        response = self.client.get(path, params=params)
        response.raise_for_status()
        return response.json()

    def runs(self) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{DAG_ID}/dagRuns", order_by="run_after")["dag_runs"])

    def wait_for_run(self, run_id: str) -> dict[str, Any]:
        deadline = time.monotonic() + RUN_TIMEOUT_S
        while time.monotonic() < deadline:
            run = self.get(f"/dags/{DAG_ID}/dagRuns/{run_id}")
            if run["state"] in ("success", "failed"):
                return dict(run)
            time.sleep(3)
        raise AssertionError(f"{run_id} not finished in {RUN_TIMEOUT_S}s")

    def task_states(self, run_id: str) -> dict[str, str]:
        found = self.get(f"/dags/{DAG_ID}/dagRuns/{run_id}/taskInstances")
        return {t["task_id"]: t["state"] for t in found["task_instances"]}


@pytest.fixture(scope="module")
def deployment(
    airflow_settings: Settings,
    airflow_env: dict[str, str],
    spark,  # type: ignore[no-untyped-def]
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Settings, Api]]:
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
        api = Api(airflow_config.api_url(settings))
        _wait_for_dag(api)
        # Paused at creation (nothing scheduled runs behind the test's back): unpause this one.
        api.client.patch(f"/dags/{DAG_ID}", json={"is_paused": False}).raise_for_status()
        yield settings, api
    finally:
        airflow_service.down(settings, progress=lambda _: None)


def _wait_for_dag(api: Api, timeout_s: float = 120) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if api.client.get(f"/dags/{DAG_ID}").status_code == 200:
            return
        time.sleep(1)
    errors = api.get("/importErrors")
    raise AssertionError(f"{DAG_ID} not parsed in {timeout_s}s; import errors: {errors}")


def _alias(settings: Settings) -> versions.Version:
    with connect(settings) as conn:
        current = versions.current(conn, KAPPA)
    assert current is not None
    return current


def _check_run(api: Api, settings: Settings, run_id: str, version: int, logic: str) -> None:
    run = api.wait_for_run(run_id)
    states = api.task_states(run_id)
    assert run["state"] == "success", states
    assert set(states.values()) == {"success"}, states
    alias = _alias(settings)
    assert (alias.version, alias.logic_version, alias.status) == (version, logic, "published")
    with connect(settings) as conn:
        retired = versions.get(conn, KAPPA, version - 1)
    assert retired is not None and retired.status == "retired"


def test_a_run_triggered_through_the_rest_api_moves_the_alias(
    deployment: tuple[Settings, Api],
) -> None:
    settings, api = deployment
    assert _alias(settings).version == 1
    response = api.client.post(
        f"/dags/{DAG_ID}/dagRuns", json={"logical_date": None, "conf": {"logic_version": "2"}}
    )
    assert response.status_code == 200, response.text
    _check_run(api, settings, response.json()["dag_run_id"], version=2, logic="2")


def test_a_run_triggered_by_clicking_trigger_in_the_ui_moves_the_alias(
    deployment: tuple[Settings, Api], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    settings, api = deployment
    assert Path(CHROMIUM).exists(), "the UI test drives Debian's chromium: apt-get install chromium"
    before = {run["dag_run_id"] for run in api.runs()}
    base = airflow_config.api_url(settings)
    with sync_playwright() as playwright:
        # Debian's chromium, never a downloaded browser; --no-sandbox as CI runs as root.
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, headless=True, args=["--no-sandbox"]
        )
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{base}/dags/{DAG_ID}")
            page.get_by_label("Username").fill(airflow_config.ADMIN_USER)
            page.get_by_label("Password").fill(airflow_config.ADMIN_PASSWORD)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("button", name="Trigger Dag").click()
            dialog = page.get_by_role("dialog")
            # The trigger form explains the param: its title, choices and description.
            dialog.get_by_text("Logic version").wait_for()
            dialog.get_by_text("The view logic the new Kappa version computes").wait_for()
            page.screenshot(path=str(tmp_path / "trigger-form.png"))
            dialog.get_by_role("button", name="Trigger").click()
            page.get_by_text("Dag Run Triggered").wait_for()
        finally:
            browser.close()
    new = [run for run in api.runs() if run["dag_run_id"] not in before]
    assert len(new) == 1, new
    assert new[0]["triggered_by"] == "ui"
    assert new[0]["conf"] == {"logic_version": "1"}  # the form's default
    _check_run(api, settings, new[0]["dag_run_id"], version=3, logic="1")
