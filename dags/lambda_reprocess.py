"""Recompute Lambda's batch views on demand: after a logic change, or a fix of raw data.

Trigger it with a **logic version** and, optionally, a **date range**:

1. **validate_raw**: the raw-events suites again, on the master-dataset partitions of the
   range (by the date records reached the log; every partition when both ends are empty).
   A failure stops the run.
2. **compute_views**: a new batch version with the chosen logic, from the whole master
   dataset (Lambda recomputes from all history), up to the end of `until` (UTC), or up to the
   cutoff the archive closes when `until` is empty or later; never before the published
   cutoff (the speed layer covers only what follows it). The speed layer's rows follow the
   new logic from the hand-off on. A run that would rebuild the published version as it is
   (nothing archived since it, the same logic and cutoff) or finds nothing archived skips, as
   in `lambda_batch`.
3. **validate_views**, 4. **publish**: as in `lambda_batch`; the previous version serves until
   the new one has passed its suites.
"""

from __future__ import annotations

from airflow.sdk import Param, chain, dag
from lk_dags.backends import step_task
from lk_dags.common import (
    DEFAULT_ARGS,
    RUN_NAME,
    START_DATE,
    has_lambda,
    logic_version_param,
    param,
    xcom,
)

from core.settings import get_settings

PARAMS = {
    "logic_version": logic_version_param("The view logic the new batch version computes."),
    "since": Param(
        None,
        type=["null", "string"],
        format="date",
        title="From (event date, UTC)",
        description="First day whose master-dataset partitions are validated again before "
        "the recomputation. Empty: from the first partition.",
    ),
    "until": Param(
        None,
        type=["null", "string"],
        format="date",
        title="Until (event date, UTC)",
        description="Last day validated again, and the cutoff of the new version (the end of "
        "that day), capped at what the archive closes and never before the published cutoff. "
        "Empty: up to what the archive closes.",
    ),
}


@dag(
    dag_id="lambda_reprocess",
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    params=PARAMS,
    tags=["lambda", "reprocess"],
    doc_md=__doc__,
)
def lambda_reprocess() -> None:
    chain(
        step_task(
            "validate_raw",
            "validate-raw",
            since=param("since"),
            until=param("until"),
            run_name=RUN_NAME,
        ),
        step_task(
            "compute_views",
            "compute-views",
            until=param("until"),
            logic_version=param("logic_version"),
        ),
        step_task(
            "validate_views", "validate-views", version=xcom("compute_views"), run_name=RUN_NAME
        ),
        step_task("publish", "publish", version=xcom("compute_views")),
    )


if has_lambda(get_settings()):
    lambda_reprocess()
