"""Kappa reprocessing: replay the retained log into a new view version, then switch readers.

The steps of `lk reprocess --architecture kappa`, as tasks:

1. **start**: a new version `kappa-vN+1` with the chosen logic (or the unfinished one a failed
   run left, resumed from its checkpoint).
2. **caught_up**: a sensor; each poke replays what the log holds now into the new version and
   checks its lag behind the log end and its watermark gap against the live version. The
   first reads the log up to its end as one micro-batch computed on every task slot (with
   the `kubernetes` backend, the step pod is the Spark driver and its executors are pods, as
   `lambda_batch`'s steps run); the later ones read what arrived meanwhile.
3. **check**: the new version has rows wherever the live one has.
4. **switch**: readers move to the new version in one transaction.
5. **retire**: the old version's rows, state and checkpoint are deleted.

Until the switch the live version keeps serving, untouched: a failed run changes nothing
readers see, and running it again resumes the replay.
"""

from __future__ import annotations

from airflow.sdk import chain, dag
from lk_dags.backends import replay_until_caught_up, step_task
from lk_dags.common import DEFAULT_ARGS, START_DATE, has_kappa, logic_version_param, param, xcom

from core.settings import get_settings

PARAMS = {
    "logic_version": logic_version_param(
        "The view logic the new Kappa version computes while replaying the log "
        "from its earliest offsets."
    ),
}


@dag(
    dag_id="kappa_reprocess",
    schedule=None,
    start_date=START_DATE,
    catchup=False,
    max_active_runs=1,
    default_args=DEFAULT_ARGS,
    params=PARAMS,
    tags=["kappa", "reprocess"],
    doc_md=__doc__,
)
def kappa_reprocess() -> None:
    start = step_task("start", "kappa-start", logic_version=param("logic_version"))
    chain(
        start,
        replay_until_caught_up("caught_up", start.output),
        step_task("check", "kappa-check", version=xcom("start")),
        step_task("switch", "kappa-switch", version=xcom("start")),
        step_task("retire", "kappa-retire"),
    )


# Kappa's DAGs exist only where Kappa runs (LK_ARCHITECTURE kappa or both).
if has_kappa(get_settings()):
    kappa_reprocess()
