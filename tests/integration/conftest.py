"""Airflow on the test stack: its own database in the stack's Postgres, migrated once per run.

`airflow_settings` is the stack's settings with a free port for Airflow's API server;
`airflow_env` is the environment every Airflow command of the run gets (AIRFLOW_HOME under the
test stack's folder, LocalExecutor, DAGs paused at creation so that no scheduled DAG starts on
its own during a test).
"""

from __future__ import annotations

import os
import socket

import pytest

from core.settings import Settings


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="session")
def airflow_settings(stack: Settings) -> Settings:
    return stack.model_copy(update={"airflow_port": _free_port()})


@pytest.fixture(scope="session")
def airflow_env(airflow_settings: Settings) -> dict[str, str]:
    from infra.airflow import config, service

    env = config.airflow_env(airflow_settings, paused=True)
    service.create_database(airflow_settings)
    service.migrate({**os.environ, **env})
    return env
