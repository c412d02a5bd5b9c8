"""Airflow 3's REST API as the admin user, and its UI's Trigger button, for the tests that run
a DAG end to end (the local Airflow of `make airflow-up`, or the chart's on a real cluster).

The API: a JWT from `POST /auth/token`, then `/api/v2/...` with it. The UI is driven in
Debian's Chromium through Playwright (`tests.browser`: never a downloaded browser).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from tests.browser import chromium


class AirflowApi:
    """The REST API of one Airflow, as `username`."""

    def __init__(self, base: str, username: str, password: str) -> None:
        self.base = base
        self.username, self.password = username, password
        token = httpx.post(
            f"{base}/auth/token", json={"username": username, "password": password}, timeout=30
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

    def wait_for_dag(self, dag_id: str, timeout_s: float = 180) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.client.get(f"/dags/{dag_id}").status_code == 200:
                return
            time.sleep(2)
        errors = self.get("/importErrors")
        raise AssertionError(f"{dag_id} not parsed in {timeout_s}s; import errors: {errors}")

    def unpause(self, dag_id: str) -> None:
        self.client.patch(f"/dags/{dag_id}", json={"is_paused": False}).raise_for_status()

    def trigger(self, dag_id: str, conf: dict[str, Any] | None = None) -> str:
        response = self.client.post(
            f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": conf or {}}
        )
        assert response.status_code == 200, response.text
        return str(response.json()["dag_run_id"])

    def runs(self, dag_id: str) -> list[dict[str, Any]]:
        return list(self.get(f"/dags/{dag_id}/dagRuns", order_by="run_after")["dag_runs"])

    def wait_for_run(self, dag_id: str, run_id: str, timeout_s: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            run = self.get(f"/dags/{dag_id}/dagRuns/{run_id}")
            if run["state"] in ("success", "failed"):
                return dict(run)
            time.sleep(3)
        states = self.task_states(dag_id, run_id)
        raise AssertionError(f"{dag_id} {run_id} not finished in {timeout_s}s: {states}")

    def task_states(self, dag_id: str, run_id: str) -> dict[str, str]:
        found = self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances")
        return {t["task_id"]: t["state"] for t in found["task_instances"]}

    def task_instance(self, dag_id: str, run_id: str, task_id: str) -> dict[str, Any]:
        return dict(self.get(f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}"))

    def task_log_entries(
        self, dag_id: str, run_id: str, task_id: str, try_number: int
    ) -> list[dict[str, Any]]:
        """A task try's whole log as Airflow's API serves it (from the remote log store once the
        process that ran the task is gone): its structured entries (`event`, `level`, ...)."""
        found = self.get(
            f"/dags/{dag_id}/dagRuns/{run_id}/taskInstances/{task_id}/logs/{try_number}",
            full_content="true",
        )
        content = found.get("content", [])
        if isinstance(content, str):
            return [{"event": line} for line in content.splitlines()]
        return [e if isinstance(e, dict) else {"event": str(e)} for e in content]

    def task_log(self, dag_id: str, run_id: str, task_id: str, try_number: int) -> str:
        """The same log, one line per entry."""
        entries = self.task_log_entries(dag_id, run_id, task_id, try_number)
        return "\n".join(str(entry.get("event", "")) for entry in entries)

    def click_trigger(
        self, dag_id: str, *, expect_form_text: tuple[str, ...] = (), screenshot: Path | None = None
    ) -> dict[str, Any]:
        """Sign in to the UI, open `dag_id`, click Trigger with the form's defaults; the run."""
        before = {run["dag_run_id"] for run in self.runs(dag_id)}
        with chromium() as browser:
            page = browser.new_page(viewport={"width": 1400, "height": 900})
            page.goto(f"{self.base}/dags/{dag_id}")
            page.get_by_label("Username").fill(self.username)
            page.get_by_label("Password").fill(self.password)
            page.get_by_role("button", name="Sign in").click()
            page.get_by_role("button", name="Trigger Dag").click()
            dialog = page.get_by_role("dialog")
            for text in expect_form_text:
                dialog.get_by_text(text).wait_for()
            if screenshot is not None:
                page.screenshot(path=str(screenshot))
            dialog.get_by_role("button", name="Trigger").click()
            # The UI may stack two copies of the toast; either one is the confirmation.
            page.get_by_text("Dag Run Triggered").first.wait_for()
        new = [run for run in self.runs(dag_id) if run["dag_run_id"] not in before]
        assert len(new) == 1, new
        assert new[0]["triggered_by"] == "ui"
        return new[0]
