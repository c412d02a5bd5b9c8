"""values.schema.json: rejects what the chart cannot deploy, documents every property."""

from __future__ import annotations

import json
from typing import Any

import helm_python as helm
import pytest

from tests.charts.chart_utils import CHART_DIR, render


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"architecture": "banana"}, "/architecture"),
        ({"architecture": 1}, "/architecture"),
        ({"serving": {"replicas": "two"}}, "/serving/replicas"),
        ({"serving": {"replicas": 0}}, "/serving/replicas"),
        ({"serving": {"workers": 0}}, "/serving/workers"),
        ({"serving": {"pool": {"maxSize": "8"}}}, "/serving/pool/maxSize"),
        ({"serving": {"pool": {"size": 8}}}, "size"),
        ({"kafka": {"port": "9092"}}, "/kafka/port"),
        ({"kafka": {"enabled": "yes"}}, "/kafka/enabled"),
        ({"images": {"app": {"tag": "latest"}}}, "/images/app/tag"),
        ({"images": {"kafka": {"pullPolicy": "Sometimes"}}}, "/images/kafka/pullPolicy"),
        ({"spark": {"master": "yarn"}}, "/spark/master"),
        ({"speedLayer": {"resources": {"requests": {"cpu": "lots"}}}}, "/speedLayer/resources"),
        # null deletes a default in Helm: limits are required, not optional.
        ({"serving": {"resources": {"limits": None}}}, "/serving/resources"),
        ({"architectur": "kappa"}, "architectur"),
        ({"credentials": {"password": "hunter2"}}, "password"),
    ],
)
def test_schema_should_reject(values: dict[str, Any], complaint: str) -> None:
    with pytest.raises(helm.HelmValuesError, match=complaint):
        render(values)


@pytest.mark.parametrize(
    ("values", "sentence"),
    [
        ({"architecture": "lambda", "airflow": {"enabled": False}}, "through Airflow"),
        ({"kafka": {"enabled": False}}, "kafka.externalHost"),
        ({"serving": {"pool": {"minSize": 9, "maxSize": 8}}}, "serving.pool.minSize=9 is above"),
    ],
)
def test_check_values_should_fail_with_a_sentence(values: dict[str, Any], sentence: str) -> None:
    with pytest.raises(helm.HelmError, match=sentence):
        render(values)


def test_external_services_should_be_used_when_disabled() -> None:
    rendered = render({"minio": {"enabled": False, "externalHost": "s3.example.internal"}})
    assert rendered.by_component("StatefulSet", "minio") == []
    (serving,) = rendered.by_component("Deployment", "serving")
    env = {
        e["name"]: e.get("value")
        for e in serving["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["LK_MINIO_HOST"] == "s3.example.internal"


def test_every_schema_property_should_have_a_description() -> None:
    schema = json.loads((CHART_DIR / "values.schema.json").read_text())

    def walk(node: dict[str, Any], path: str) -> None:
        for name, prop in node.get("properties", {}).items():
            assert prop.get("description"), f"{path}.{name} has no description"
            walk(prop, f"{path}.{name}")

    walk(schema, "")
    for name, definition in schema["definitions"].items():
        walk(definition, f"#{name}")


def test_schema_and_values_should_describe_the_same_keys() -> None:
    """values.yaml and the schema are one contract: no key in one only."""
    import yaml

    schema = json.loads((CHART_DIR / "values.schema.json").read_text())
    values = yaml.safe_load((CHART_DIR / "values.yaml").read_text())

    def resolve(node: dict[str, Any]) -> dict[str, Any]:
        ref = node.get("$ref")
        return schema["definitions"][ref.rsplit("/", 1)[1]] if ref else node

    def walk(value: Any, node: dict[str, Any], path: str) -> None:
        node = resolve(node)
        if not isinstance(value, dict) or "properties" not in node:
            return
        assert set(value) <= set(node["properties"]), path
        missing = set(node["properties"]) - set(value) - {"global"}
        assert not missing, f"{path}: {missing} in the schema, not in values.yaml"
        for key, sub in value.items():
            walk(sub, node["properties"][key], f"{path}.{key}")

    walk(values, schema, "")
