"""Airflow's configuration for the local stack, as environment variables (nothing in a file but
the admin's password and the signing keys, kept under the stack folder).

Two cores: LocalExecutor with two task slots, one API-server worker, one parsing process, no
example DAGs (`airflow standalone` would start 32 workers). The metadata database is `airflow`
in the stack's Postgres; the DAGs folder is this project's `dags/`, with the DAGs of both
architectures unless `LK_ARCHITECTURE` says otherwise. Task logs go to the stack's MinIO
(`s3://lk-logs/airflow-logs/`), as on the cluster.
"""

from __future__ import annotations

import json
import secrets
import sys
from pathlib import Path
from typing import Final

from core.settings import Architecture, Settings

ROOT: Final = Path(__file__).resolve().parents[2]
DAGS_FOLDER: Final = ROOT / "dags"
ADMIN_USER: Final = "admin"
ADMIN_PASSWORD: Final = "admin"  # noqa: S105 - a local development default, like MinIO's
AIRFLOW_DB: Final = "airflow"
LOGS_FOLDER: Final = "airflow-logs"
"""Task logs' folder in the logs bucket (the chart's `airflow.remoteLogging.folder`)."""
LOGS_CONN_ID: Final = "lk_logs"
SIMPLE_AUTH_MANAGER: Final = (
    "airflow.api_fastapi.auth.managers.simple.simple_auth_manager.SimpleAuthManager"
)


def airflow_home(settings: Settings) -> Path:
    return settings.stack_path / "airflow"


def airflow_bin() -> Path:
    """The `airflow` command of this environment."""
    return Path(sys.executable).with_name("airflow")


def api_url(settings: Settings) -> str:
    return f"http://{settings.host}:{settings.airflow_port}"


def database_url(settings: Settings) -> str:
    host = settings.postgres_host or settings.host
    return (
        f"postgresql+psycopg://{settings.postgres_user}:{settings.postgres_password}"
        f"@{host}:{settings.postgres_port}/{AIRFLOW_DB}"
    )


def _secret(home: Path, name: str) -> str:
    """A random key made once and kept: every component signs and checks with the same one."""
    path = home / f".{name}"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(32))
        path.chmod(0o600)
    return path.read_text().strip()


def prepare_home(settings: Settings) -> Path:
    """AIRFLOW_HOME with the admin's password file (the simple auth manager reads it)."""
    home = airflow_home(settings)
    home.mkdir(parents=True, exist_ok=True)
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({ADMIN_USER: ADMIN_PASSWORD}))
    passwords.chmod(0o600)
    return home


def dags_architecture(settings: Settings) -> Architecture:
    """Whose DAGs the local Airflow loads: both architectures' (so that `kappa_reprocess` can be
    tried beside Lambda's), unless `LK_ARCHITECTURE` is set."""
    explicit = "architecture" in settings.model_fields_set
    return settings.architecture if explicit else Architecture.BOTH


def airflow_env(settings: Settings, *, paused: bool = False) -> dict[str, str]:
    """The environment of every Airflow process (and so of the tasks, which read LK_* too)."""
    home = prepare_home(settings)
    url = api_url(settings)
    db = database_url(settings)
    return {
        # The DAG files and their tasks read the settings from the environment.
        "LK_ARCHITECTURE": dags_architecture(settings).value,
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        "AIRFLOW__CORE__EXECUTOR": "LocalExecutor",
        "AIRFLOW__CORE__PARALLELISM": "2",
        "AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION": str(paused),
        "AIRFLOW__CORE__AUTH_MANAGER": SIMPLE_AUTH_MANAGER,
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{ADMIN_USER}:admin",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(home / "passwords.json"),
        # Tasks run by the LocalExecutor report to the API server's execution API.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"{url}/execution/",
        "AIRFLOW__API_AUTH__JWT_SECRET": _secret(home, "jwt-secret"),
        "AIRFLOW__API__SECRET_KEY": _secret(home, "api-secret-key"),
        "AIRFLOW__API__HOST": settings.host,
        "AIRFLOW__API__PORT": str(settings.airflow_port),
        "AIRFLOW__API__BASE_URL": url,
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
        # Task logs are served by the scheduler's log server; keep it on loopback too.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(settings.airflow_port + 1),
        # psycopg 3 (the project's driver) for both; Airflow would derive asyncpg otherwise.
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": db,
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC": db,
        **remote_logging_env(settings),
    }


def logs_folder(settings: Settings) -> str:
    """Where task logs go: the chart's default (`airflow.remoteLogging.folder`) on the stack's
    MinIO, so that the local and the cluster paths agree."""
    return f"s3://{settings.logs_bucket}/{LOGS_FOLDER}"


def remote_logging_env(settings: Settings) -> dict[str, str]:
    """Task logs on MinIO (the Amazon provider's S3 task handler), as the chart sets them: a
    task's log is uploaded when its try ends, and the API server reads it from there."""
    connection = {
        "conn_type": "aws",
        "login": settings.minio_access_key,
        "password": settings.minio_secret_key,
        # MinIO: its endpoint, path-style bucket addressing (the provider's extra fields).
        "extra": {
            "endpoint_url": settings.s3_endpoint,
            "region_name": "us-east-1",
            "config_kwargs": {"s3": {"addressing_style": "path"}},
        },
    }
    return {
        "AIRFLOW__LOGGING__REMOTE_LOGGING": "True",
        "AIRFLOW__LOGGING__REMOTE_BASE_LOG_FOLDER": logs_folder(settings),
        "AIRFLOW__LOGGING__REMOTE_LOG_CONN_ID": LOGS_CONN_ID,
        f"AIRFLOW_CONN_{LOGS_CONN_ID.upper()}": json.dumps(connection),
    }
