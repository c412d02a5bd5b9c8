"""Credentials are generated into one Secret (or come from the user's own), never from values,
and reach the pods only through secretKeyRef."""

from __future__ import annotations

import base64
import re

import pytest
import yaml

from tests.charts.chart_utils import (
    CHART_DIR,
    MINIO_USERS,
    WORKLOAD_KINDS,
    Rendered,
    containers,
    env_of,
    pod_spec,
    render,
    render_fresh,
    render_set,
)

SECRET_KEYS = {
    "minio-root-user",
    "minio-root-password",
    *(f"minio-{user}-{part}" for user in MINIO_USERS for part in ("user", "password")),
    "postgres-password",
    "serving-postgres-password",
    "monitoring-postgres-password",
    "app-postgres-password",  # change data capture: the application's login
    "cdc-postgres-password",  # and the connector's
    "airflow-db-password",
    "airflow-admin-password",
    "airflow-fernet-key",
    "airflow-jwt-secret",
    "airflow-api-secret-key",
}
SECRET_NAME = re.compile(r"(password|secret|fernet|token|access.?key)", re.IGNORECASE)


def _secret_data(rendered: Rendered) -> dict[str, str]:
    (secret,) = rendered.of_kind("Secret")
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


class TestGeneratedSecret:
    def test_should_hold_every_credential_and_be_kept_on_uninstall(self) -> None:
        rendered = render()
        (secret,) = rendered.of_kind("Secret")
        assert set(secret["data"]) == SECRET_KEYS
        assert secret["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"
        assert "stringData" not in secret

    def test_should_generate_new_random_values_on_each_fresh_install(self) -> None:
        first, second = _secret_data(render_fresh()), _secret_data(render_fresh())
        for key in SECRET_KEYS:
            assert first[key] != second[key], key
            assert len(first[key]) >= 8, key

    def test_fernet_key_should_be_32_bytes_of_base64(self) -> None:
        key = _secret_data(render())["airflow-fernet-key"]
        assert len(base64.urlsafe_b64decode(key)) == 32

    def test_should_keep_credentials_across_upgrades_with_lookup(self) -> None:
        template = (CHART_DIR / "templates" / "credentials" / "credentials-secret.yaml").read_text()
        assert 'lookup "v1" "Secret"' in template
        for key in SECRET_KEYS - {
            k for k in SECRET_KEYS if k.startswith("minio-") and "root" not in k
        }:
            assert f'get $previous "{key}"' in template, key
        # The MinIO users' keys, one pair per user of lk.minio.users.
        assert 'get $previous (printf "minio-%s-user" $user)' in template
        assert 'get $previous (printf "minio-%s-password" $user)' in template


def test_values_should_hold_no_credential() -> None:
    """No default value anywhere in values.yaml looks like a credential."""

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                here = f"{path}.{key}"
                if SECRET_NAME.search(str(key)):
                    assert not value, f"{here} has a default credential"
                walk(value, here)

    walk(yaml.safe_load((CHART_DIR / "values.yaml").read_text()), "")


def test_no_secret_should_hold_a_value_passed_in_values() -> None:
    """Values the chart does read (user names, database names) never land in a Secret, and no
    unknown password-like value is accepted into one."""
    rendered = render({"postgres": {"serving": {"user": "custom_owner"}}})
    data = _secret_data(rendered)
    assert "custom_owner" not in data.values()
    assert set(data) == SECRET_KEYS


def test_existing_secret_should_replace_the_generated_one() -> None:
    rendered = render_set("existing-secret")
    assert rendered.of_kind("Secret") == []
    refs = set()
    for obj in rendered.of_kind(*WORKLOAD_KINDS):
        for c in containers(obj):
            for e in c.get("env", []):
                if "secretKeyRef" in e.get("valueFrom", {}):
                    refs.add(e["valueFrom"]["secretKeyRef"]["name"])
    assert refs == {"lk-own-credentials"}


def test_credentials_should_reach_pods_only_through_secret_refs() -> None:
    rendered = render_set("both")
    secrets = set(_secret_data(rendered).values())
    for obj in rendered.objects:
        if obj["kind"] == "Secret":
            continue
        text = yaml.safe_dump(obj)
        for value in secrets:
            assert value not in text, f"a credential appears in {obj['kind']}"
    for obj in rendered.of_kind(*WORKLOAD_KINDS):
        for c in containers(obj):
            for e in c.get("env", []):
                if SECRET_NAME.search(e["name"]) and "value" in e:
                    # Only references assembled by the kubelet, e.g. $(AIRFLOW_DB_PASSWORD).
                    assert "$(" in e["value"] or e["name"].endswith("_FILE"), e["name"]


def _secret_keys_of(container: dict) -> dict[str, str]:
    """Environment variable -> the credentials Secret's key it is read from."""
    return {
        e["name"]: e["valueFrom"]["secretKeyRef"]["key"]
        for e in container.get("env", [])
        if "secretKeyRef" in e.get("valueFrom", {})
    }


def _components_reading(rendered: Rendered, key: str) -> set[str]:
    """The components whose pods (any container) read `key` of the credentials Secret."""
    found = set()
    for obj in rendered.of_kind(*WORKLOAD_KINDS):
        for c in containers(obj):
            if key in _secret_keys_of(c).values():
                found.add(obj["metadata"]["labels"]["app.kubernetes.io/component"])
    return found


@pytest.mark.parametrize("value_set", ["lambda", "kappa", "both", "existing-secret"])
class TestServingReadsAsAReadOnlyRole:
    """Issue 15, item 7: `lk serve` reads the store as a role with SELECT only; the owner's
    password never reaches the serving pods."""

    def test_serving_pod_should_get_the_read_only_role_and_nothing_else(
        self, value_set: str
    ) -> None:
        (serving,) = render_set(value_set).by_component("Deployment", "serving")
        for c in containers(serving):  # wait-for-init too: it is in the same pod
            env = env_of(c)
            assert env["LK_SERVING_POSTGRES_USER"]["value"] == "lk_reader", c["name"]
            assert _secret_keys_of(c) == {
                "LK_SERVING_POSTGRES_PASSWORD": "serving-postgres-password"
            }, c["name"]
            assert "LK_POSTGRES_PASSWORD" not in env and "LK_POSTGRES_USER" not in env
            # MinIO's address stays (the Data Docs link), but no key: serving reads Postgres only.
            assert "LK_MINIO_ACCESS_KEY" not in env and "LK_MINIO_SECRET_KEY" not in env

    def test_serving_should_wait_for_the_store_as_the_read_only_role(self, value_set: str) -> None:
        (serving,) = render_set(value_set).by_component("Deployment", "serving")
        (wait,) = pod_spec(serving)["initContainers"]
        assert "lk init --check --serving;" in wait["command"][-1]

    def test_init_should_create_the_role_as_the_owner(self, value_set: str) -> None:
        (job,) = render_set(value_set).by_component("Job", "init")
        (init,) = containers(job)
        env = env_of(init)
        assert env["LK_POSTGRES_USER"]["value"] == "lk"
        assert env["LK_SERVING_POSTGRES_USER"]["value"] == "lk_reader"
        refs = _secret_keys_of(init)
        assert refs["LK_POSTGRES_PASSWORD"] == "postgres-password"
        assert refs["LK_SERVING_POSTGRES_PASSWORD"] == "serving-postgres-password"

    def test_only_the_writers_should_get_the_owner_s_password(self, value_set: str) -> None:
        rendered = render_set(value_set)
        writers = {"postgres", "init", "airflow-scheduler"}  # the server, `lk init`, the tasks
        if value_set != "kappa":
            writers |= {"archiver", "speed-layer"}
        if value_set in ("kappa", "both"):  # existing-secret: the default architecture, lambda
            writers |= {"kappa-stream"}
        if value_set == "both":  # a comparison run creates its own serving database
            writers |= {"comparison"}
        assert _components_reading(rendered, "postgres-password") == writers
        # Who creates the read-only role or logs in as it: `lk init`, the API, and a comparison
        # run (its own `lk init` and `lk serve`).
        readers = {"init", "serving"} | ({"comparison"} if value_set == "both" else set())
        assert _components_reading(rendered, "serving-postgres-password") == readers


def test_serving_role_name_should_come_from_values() -> None:
    rendered = render({"serving": {"postgresUser": "api_reader"}})
    for component, kind in (("serving", "Deployment"), ("init", "Job")):
        (obj,) = rendered.by_component(kind, component)
        assert env_of(next(containers(obj)))["LK_SERVING_POSTGRES_USER"]["value"] == "api_reader"


def test_helm_test_pod_should_get_no_credential() -> None:
    (pod,) = render().of_kind("Pod")
    assert all(not _secret_keys_of(c) for c in containers(pod))


@pytest.mark.parametrize("value_set", ["lambda", "kappa", "both", "pod-backend"])
def test_every_airflow_process_should_get_the_fernet_key(value_set: str) -> None:
    """Issue 15, item 7: connections and variables are encrypted with the Secret's Fernet key
    in every Airflow process (init containers and the migration Job included)."""
    airflow = [
        o
        for o in render_set(value_set).of_kind(*WORKLOAD_KINDS)
        if o["metadata"]["labels"]["app.kubernetes.io/component"].startswith("airflow-")
    ]
    assert len(airflow) == 5
    for obj in airflow:
        for c in containers(obj):
            if c.get("command", [None])[0] == "sh":  # the admin-user file, not Airflow
                continue
            ref = env_of(c)["AIRFLOW__CORE__FERNET_KEY"]["valueFrom"]["secretKeyRef"]
            assert ref["key"] == "airflow-fernet-key", (obj["metadata"]["name"], c["name"])
