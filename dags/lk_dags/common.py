"""Defaults of every DAG, which DAGs a deployment has, and the Jinja templates steps take."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any, Final

from airflow.sdk import Param

from core.catalog import DEFAULT_LOGIC_VERSION, LOGIC_VERSIONS
from core.settings import Architecture, Settings

START_DATE: Final = datetime(2026, 1, 1, tzinfo=UTC)

DEFAULT_ARGS: Final[dict[str, Any]] = {
    "owner": "lambda-kappa",
    # Every step is idempotent (lk/step_registry.py), so a retry after a lost worker or a broken
    # connection is safe; a failed quality gate is not retried (it fails the task for good).
    "retries": 2,
    "retry_delay": timedelta(minutes=1),
}

RUN_NAME: Final = "{{ run_id }}"
"""Validation results are stored under the run's id, so Data Docs link a result to its run."""


def has_lambda(settings: Settings) -> bool:
    return settings.architecture in (Architecture.LAMBDA, Architecture.BOTH)


def has_kappa(settings: Settings) -> bool:
    return settings.architecture in (Architecture.KAPPA, Architecture.BOTH)


def xcom(task_id: str) -> str:
    """A step argument: what task `task_id` returned, as JSON (`null` for None)."""
    return f"{{{{ ti.xcom_pull(task_ids='{task_id}') | tojson }}}}"


def xcom_field(task_id: str, key: str) -> str:
    """A step argument: field `key` of what task `task_id` returned (a JSON object), as JSON
    (`null` when absent)."""
    pulled = f"(ti.xcom_pull(task_ids='{task_id}') or {{}})"
    return f"{{{{ {pulled}.get('{key}') | tojson }}}}"


def param(name: str) -> str:
    """A step argument: the run's param `name`, as JSON (`null` when left empty)."""
    return f"{{{{ params.{name} | tojson }}}}"


def logic_version_param(description: str) -> Param:
    """The trigger form's choice of view logic, each version shown with what it computes."""
    return Param(
        DEFAULT_LOGIC_VERSION,
        type="string",
        enum=sorted(LOGIC_VERSIONS),
        values_display={v: f"{v}: {what}" for v, what in LOGIC_VERSIONS.items()},
        title="Logic version",
        description=description,
    )
