"""Issue 44, part 3: the usual scheduling values for every workload, Spark's executors and the
DAGs' step pods included: top-level defaults, each component's own (the official Airflow
chart's habit), rendered by one helper (`lk.pod.*` in _helpers.tpl)."""

from __future__ import annotations

import re
from typing import Any

import pytest
import yaml

from tests.charts.chart_utils import (
    CI_DIR,
    WORKLOAD_KINDS,
    Manifest,
    Rendered,
    containers,
    deep_merge,
    env_of,
    load_values,
    pod_metadata,
    pod_spec,
    render,
    render_set,
)

# Each workload's component label -> its values key (a dotted path).
COMPONENT_VALUES = {
    "kafka": "kafka",
    "connect": "connect",
    "minio": "minio",
    "minio-users": "minio.usersJob",
    "postgres": "postgres",
    "airflow-api-server": "airflow.apiServer",
    "airflow-scheduler": "airflow.scheduler",
    "airflow-dag-processor": "airflow.dagProcessor",
    "airflow-triggerer": "airflow.triggerer",
    "airflow-db-migrate": "airflow.dbMigrate",
    "init": "init",
    "archiver": "archiver",
    "speed-layer": "speedLayer",
    "kappa-stream": "kappaStream",
    "comparison": "comparison",
    "serving": "serving",
    "spark-history": "sparkHistory",
    "statsd-exporter": "statsdExporter",
    "helm-test": "helmTest",
}
# The two pod templates the chart renders for pods others create.
TEMPLATED = {"spark-step": "airflow.stepPods", "spark-executor": "spark.kubernetes"}
EVERYTHING = {"architecture": "both", "airflow": {"sparkBackend": "kubernetes"}}
K8S_MASTER = {"spark": {"master": "k8s://https://kubernetes.default.svc"}}
TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "lk", "effect": "NoSchedule"}
VOLUME = {"name": "certs", "secret": {"secretName": "team-ca"}}
MOUNT = {"name": "certs", "mountPath": "/etc/team-ca", "readOnly": True}
SPREAD = [
    {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "ScheduleAnyway",
        "labelSelector": {"matchLabels": {"app.kubernetes.io/part-of": "lambda-kappa"}},
    }
]
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]}
            ]
        }
    }
}


def _nested(path: str, value: dict[str, Any]) -> dict[str, Any]:
    for key in reversed(path.split(".")):
        value = {key: value}
    return value


def _component(obj: Manifest) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


def _workloads(rendered: Rendered) -> dict[str, Manifest]:
    return {_component(o): o for o in rendered.of_kind(*WORKLOAD_KINDS)}


def _step_pod(rendered: Rendered) -> Manifest:
    (config,) = rendered.by_component("ConfigMap", "airflow-step-pod")
    return dict(yaml.safe_load(config["data"]["step-pod.yaml"]))


def _executor(rendered: Rendered) -> tuple[Manifest, str]:
    """The executors' pod template and spark-defaults.conf."""
    (config,) = rendered.by_component("ConfigMap", "spark-conf")
    template = yaml.safe_load(config["data"]["executor-pod-template.yaml"])
    return dict(template), str(config["data"]["spark-defaults.conf"])


def _pods(rendered: Rendered) -> dict[str, tuple[Manifest, Manifest, Manifest]]:
    """Every pod the chart defines: component -> (metadata, spec, main container)."""
    pods = {
        name: (pod_metadata(o), pod_spec(o), next(containers(o, init=False)))
        for name, o in _workloads(rendered).items()
    }
    step = _step_pod(rendered)
    pods["spark-step"] = (step["metadata"], step["spec"], step["spec"]["containers"][0])
    executor, _ = _executor(rendered)
    pods["spark-executor"] = (
        executor["metadata"],
        executor["spec"],
        executor["spec"]["containers"][0],
    )
    return pods


def test_every_workload_should_have_a_values_key() -> None:
    """No pod escapes the values: each workload of `both` with step and executor pods is in
    COMPONENT_VALUES, and each key there is a component of values.yaml with the six keys."""
    rendered = render({**EVERYTHING, **K8S_MASTER})
    assert set(_workloads(rendered)) == set(COMPONENT_VALUES)
    for path in [*COMPONENT_VALUES.values(), *TEMPLATED.values()]:
        node = rendered.values
        for key in path.split("."):
            node = node[key]
        assert {"nodeSelector", "tolerations", "affinity", "podAnnotations", "podLabels"} <= set(
            node
        ), path
        assert node["extraEnv"] == [], path


def test_defaults_should_reach_every_pod_executors_and_step_pods_included() -> None:
    rendered = render(
        {
            **EVERYTHING,
            **K8S_MASTER,
            "nodeSelector": {"pool": "lk"},
            "tolerations": [TOLERATION],
            "affinity": AFFINITY,
            "priorityClassName": "lk-default",
            "topologySpreadConstraints": SPREAD,
            "podAnnotations": {"example.com/owner": "data"},
            "podLabels": {"example.com/team": "data"},
            "extraEnv": [{"name": "TZ", "value": "UTC"}],
            "extraVolumes": [VOLUME],
            "extraVolumeMounts": [MOUNT],
            "podSecurityContext": {"fsGroupChangePolicy": "OnRootMismatch"},
            "securityContext": {"seccompProfile": {"type": "Localhost", "localhostProfile": "lk"}},
        }
    )
    pods = _pods(rendered)
    assert set(pods) == set(COMPONENT_VALUES) | set(TEMPLATED)
    _, conf = _executor(rendered)
    for name, (meta, spec, main) in pods.items():
        if name == "spark-executor":  # Spark's own setting: it adds the selector to the pod
            assert "spark.kubernetes.executor.node.selector.pool lk" in conf.splitlines()
        else:
            assert spec["nodeSelector"] == {"pool": "lk"}, name
        assert spec["tolerations"] == [TOLERATION], name
        assert spec["affinity"] == AFFINITY, name
        assert spec["priorityClassName"] == "lk-default", name
        assert spec["topologySpreadConstraints"] == SPREAD, name
        assert meta["annotations"]["example.com/owner"] == "data", name
        assert meta["labels"]["example.com/team"] == "data", name
        assert env_of(main)["TZ"]["value"] == "UTC", name
        assert VOLUME in spec["volumes"], name  # beside the chart's own
        assert MOUNT in main["volumeMounts"], name
        # Set over the chart's security contexts, key by key: the chart's other keys stay.
        assert spec["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch", name
        assert spec["securityContext"]["runAsNonRoot"] is True, name
        assert main["securityContext"]["seccompProfile"]["type"] == "Localhost", name
        assert main["securityContext"]["readOnlyRootFilesystem"] is True, name


@pytest.mark.parametrize("component", sorted({**COMPONENT_VALUES, **TEMPLATED}))
def test_a_components_own_values_should_win_for_it_alone(component: str) -> None:
    path = {**COMPONENT_VALUES, **TEMPLATED}[component]
    own = {
        "nodeSelector": {"pool": "own"},
        "tolerations": [{**TOLERATION, "value": "own"}],
        "priorityClassName": "lk-own",
        "topologySpreadConstraints": [{**SPREAD[0], "maxSkew": 2}],
        "podAnnotations": {"example.com/owner": "own", "example.com/own": "yes"},
        "podLabels": {"example.com/team": "own"},
        "extraEnv": [{"name": "TZ", "value": "Europe/Paris"}, {"name": "OWN", "value": "1"}],
        "extraVolumes": [{"name": "own", "emptyDir": {}}],
        "extraVolumeMounts": [{"name": "own", "mountPath": "/own"}],
        "podSecurityContext": {"fsGroupChangePolicy": "Always"},
        "securityContext": {"readOnlyRootFilesystem": False},
    }
    values = load_values(
        **{**EVERYTHING, **K8S_MASTER},
        nodeSelector={"pool": "lk"},
        tolerations=[TOLERATION],
        priorityClassName="lk-default",
        podAnnotations={"example.com/owner": "data", "example.com/all": "yes"},
        podLabels={"example.com/team": "data"},
        extraEnv=[{"name": "TZ", "value": "UTC"}, {"name": "ALL", "value": "1"}],
        extraVolumes=[VOLUME],
        extraVolumeMounts=[MOUNT],
        podSecurityContext={"fsGroupChangePolicy": "OnRootMismatch"},
    )
    pods = _pods(render(deep_merge(values, _nested(path, own))))
    meta, spec, main = pods[component]
    if component != "spark-executor":
        assert spec["nodeSelector"] == {"pool": "own"}
    assert spec["tolerations"] == own["tolerations"]
    assert spec["priorityClassName"] == "lk-own"
    assert spec["topologySpreadConstraints"] == own["topologySpreadConstraints"]
    assert meta["annotations"]["example.com/owner"] == "own"  # merged, its own win
    assert meta["annotations"]["example.com/all"] == "yes"
    assert meta["annotations"]["example.com/own"] == "yes"
    assert meta["labels"]["example.com/team"] == "own"
    names = [e["name"] for e in main.get("env", [])]
    assert names[-3:] == ["ALL", "TZ", "OWN"]  # the defaults' others, then its own
    assert env_of(main)["TZ"]["value"] == "Europe/Paris"
    volumes, mounts = spec["volumes"], main["volumeMounts"]
    own_volume, own_mount = {"name": "own", "emptyDir": {}}, {"name": "own", "mountPath": "/own"}
    assert volumes.index(VOLUME) < volumes.index(own_volume)  # the defaults' first
    assert mounts.index(MOUNT) < mounts.index(own_mount)
    assert spec["securityContext"]["fsGroupChangePolicy"] == "Always"  # its own wins
    assert main["securityContext"]["readOnlyRootFilesystem"] is False
    others = {n: p for n, p in pods.items() if n != component}
    for name, (_, other_spec, other_main) in others.items():
        if name != "spark-executor":
            assert other_spec["nodeSelector"] == {"pool": "lk"}, name
        assert other_spec["priorityClassName"] == "lk-default", name
        assert "topologySpreadConstraints" not in other_spec, name
        assert VOLUME in other_spec["volumes"], name
        assert {"name": "own", "emptyDir": {}} not in other_spec["volumes"], name
        assert other_spec["securityContext"]["fsGroupChangePolicy"] == "OnRootMismatch", name
        assert other_main["securityContext"]["readOnlyRootFilesystem"] is True, name
        assert env_of(other_main)["TZ"]["value"] == "UTC", name


def test_the_executors_node_selector_should_be_sparks_own_setting() -> None:
    rendered = render_set("scheduling")
    template, conf = _executor(rendered)
    selectors = re.findall(
        r"^spark\.kubernetes\.executor\.node\.selector\.(\S+) (\S+)$", conf, re.M
    )
    assert selectors == [("example.com/pool", "spark")]
    assert "nodeSelector" not in template["spec"]
    assert template["spec"]["tolerations"][0]["key"] == "example.com/dedicated"


def test_the_charts_own_labels_and_annotations_should_stay() -> None:
    """Selectors, NetworkPolicies and scrapers match on the chart's labels and annotations: a
    user's value of the same key changes nothing."""
    rendered = render(
        {
            "architecture": "both",
            "podLabels": {"app.kubernetes.io/component": "mine", "app.kubernetes.io/instance": "x"},
            "podAnnotations": {"prometheus.io/port": "1"},
            "serving": {"extraEnv": [{"name": "LK_SERVE_PORT", "value": "1"}]},
        }
    )
    for name, obj in _workloads(rendered).items():
        labels = pod_metadata(obj)["labels"]
        assert labels["app.kubernetes.io/component"] == name
        assert labels["app.kubernetes.io/instance"] == "lk"
    (kafka,) = rendered.by_component("StatefulSet", "kafka")
    assert pod_metadata(kafka)["annotations"]["prometheus.io/port"] == "9404"
    # extraEnv comes after the chart's own: Kubernetes keeps the last, the user's.
    (serving,) = rendered.by_component("Deployment", "serving")
    names = [e["name"] for e in next(containers(serving, init=False))["env"]]
    assert names.index("LK_SERVE_PORT") < len(names) - 1 and names[-1] == "LK_SERVE_PORT"


def test_the_example_should_place_the_stores_and_spread_serving() -> None:
    rendered = render(load_values(CI_DIR / "scheduling-values.yaml"))
    pods = _pods(rendered)
    assert pods["kafka"][1]["nodeSelector"] == {"example.com/disk": "local-ssd"}
    assert pods["postgres"][1]["nodeSelector"] == {"example.com/pool": "lambda-kappa"}
    assert "podAntiAffinity" in pods["serving"][1]["affinity"]
    assert env_of(pods["serving"][2])["TZ"]["value"] == "Europe/Paris"
    assert pods["spark-step"][0]["annotations"] == {"example.com/cost-center": "batch"}
