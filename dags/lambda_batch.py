"""Lambda's batch layer, on a schedule (`LK_BATCH_SCHEDULE`, hourly by default).

1. **close_archive**: archive what the log holds now into the master dataset (exactly once,
   raw records); returns the `(date, hour)` partitions that received records.
2. **validate_raw**: the raw-events suites on what the next batch adds (the records archived
   since the published batch's snapshot, parsed with the shared parsing), in the master
   dataset pinned at one Delta version. A failure stops the run here: nothing is computed,
   nothing published, the previous version keeps serving.
3. **compute_views**: a new batch version from the whole master dataset at the version the
   gate checked, up to the cutoff the archive closes (not visible to readers). With nothing new
   to compute (nothing archived yet, as on a fresh install, or nothing since the published
   version's snapshot, whose cutoff and logic stand) it **skips**, and so do the tasks after
   it: the run ends successful, the published version keeps serving.
4. **validate_views**: the batch-view suites on that version; a failure marks it failed.
5. **publish**: readers move to the new version (with the speed layer's hand-off).

Every task is safe to retry. Spark runs in the task or in a pod (`LK_SPARK_BACKEND`).
"""

from __future__ import annotations

from airflow.sdk import chain, dag
from lk_dags.backends import step_task
from lk_dags.common import DEFAULT_ARGS, RUN_NAME, START_DATE, has_lambda, xcom, xcom_field

from core.settings import get_settings


@dag(
    dag_id="lambda_batch",
    schedule=get_settings().batch_schedule or None,  # empty: only when triggered
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    tags=["lambda", "batch"],
    doc_md=__doc__,
)
def lambda_batch() -> None:
    chain(
        step_task("close_archive", "close-archive"),
        step_task("validate_raw", "validate-raw", run_name=RUN_NAME),
        step_task(
            "compute_views", "compute-views", snapshot=xcom_field("validate_raw", "snapshot")
        ),
        step_task(
            "validate_views", "validate-views", version=xcom("compute_views"), run_name=RUN_NAME
        ),
        step_task("publish", "publish", version=xcom("compute_views")),
    )


# Lambda's DAGs exist only where Lambda runs (LK_ARCHITECTURE lambda or both).
if has_lambda(get_settings()):
    lambda_batch()
