"""Images from a team's registry: `image.registry` before every repository, one `image.tag`
for all six (an image's own tag wins), and `imagePullSecrets` on every pod the chart defines,
Spark's executors and the DAGs' step pods included."""

from __future__ import annotations

import re
from typing import Any

import helm_python as helm
import pytest
import yaml

from infra.images import COMPONENTS
from tests.charts.chart_utils import (
    CHART_DIR,
    CI_DIR,
    ROOT,
    WORKLOAD_KINDS,
    Rendered,
    containers,
    load_values,
    pod_spec,
    render,
)

IMAGES = tuple(yaml.safe_load((CHART_DIR / "values.yaml").read_text())["images"])
"""The chart's images: the one list `make kind-load`'s and infra/images' must hold."""
REGISTRY = "registry.example.com:5000/team"
PULL_SECRETS = [{"name": "team-registry"}]


def _render(**values: Any) -> Rendered:
    """Both architectures, each DAG step in a pod of its own and Spark's executors as pods."""
    return render(load_values(CI_DIR / "pod-backend-values.yaml", **values))


def _step_pod(rendered: Rendered) -> dict[str, Any]:
    (configmap,) = rendered.by_component("ConfigMap", "airflow-step-pod")
    return dict(yaml.safe_load(configmap["data"]["step-pod.yaml"]))


def _spark_defaults(rendered: Rendered) -> dict[str, str]:
    (configmap,) = rendered.by_component("ConfigMap", "spark-conf")
    lines = configmap["data"]["spark-defaults.conf"].splitlines()
    return dict(line.split(None, 1) for line in lines if line.strip() and not line.startswith("#"))


def _images(rendered: Rendered) -> set[str]:
    pods = [o for o in rendered.objects if o["kind"] in WORKLOAD_KINDS]
    found = {c["image"] for obj in pods for c in containers(obj)}
    found |= {c["image"] for c in _step_pod(rendered)["spec"]["containers"]}
    return found | {_spark_defaults(rendered)["spark.kubernetes.container.image"]}


def test_a_registry_and_one_tag_should_name_every_image() -> None:
    rendered = _render(image={"registry": REGISTRY, "tag": "abc1234"})
    names = "|".join(IMAGES)
    for image in _images(rendered):
        assert re.fullmatch(rf"{re.escape(REGISTRY)}/lambda-kappa/({names}):abc1234", image), image
    assert {image.split("/")[-1].split(":")[0] for image in _images(rendered)} == set(IMAGES)


def test_an_image_s_own_tag_should_win_over_the_shared_one() -> None:
    rendered = _render(image={"tag": "abc1234"}, images={"kafka": {"tag": "kafka-fix"}})
    (kafka,) = rendered.by_component("StatefulSet", "kafka")
    assert {c["image"] for c in containers(kafka)} == {"lambda-kappa/kafka:kafka-fix"}
    (serving,) = rendered.by_component("Deployment", "serving")
    assert {c["image"] for c in containers(serving)} == {"lambda-kappa/app:abc1234"}


def test_a_trailing_slash_on_the_registry_should_not_double() -> None:
    rendered = _render(image={"registry": f"{REGISTRY}/"})
    assert all(image.startswith(f"{REGISTRY}/lambda-kappa/") for image in _images(rendered))


def test_pull_secrets_should_reach_every_pod() -> None:
    rendered = _render(imagePullSecrets=PULL_SECRETS)
    pods = [o for o in rendered.objects if o["kind"] in WORKLOAD_KINDS]
    assert pods
    for obj in pods:
        assert pod_spec(obj).get("imagePullSecrets") == PULL_SECRETS, obj["metadata"]["name"]
    assert _step_pod(rendered)["spec"]["imagePullSecrets"] == PULL_SECRETS
    assert _spark_defaults(rendered)["spark.kubernetes.container.image.pullSecrets"] == (
        "team-registry"
    )


def test_without_pull_secrets_no_pod_names_any() -> None:
    rendered = _render()
    for obj in rendered.objects:
        if obj["kind"] in WORKLOAD_KINDS:
            assert "imagePullSecrets" not in pod_spec(obj)
    assert "spark.kubernetes.container.image.pullSecrets" not in _spark_defaults(rendered)


@pytest.mark.parametrize(
    "values",
    [
        {"image": {"tag": "latest"}},
        {"image": {"registry": "https://registry.example.com"}},
        {"imagePullSecrets": [{"secret": "team-registry"}]},
        {"imagePullSecrets": ["team-registry"]},
    ],
)
def test_the_schema_should_refuse(values: dict[str, Any]) -> None:
    with pytest.raises(helm.HelmValuesError):
        render(values)


def test_the_makefile_loads_and_pushes_the_chart_s_six_images() -> None:
    """`make kind-load` and `make images-push` name the images from one list, the chart's."""
    mk = (ROOT / "infra" / "kind.mk").read_text()
    (listed,) = re.findall(r"^IMAGES := (.+)$", mk, flags=re.MULTILINE)
    chart_images = render().values["images"]
    assert sorted(listed.split()) == sorted(IMAGES)
    assert set(IMAGES) <= set(COMPONENTS)  # what `make cluster-images` builds (and the tests')
    assert all(chart_images[i]["repository"] == f"lambda-kappa/{i}" for i in IMAGES)
