"""Every value set renders with real Helm, lints clean with --strict, and every object it
renders is valid for the Kubernetes versions the chart supports (strict: no unknown field)."""

from __future__ import annotations

import helm_python as helm
import pytest
import yaml

from tests.charts.chart_utils import (
    CHART_DIR,
    KUBE_VERSIONS,
    NAMESPACE,
    VALUE_SETS,
    load_values,
    render_set,
    validate,
)


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
class TestRenderedChart:
    def test_should_lint_clean_with_strict(self, value_set: str) -> None:
        report = helm.lint(
            CHART_DIR,
            load_values(*VALUE_SETS[value_set]),
            strict=True,
            namespace=NAMESPACE,
            kube_version=f"v{KUBE_VERSIONS[0]}.0",
        )
        problems = [m for m in report["messages"] if m["severity"] >= 2]  # warnings and errors
        assert report["errors"] == [], report
        assert problems == [], problems

    @pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
    def test_should_validate_every_object_strictly(self, value_set: str, kube_version: str) -> None:
        rendered = render_set(value_set)
        assert len(rendered.objects) > 10
        for obj in rendered.objects:
            # Raises on an unknown field, a wrong type, or a kind with no schema.
            validate(obj, kube_version)

    def test_should_render_the_notes(self, value_set: str) -> None:
        notes = render_set(value_set).notes
        assert "/health" in notes
        assert "/v1/quality" in notes
        assert "lk-dq" in notes


@pytest.mark.parametrize("kube_version", KUBE_VERSIONS)
def test_spark_executor_pod_template_should_be_a_valid_pod(kube_version: str) -> None:
    rendered = render_set("spark-kubernetes")
    (config,) = rendered.by_component("ConfigMap", "spark-conf")
    template = yaml.safe_load(config["data"]["executor-pod-template.yaml"])
    validate(template, kube_version)
    spec = template["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["enableServiceLinks"] is False
    (executor,) = spec["containers"]
    assert executor["name"] == "spark-kubernetes-executor"  # the name Spark merges into
    assert executor["securityContext"]["capabilities"]["drop"] == ["ALL"]
