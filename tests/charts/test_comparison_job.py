"""Issue 16: the side-by-side comparison as a Job of the chart in `both` mode: a suspended
CronJob as its template (`make cluster-compare` starts a Job from it), running `lk compare`
with Spark in local mode, its own MinIO user, the store's owner, and NOTES.txt saying how."""

from __future__ import annotations

from typing import Any

import pytest

from tests.charts.chart_utils import (
    Manifest,
    containers,
    env_of,
    load_values,
    pod_spec,
    render,
    render_set,
)

BOTH = {"architecture": "both"}


def _cronjob(values: dict[str, Any]) -> Manifest:
    (cronjob,) = render(values).by_component("CronJob", "comparison")
    return cronjob


def _container(cronjob: Manifest) -> Manifest:
    (container,) = [c for c in containers(cronjob, init=False) if c["name"] == "comparison"]
    return container


def test_both_should_have_a_suspended_cronjob_as_the_runs_template() -> None:
    cronjob = _cronjob(BOTH)
    assert cronjob["metadata"]["name"] == "lk-comparison"
    assert cronjob["spec"]["suspend"] is True
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"  # two runs would measure each other
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert job["backoffLimit"] == 0  # a failed run is reported, not measured twice
    assert job["activeDeadlineSeconds"] == 5400
    assert pod_spec(cronjob)["restartPolicy"] == "Never"


def test_the_run_should_be_lk_compare_with_the_values() -> None:
    values = {
        **BOTH,
        "comparison": {"events": 900, "seed": 11, "rate": 30, "scenarios": "steady,late"},
    }
    args = _container(_cronjob(values))["args"]
    assert args == [
        "lk", "compare", "--events=900", "--seed=11", "--rate=30", "--scenarios=steady,late",
        "--out-dir=/tmp/lk/compare",
    ]  # fmt: skip


@pytest.mark.parametrize("value_set", ["both", "pod-backend"])
def test_its_drivers_should_run_spark_locally_as_the_comparison_user(value_set: str) -> None:
    """Even where the release's drivers start executors as pods: a run's own drivers stay in
    its pod, and never take the node's executors from the release."""
    (cronjob,) = render_set(value_set).by_component("CronJob", "comparison")
    env = env_of(_container(cronjob))
    assert env["LK_SPARK_MASTER"]["value"] == "local[2]"
    assert env["LK_ARCHITECTURE"]["value"] == "both"
    assert env["LK_MINIO_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["key"] == (
        "minio-comparison-user"
    )
    # The store's owner: a run makes a serving database of its own.
    assert env["LK_POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "postgres-password"
    init = {c["name"] for c in pod_spec(cronjob)["initContainers"]}
    assert init == {"wait-for-init"}


def test_its_lk_init_should_keep_the_release_s_read_only_role_password() -> None:
    """The read-only role belongs to the Postgres server, not to a database: the run's `lk
    init` grants it reads on the run's database with the release's password. Given none, it
    reset the role to the default password, and the release's API could no longer open a
    connection (found on the real cluster: GET /v1/comparison answered 503 after a run)."""
    env = env_of(_container(_cronjob(BOTH)))
    assert env["LK_SERVING_POSTGRES_USER"]["value"] == "lk_reader"
    password = env["LK_SERVING_POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]
    assert password == {"name": "lk-credentials", "key": "serving-postgres-password"}


def test_a_schedule_should_unsuspend_it() -> None:
    cronjob = _cronjob({**BOTH, "comparison": {"schedule": "0 3 * * *"}})
    assert cronjob["spec"]["schedule"] == "0 3 * * *"
    assert cronjob["spec"]["suspend"] is False


@pytest.mark.parametrize(
    "values",
    [
        {"architecture": "lambda"},
        {"architecture": "kappa"},
        {**BOTH, "comparison": {"enabled": False}},
    ],
)
def test_it_should_exist_in_both_mode_only(values: dict[str, Any]) -> None:
    rendered = render(values)
    assert rendered.by_component("CronJob", "comparison") == []
    assert "comparison" not in rendered.notes


def test_notes_should_say_how_to_start_one_and_where_its_report_is() -> None:
    notes = render(load_values(**BOTH)).notes
    assert "kubectl -n lambda-kappa create job --from=cronjob/lk-comparison" in notes
    assert "make cluster-compare" in notes
    assert "/v1/comparison" in notes
    assert "http://localhost:9000/lk-dq/comparison/" in notes
