"""Credentials are generated into one Secret (or come from the user's own), never from values,
and reach the pods only through secretKeyRef."""

from __future__ import annotations

import base64
import re

import yaml

from tests.charts.chart_utils import (
    CHART_DIR,
    WORKLOAD_KINDS,
    Rendered,
    containers,
    render,
    render_fresh,
    render_set,
)

SECRET_KEYS = {
    "minio-root-user",
    "minio-root-password",
    "postgres-password",
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
        for key in SECRET_KEYS:
            assert f'get $previous "{key}"' in template, key


def test_values_should_hold_no_credential() -> None:
    """No default value anywhere in values.yaml looks like a credential."""

    def walk(node: object, path: str) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                here = f"{path}.{key}"
                if SECRET_NAME.search(str(key)):
                    assert value in ("", None), f"{here} has a default credential"
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
