"""Start and stop the local Airflow: api-server, scheduler and dag-processor, by PID.

    python -m infra.airflow up      # or: make airflow-up
    python -m infra.airflow down    # or: make airflow-down

`up` creates the `airflow` database in the stack's Postgres (the stack must be up), migrates it,
then starts each component in its own process group, remembered by a PID file under the stack
folder; `down` stops exactly those groups (LocalExecutor task processes included).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass

import httpx
import psycopg

from core.settings import Settings
from infra.airflow.config import AIRFLOW_DB, airflow_bin, airflow_env, airflow_home, api_url
from infra.stack.process import ManagedProcess, StackError, port_open, wait_until

COMPONENTS = ("api-server", "scheduler", "dag-processor")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class AirflowStatus:
    component: str
    pid: int | None


def _process(settings: Settings, component: str) -> ManagedProcess:
    home = airflow_home(settings)
    return ManagedProcess(f"airflow-{component}", home / "run", home / "logs")


def create_database(settings: Settings) -> None:
    """The metadata database beside the serving one (idempotent)."""
    admin_dsn = settings.postgres_dsn.rsplit("/", 1)[0] + "/postgres"
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        found = conn.execute("select 1 from pg_database where datname = %s", (AIRFLOW_DB,))
        if found.fetchone() is None:
            conn.execute(f'create database "{AIRFLOW_DB}"')


def migrate(env: Mapping[str, str], timeout_s: float = 600) -> None:
    result = subprocess.run(
        [str(airflow_bin()), "db", "migrate"],
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    if result.returncode != 0:
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise StackError(f"airflow db migrate failed: {tail}")


def healthy(settings: Settings) -> bool:
    """The API server answers and reports a running scheduler and dag processor."""
    response = httpx.get(f"{api_url(settings)}/api/v2/monitor/health", timeout=5)
    if response.status_code != 200:
        return False
    body = response.json()
    return all(
        body.get(part, {}).get("status") == "healthy"
        for part in ("metadatabase", "scheduler", "dag_processor")
    )


def up(
    settings: Settings,
    progress: Progress = print,
    extra_env: Mapping[str, str] | None = None,
    *,
    paused: bool = False,
    timeout_s: float = 180,
) -> dict[str, str]:
    """Start what is not running yet; returns the environment Airflow runs with."""
    env = {**os.environ, **airflow_env(settings, paused=paused), **(extra_env or {})}
    running = [c for c in COMPONENTS if _process(settings, c).pid() is not None]
    if len(running) < len(COMPONENTS):
        if "api-server" not in running and port_open(settings.host, settings.airflow_port):
            raise StackError(
                f"airflow: port {settings.airflow_port} is in use by a process this project did "
                "not start; stop it or set LK_AIRFLOW_PORT"
            )
        progress("airflow: creating and migrating its database ...")
        create_database(settings)
        migrate(env)
    for component in COMPONENTS:
        process = _process(settings, component)
        if process.pid() is None:
            process.start([str(airflow_bin()), component], env=env)
            progress(f"airflow: {component} started (log {process.log_file})")
    if not wait_until(lambda: healthy(settings), timeout_s, interval_s=1.0):
        tails = "; ".join(
            f"{c}: {_process(settings, c).log_tail(2) or 'no output'}" for c in COMPONENTS
        )
        raise StackError(f"airflow did not become healthy in {timeout_s:.0f}s ({tails})")
    progress(f"airflow: ready at {api_url(settings)} (user admin, password admin)")
    return env


def down(settings: Settings, progress: Progress = print) -> None:
    # The scheduler first: it owns the task processes (its process group goes with it).
    for component in ("scheduler", "dag-processor", "api-server"):
        stopped = _process(settings, component).stop(timeout_s=30)
        progress(f"airflow: {component} {'stopped' if stopped else 'was not running'}")


def status(settings: Settings) -> list[AirflowStatus]:
    return [AirflowStatus(c, _process(settings, c).pid()) for c in COMPONENTS]
