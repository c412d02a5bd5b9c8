"""The two execution backends of a step, chosen by `LK_SPARK_BACKEND`, behind one call.

- `local`: the step runs in the Airflow task's own process, with a Spark session built from
  the settings (`LK_SPARK_MASTER`: `local[N]`, or a `k8s://` master with the driver in the
  worker). One session per process: `airflow dags test` runs every task in one process and
  reuses it; the LocalExecutor runs each task in a process of its own, which ends with it.
- `kubernetes`: a step that needs Spark runs as `lk step NAME ...` in a pod of its own
  (KubernetesPodOperator, the app image), the pod being the Spark driver; its JSON result comes
  back as the task's XCom through the pod's XCom sidecar.

A step with nothing to do (a batch with nothing new to compute) skips its task on both, so the
run ends successful with the rest skipped: `NothingToDo` in the worker, `lk step`'s exit code
`SKIP_EXIT_CODE` in a pod (the operator's `skip_on_exit_code`).

Steps without Spark (checks, switches, data-quality suites) run in the worker with either
backend: a pod would add a minute of scheduling for a few SQL statements. The DAG files are the
same for both; only the operators built here differ.
"""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from airflow.providers.standard.operators.python import PythonOperator
from airflow.sdk import PokeReturnValue, TriggerRule, get_current_context, task

from core.settings import Settings, SparkBackend, get_settings
from lk.step_registry import SKIP_EXIT_CODE, NothingToDo, get_step, run_step

if TYPE_CHECKING:
    from airflow.sdk import BaseOperator
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_session: SparkSession | None = None


def spark_session() -> SparkSession:
    """This process's Spark session, built on first use (only steps that need Spark ask)."""
    global _session
    if _session is None:
        from pyspark.sql import SparkSession  # deferred: pyspark, for steps that need Spark

        from core.spark import build_spark_session  # deferred: pyspark

        # A session this process already runs (a test's) is reused rather than duplicated.
        _session = SparkSession.getActiveSession() or build_spark_session(
            get_settings(), "lk-airflow"
        )
    return _session


def run_local_step(step: str, args: dict[str, Any]) -> Any:
    """The `local` backend's task body: the step in this process."""
    from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

    # deferred: the quality package loads pandas, which parsing a DAG file must not
    from quality.result import QualityGateError

    try:
        return run_step(step, args, get_settings(), spark_session)
    except NothingToDo as exc:
        raise AirflowSkipException(str(exc)) from exc
    except QualityGateError as exc:
        # A failed gate is a verdict on the data: a retry would fail the same way.
        raise AirflowFailException(str(exc)) from exc


def on_pods(settings: Settings, step: str) -> bool:
    return settings.spark_backend == SparkBackend.KUBERNETES and get_step(step).needs_spark


def step_task(
    task_id: str, step: str, *, trigger_rule: str = TriggerRule.ALL_SUCCESS, **args: Any
) -> BaseOperator:
    """A task running step `step` of `lk/step_registry.py` with `args` (Jinja templates allowed)."""
    settings = get_settings()
    doc = f"`lk step {step}`: {get_step(step).summary}."
    if on_pods(settings, step):
        from lk_dags.pods import step_pod  # deferred: the cncf.kubernetes provider

        return step_pod(
            settings,
            task_id,
            step,
            args,
            doc_md=doc,
            trigger_rule=trigger_rule,
            skip_on_exit_code=SKIP_EXIT_CODE,
        )
    return PythonOperator(
        task_id=task_id,
        python_callable=run_local_step,
        op_kwargs={"step": step, "args": args},
        doc_md=doc,
        trigger_rule=trigger_rule,
    )


def _replay_round(settings: Settings, version: int) -> dict[str, Any]:
    """One replay round of `version`, on the configured backend; its lag and watermark gap."""
    if on_pods(settings, "kappa-replay-round"):
        from lk_dags.pods import step_pod  # deferred: the cncf.kubernetes provider

        context = get_current_context()
        pod = step_pod(
            settings, f"{context['ti'].task_id}_round", "kappa-replay-round", {"version": version}
        )
        return dict(pod.execute(context))
    return dict(run_step("kappa-replay-round", {"version": version}, settings, spark_session))


def replay_until_caught_up(task_id: str, version: Any) -> Any:
    """A sensor whose every poke runs one replay round of `version`; the round says whether the
    version has caught up (`kappa.reprocess.caught_up`, the rule `lk reprocess` uses too).

    The replay progresses only inside pokes, so the sensor cannot wait on a replay that is not
    running. Locally it pokes in `poke` mode, keeping its Spark session (and the stream's state
    cache) between rounds; on Kubernetes each poke is a pod and the sensor frees its worker slot
    between pokes (`reschedule`)."""
    settings = get_settings()
    pods = on_pods(settings, "kappa-replay-round")

    @task.sensor(
        task_id=task_id,
        mode="reschedule" if pods else "poke",
        poke_interval=30 if pods else 5,
        timeout=timedelta(hours=2).total_seconds(),
        doc_md="Replays the log into the new version one round per poke until it has caught "
        "up with the live version (lag behind the log end and watermark gap within bounds).",
    )
    def caught_up(version: int) -> PokeReturnValue:
        current = get_settings()
        result = _replay_round(current, int(version))
        behind = ", ".join(f"{tp} {n}" for tp, n in result.get("lag", {}).items()) or "none"
        log.info(
            "replay round of kappa-v%s: %s micro-batches; behind per partition: %s; "
            "watermark gap %s ms; caught up: %s",
            version,
            result.get("micro_batches"),
            behind,
            result.get("watermark_gap_ms"),
            result.get("caught_up"),
        )
        return PokeReturnValue(is_done=bool(result.get("caught_up")), xcom_value=result)

    return caught_up(version)
