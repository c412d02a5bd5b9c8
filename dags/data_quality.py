"""Data quality on a schedule (`LK_DQ_SCHEDULE`, hourly by default).

- **realtime_lambda** / **realtime_kappa**: the real-time view suites of each architecture
  the deployment runs (Lambda's speed layer, the live Kappa version).
- **reconciliation** (`both` only): Lambda merged vs Kappa vs the oracle on the windows both
  have closed; where they disagree, the windows and the cause.
- **data_docs**: Data Docs built and published to MinIO, whatever the suites said (a failure
  is what a reader most needs to see).
- **verdict**: fails the run when a suite failed, so the run's colour tells.
"""

from __future__ import annotations

from airflow.sdk import TriggerRule, dag, task
from lk_dags.backends import step_task
from lk_dags.common import DEFAULT_ARGS, RUN_NAME, START_DATE, has_kappa, has_lambda

from core.settings import get_settings


@dag(
    dag_id="data_quality",
    schedule=get_settings().dq_schedule or None,  # empty: only when triggered
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["data-quality"],
    doc_md=__doc__,
)
def data_quality() -> None:
    settings = get_settings()
    suites = []
    if has_lambda(settings):
        suites.append(
            step_task("realtime_lambda", "dq-realtime", architecture="lambda", run_name=RUN_NAME)
        )
    if has_kappa(settings):
        suites.append(
            step_task("realtime_kappa", "dq-realtime", architecture="kappa", run_name=RUN_NAME)
        )
    if has_lambda(settings) and has_kappa(settings):
        suites.append(step_task("reconciliation", "dq-reconcile", run_name=RUN_NAME))
    docs = step_task("data_docs", "dq-docs", trigger_rule=TriggerRule.ALL_DONE)

    @task(task_id="verdict", doc_md="Fails when a suite failed (its task is red).")
    def verdict() -> None:
        """Reached only when every suite passed (trigger rule all_success)."""

    done = verdict()
    for suite in suites:
        suite >> [docs, done]


data_quality()
