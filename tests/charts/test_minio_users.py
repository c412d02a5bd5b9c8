"""Issue 15, item 7: each component reaches MinIO with its own user and a policy on its own
buckets; only MinIO itself and the minio-users Job hold the root keys."""

from __future__ import annotations

import json
from typing import Any

import pytest

from core.settings import Settings
from tests.charts.chart_utils import (
    MINIO_USERS,
    WORKLOAD_KINDS,
    Manifest,
    Rendered,
    containers,
    env_of,
    pod_spec,
    render,
    render_set,
)

COMPARISON_MODES = {"both", "pod-backend"}
"""The value sets in `both` mode, where the comparison's Job and its MinIO user exist."""


def _users(value_set: str) -> set[str]:
    return set(MINIO_USERS) | ({"comparison"} if value_set in COMPARISON_MODES else set())


# What the code reads and writes (core/settings.py bucket names): the chart's one access map.
BUCKETS = {
    # creates them
    "init": {"lk-master", "lk-views", "lk-checkpoints", "lk-dq", "lk-logs", "lk-spark-events"},
    "archiver": {"lk-master", "lk-checkpoints"},
    "speed-layer": {"lk-checkpoints", "lk-views"},
    "kappa-stream": {"lk-checkpoints"},
    # its tasks and step pods also write Spark's event logs (sparkHistory.enabled)
    "airflow": {"lk-master", "lk-views", "lk-checkpoints", "lk-dq", "lk-spark-events"},
    "spark-history": {"lk-spark-events"},  # reads them, its cleaner deletes old ones
    "airflow-logs": {"lk-logs"},  # task logs (airflow.remoteLogging), every Airflow component
    # Its runs' own buckets (Settings.namespaced), and the Data Docs bucket for its report.
    "comparison": {"lk-master-cmp-*", "lk-views-cmp-*", "lk-checkpoints-cmp-*", "lk-dq"},
}


def _component(obj: Manifest) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


def _minio_keys(container: Manifest) -> tuple[str, str] | None:
    env = env_of(container)
    # The project's settings, or AWS_* for Spark's own History Server (Spark copies them into
    # fs.s3a.access.key and fs.s3a.secret.key).
    for access, secret in (
        ("LK_MINIO_ACCESS_KEY", "LK_MINIO_SECRET_KEY"),
        ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"),
    ):
        if access in env:
            return (
                env[access]["valueFrom"]["secretKeyRef"]["key"],
                env[secret]["valueFrom"]["secretKeyRef"]["key"],
            )
        assert secret not in env
    return None


def _policies(rendered: Rendered) -> dict[str, dict[str, Any]]:
    (config,) = rendered.by_component("ConfigMap", "minio-users")
    return {
        name.removeprefix("policy-").removesuffix(".json"): json.loads(text)
        for name, text in config["data"].items()
        if name.endswith(".json")
    }


@pytest.mark.parametrize("value_set", ["lambda", "kappa", "both", "pod-backend"])
class TestEachComponentItsOwnMinioUser:
    def test_each_app_pod_should_get_only_its_own_keys(self, value_set: str) -> None:
        expected = {
            "init": "init",
            "archiver": "archiver",
            "speed-layer": "speed-layer",
            "kappa-stream": "kappa-stream",
            "airflow-scheduler": "airflow",  # its tasks; the step pods: dags/lk_dags/pods.py
            "comparison": "comparison",
            "spark-history": "spark-history",
        }
        seen = set()
        for obj in render_set(value_set).of_kind(*WORKLOAD_KINDS):
            component = _component(obj)
            for c in containers(obj):
                keys = _minio_keys(c)
                if component not in expected:
                    assert keys is None, (component, c["name"])
                    continue
                if c["name"] == "wait-for-migrations":  # Airflow's, before the scheduler runs
                    assert keys is None
                    continue
                user = expected[component]
                assert keys == (f"minio-{user}-user", f"minio-{user}-password"), c["name"]
                seen.add(component)
        assert seen >= {"init", "airflow-scheduler", "spark-history"}

    def test_only_minio_and_the_users_job_should_hold_the_root_keys(self, value_set: str) -> None:
        rendered = render_set(value_set)
        holders = set()
        for obj in rendered.of_kind(*WORKLOAD_KINDS):
            spec = pod_spec(obj)
            refs = [
                e["valueFrom"]["secretKeyRef"]["key"]
                for c in containers(obj)
                for e in c.get("env", [])
                if "secretKeyRef" in e.get("valueFrom", {})
            ]
            refs += [
                item["key"]
                for v in spec.get("volumes", [])
                if "secret" in v
                for item in v["secret"].get("items", [{"key": "<all>"}])
            ]
            if any(key in ("minio-root-user", "minio-root-password", "<all>") for key in refs):
                holders.add(_component(obj))
        assert holders == {"minio", "minio-users"}

    def test_every_policy_should_reach_only_its_own_buckets(self, value_set: str) -> None:
        policies = _policies(render_set(value_set))
        assert set(policies) == _users(value_set)
        for user, policy in policies.items():
            buckets = set()
            for statement in policy["Statement"]:
                assert statement["Effect"] == "Allow"
                assert not [a for a in statement["Action"] if "*" in a or a.startswith("admin:")]
                for arn in statement["Resource"]:
                    bucket = arn.removeprefix("arn:aws:s3:::").split("/")[0]
                    if statement["Action"] == ["s3:ListAllMyBuckets"]:
                        assert arn == "arn:aws:s3:::*"  # bucket names only, for `lk init --check`
                    else:
                        buckets.add(bucket)
            assert buckets == BUCKETS[user], user


def test_bucket_names_should_be_the_settings_defaults() -> None:
    """The policies name the buckets the code uses; the chart does not override them."""
    settings = Settings()
    policies = _policies(render())
    named = {
        arn.removeprefix("arn:aws:s3:::")
        for statement in policies["init"]["Statement"]
        for arn in statement["Resource"]
        if arn != "arn:aws:s3:::*"
    }
    assert named == set(settings.buckets)


def test_only_the_publishers_may_make_a_prefix_of_the_data_docs_public() -> None:
    """publish_docs makes the docs/ prefix of the Data Docs bucket public (a bucket policy), the
    comparison its comparison/ prefix."""
    for user, policy in _policies(render({"architecture": "both"})).items():
        actions = {a for s in policy["Statement"] for a in s["Action"]}
        assert ("s3:PutBucketPolicy" in actions) == (user in ("airflow", "comparison")), user
        assert "s3:DeleteBucket" not in actions
        assert ("s3:CreateBucket" in actions) == (user in ("init", "airflow", "comparison")), user


def test_the_comparison_may_create_only_its_runs_buckets() -> None:
    """A run's namespace is `Settings.namespaced(RUN_PREFIX + time)`: the policy's patterns must
    match the names the code makes, and no bucket of the release's own data."""
    from comparison.live import RUN_PREFIX

    policy = _policies(render({"architecture": "both"}))["comparison"]
    (create,) = [s for s in policy["Statement"] if s["Sid"] == "CreateRunBuckets"]
    patterns = {arn.removeprefix("arn:aws:s3:::") for arn in create["Resource"]}
    run = Settings().namespaced(f"{RUN_PREFIX}20261124194428")
    made = {run.master_bucket, run.views_bucket, run.checkpoints_bucket}
    assert {p.removesuffix("*") for p in patterns} == {
        b.removesuffix("20261124194428") for b in made
    }
    assert not set(Settings().buckets) & {b.removesuffix("20261124194428") for b in made}


def test_the_comparison_user_exists_in_both_mode_only() -> None:
    for architecture in ("lambda", "kappa"):
        assert "comparison" not in _policies(render({"architecture": architecture}))
    assert "comparison" not in _policies(
        render({"architecture": "both", "comparison": {"enabled": False}})
    )


class TestUsersJob:
    def test_should_create_every_user_with_mc_as_the_root_user(self) -> None:
        rendered = render_set("both")
        (job,) = rendered.by_component("Job", "minio-users")
        (minio,) = rendered.by_component("StatefulSet", "minio")
        (c,) = containers(job)
        assert c["image"] == next(containers(minio))["image"]  # mc is in the MinIO image
        assert job["metadata"]["name"] == "lk-minio-users-r1"  # a new Job every revision
        env = {k: v["value"] for k, v in env_of(c).items()}
        assert set(env["MINIO_USERS"].split()) == _users("both")
        assert env["MINIO_URL"] == "http://lk-minio:9000"
        assert env["POLICY_PREFIX"] == "lk"
        (config,) = rendered.by_component("ConfigMap", "minio-users")
        script = config["data"]["create-users.sh"]
        for command in ("mc admin policy create", "mc admin user add", "mc admin policy attach"):
            assert command in script
        (credentials,) = [v for v in pod_spec(job)["volumes"] if "secret" in v]
        keys = {item["key"] for item in credentials["secret"]["items"]}
        assert keys == {"minio-root-user", "minio-root-password"} | {
            f"minio-{u}-{part}" for u in _users("both") for part in ("user", "password")
        }

    def test_should_run_against_an_external_minio_too(self) -> None:
        rendered = render({"minio": {"enabled": False, "externalHost": "s3.example.internal"}})
        (job,) = rendered.by_component("Job", "minio-users")
        assert env_of(next(containers(job)))["MINIO_URL"]["value"] == (
            "http://s3.example.internal:9000"
        )
