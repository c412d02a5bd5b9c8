"""What the cluster's faults share: an outcome row of the fault table, the deletion of a batch
step's driver pod mid-run, and waiting for a condition through an API server that may be
restarting.

The fault suite (`test_pod_faults.py`) deletes the streams', the stores' and the node's; the
chart's batch test deletes its own run's driver (`BatchFault`: one batch run for both), and its
outcome joins the suite's table (conftest's `fault_outcomes`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.airflow_api import AirflowApi
from tests.k8s.kube import Kube, KubeError
from tests.k8s.serving_views import ServingReader, UnavailableError

COMPONENT = "app.kubernetes.io/component"
BATCH_DAG = "lambda_batch"
BATCH_STEP = "compute-views"
DRIVER = f"{COMPONENT}=spark-step,lambda-kappa.io/step={BATCH_STEP}"
RUN_S = 1500.0


@dataclass
class Outcome:
    fault: str
    how: str
    back: str = "-"  # what came back, and when
    exact_s: float | None = None  # until every view of both architectures was the oracle's
    restarted: list[str] = field(default_factory=list)
    note: str = ""


def table(outcomes: list[Outcome]) -> str:
    rows = [
        "| fault | how | came back | restarted | exact again after |",
        "|---|---|---|---|---|",
        *(
            f"| {o.fault} | {o.how} | {o.back} | {', '.join(o.restarted) or 'none'} | "
            + (f"{o.exact_s:.0f} s" if o.exact_s is not None else "**not exact**")
            + (f" ({o.note})" if o.note else "")
            + " |"
            for o in outcomes
        ),
    ]
    return "\n".join(rows)


def wait_for(what: str, condition: Callable[[], bool], timeout_s: float) -> float:
    """Seconds until `condition` holds (an API error counts as not yet), or an AssertionError."""
    started = time.monotonic()
    while True:
        try:
            if condition():
                return time.monotonic() - started
        except (KubeError, KeyError):
            pass  # the API server is restarting, or an object is half made
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"{what}: not within {timeout_s:.0f} s")
        time.sleep(2)


def pods_any(kube: Kube, selector: str) -> list[dict[str, Any]]:
    """Pods by `selector` alone (the DAGs' step pods carry no instance label)."""
    return kube.items("pods", "-l", selector)


def lambda_version(reader: ServingReader) -> int | None:
    """The batch version Lambda's answers come from (`meta.view_version`), read until the API
    answers (a minute at most)."""
    deadline = time.monotonic() + 60
    while True:
        try:
            return reader.view("page_views", "lambda")["meta"]["view_version"]
        except UnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(2)


@dataclass
class BatchFault:
    """Deletes the driver pod of `lambda_batch`'s compute step once it runs its Spark job (its
    executor pods run), from a thread: the test goes on meanwhile."""

    kube: Kube
    airflow: AirflowApi
    run_id: str
    deleted_at: float | None = None
    served: list[int | None] = field(default_factory=list)
    """Lambda's served version just before the deletion and just after it."""
    error: BaseException | None = None
    thread: threading.Thread | None = None

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def join(self) -> float:
        """When the pod was deleted (`time.monotonic()`)."""
        assert self.thread is not None
        self.thread.join(RUN_S + 60)
        if self.error is not None:
            raise self.error
        assert self.deleted_at is not None, f"no {BATCH_STEP} driver deleted in {RUN_S:.0f} s"
        return self.deleted_at

    def _run(self) -> None:
        try:
            wait_for(f"the {BATCH_STEP} driver running with executors", self._mid_job, RUN_S)
            with ServingReader(self.kube) as reader:  # a forward of its own: this is a thread
                self.served.append(lambda_version(reader))
                self.deleted_at = time.monotonic()
                self.kube.kubectl("delete", "pod", "-l", DRIVER, "--wait=false")
                self.served.append(lambda_version(reader))
        except BaseException as exc:  # raised by join(), in the test
            self.error = exc

    def _mid_job(self) -> bool:
        drivers = [p for p in pods_any(self.kube, DRIVER) if p["status"].get("phase") == "Running"]
        if not drivers:
            run = self.airflow.get(f"/dags/{BATCH_DAG}/dagRuns/{self.run_id}")
            assert run["state"] not in ("success", "failed"), (
                f"the run ended before its {BATCH_STEP} pod was caught running: "
                f"{self.airflow.task_states(BATCH_DAG, self.run_id)}"
            )
            return False
        # Its executor pods run, which the driver owns (they go with it).
        uids = {p["metadata"]["uid"] for p in drivers}
        return any(
            p["status"].get("phase") == "Running"
            and uids & {o["uid"] for o in p["metadata"].get("ownerReferences", [])}
            for p in pods_any(self.kube, f"{COMPONENT}=spark-executor")
        )
