"""Issue 15, item 8: NetworkPolicies. Kafka, MinIO and Postgres accept connections only from
the components that use them; every other pod of the release only on what it serves."""

from __future__ import annotations

import re

import pytest
import yaml

from tests.charts.chart_utils import (
    ROOT,
    VALUE_SETS,
    WORKLOAD_KINDS,
    Manifest,
    Rendered,
    load_values,
    pod_metadata,
    render,
    render_set,
)

STEP_POD = "spark-step"  # the chart's step pod template: no instance label, matched by part-of
PRODUCER = {"lambda-kappa.io/producer": "true"}  # networkPolicies.producers
EXECUTOR = "spark-executor"
DRIVERS = {"lambda": {"archiver", "speed-layer"}, "kappa": {"kappa-stream"}}
AIRFLOW = {"airflow-api-server", "airflow-dag-processor", "airflow-triggerer", "airflow-db-migrate"}
SCRAPER = "scraper"  # metrics.scrapeFrom's default peer: any Prometheus of any namespace
# Each store's metrics port (tests/charts/test_metrics.py checks them all).
SCRAPE_PORTS = {"kafka": "metrics", "minio": "s3", "postgres": "metrics"}


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _policies_selecting(rendered: Rendered, labels: dict[str, str]) -> list[Manifest]:
    return [
        p
        for p in rendered.of_kind("NetworkPolicy")
        if _matches(p["spec"]["podSelector"].get("matchLabels", {}), labels)
    ]


def _component_labels(rendered: Rendered, component: str) -> dict[str, str]:
    (obj,) = [o for o in rendered.of_kind(*WORKLOAD_KINDS) if _component_of(o) == component]
    return dict(pod_metadata(obj)["labels"])


def _component_of(obj: Manifest) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


def _executor_labels(rendered: Rendered) -> dict[str, str]:
    """The labels Spark gives an executor pod: its template's and spark-defaults.conf's."""
    (config,) = rendered.by_component("ConfigMap", "spark-conf")
    template = yaml.safe_load(config["data"]["executor-pod-template.yaml"])
    labels = dict(template["metadata"]["labels"])
    labels.update(
        re.findall(
            r"^spark\.kubernetes\.executor\.label\.(\S+)\s+(\S+)$",
            config["data"]["spark-defaults.conf"],
            re.MULTILINE,
        )
    )
    return labels


def _step_pod_labels(rendered: Rendered) -> dict[str, str]:
    """The labels of a step pod: its template's (the chart's ConfigMap airflow-step-pod) and the
    step's, which dags/lk_dags/pods.py adds."""
    (config,) = rendered.by_component("ConfigMap", "airflow-step-pod")
    labels = dict(yaml.safe_load(config["data"]["step-pod.yaml"])["metadata"]["labels"])
    assert '"lambda-kappa.io/step": step' in (ROOT / "dags" / "lk_dags" / "pods.py").read_text()
    labels["lambda-kappa.io/step"] = "compute-views"
    return labels


def _peers(rendered: Rendered, component: str) -> dict[str, set[str]]:
    """Port -> the components admitted to `component`'s pods on it ("*": any source)."""
    admitted: dict[str, set[str]] = {}
    for policy in _policies_selecting(rendered, _component_labels(rendered, component)):
        for rule in policy["spec"].get("ingress", []):
            sources = {_source(peer) for peer in rule.get("from", [])} or {"*"}
            for port in rule.get("ports", [{"port": "*"}]):
                admitted.setdefault(str(port["port"]), set()).update(sources)
    return admitted


def _source(peer: Manifest) -> str:
    if "namespaceSelector" in peer:  # any namespace: metrics.scrapeFrom's default
        return SCRAPER
    return str(peer["podSelector"]["matchLabels"].get("app.kubernetes.io/component", "producer"))


def _expected_clients(value_set: str) -> dict[str, set[str]]:
    values = render_set(value_set).values
    architecture = values["architecture"]
    drivers = set()
    for mode in ("lambda", "kappa"):
        if architecture in (mode, "both"):
            drivers |= DRIVERS[mode]
    spark = {"airflow-scheduler"}
    if values["spark"]["master"].startswith("k8s://"):
        spark.add(EXECUTOR)
    if values["airflow"]["sparkBackend"] == "kubernetes":
        spark.add(STEP_POD)
    kafka = {"init"} | drivers | spark
    if architecture == "both" and values["comparison"]["enabled"]:
        kafka.add("comparison")  # its own drivers, in its pod
    logs = set()  # task logs on MinIO: the Airflow components that read or write them
    if values["airflow"]["enabled"] and values["airflow"]["remoteLogging"]["enabled"]:
        logs = {"airflow-api-server", "airflow-dag-processor", "airflow-triggerer"}
    history = {"spark-history"} if values["sparkHistory"]["enabled"] else set()  # event logs
    # Kafka Connect reads Postgres's slot into Kafka; the application (the producers) writes
    # its user table.
    capture = {"connect"} if values["connect"]["enabled"] else set()
    application = {"producer"} if capture else set()
    return {
        "kafka": kafka | {"producer"} | capture,
        "s3": kafka | {"minio-users"} | logs | history,
        "postgres": kafka | {"serving"} | AIRFLOW | capture | application,
    }


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
class TestStores:
    @pytest.mark.parametrize(
        ("store", "port"), [("kafka", "kafka"), ("minio", "s3"), ("postgres", "postgres")]
    )
    def test_should_admit_only_the_components_that_use_it(
        self, value_set: str, store: str, port: str
    ) -> None:
        rendered = render_set(value_set)
        expected = {port: set(_expected_clients(value_set)[port])}
        expected.setdefault(SCRAPE_PORTS[store], set()).add(SCRAPER)  # its metrics
        assert _peers(rendered, store) == expected

    def test_serving_should_reach_postgres_only(self, value_set: str) -> None:
        rendered = render_set(value_set)
        assert "serving" in _peers(rendered, "postgres")["postgres"]
        assert "serving" not in _peers(rendered, "kafka")["kafka"]
        assert "serving" not in _peers(rendered, "minio")["s3"]

    def test_peers_should_be_pods_of_this_release(self, value_set: str) -> None:
        rendered = render_set(value_set)
        release = rendered.values.get("fullnameOverride") or "lk"
        scrapers = rendered.values["metrics"]["scrapeFrom"]  # test_metrics.py checks their rules
        for policy in rendered.of_kind("NetworkPolicy"):
            for rule in policy["spec"].get("ingress", []):
                if rule.get("from") == scrapers:
                    continue
                for peer in rule.get("from", []):
                    assert set(peer) == {"podSelector"}  # this namespace, no ipBlock
                    labels = peer["podSelector"]["matchLabels"]
                    if labels == PRODUCER:
                        assert policy["metadata"]["name"] in ("lk-kafka", "lk-postgres")
                    elif labels["app.kubernetes.io/component"] == STEP_POD:
                        assert _matches(labels, _step_pod_labels(rendered))
                    else:
                        assert labels["app.kubernetes.io/instance"] == release


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_every_pod_of_the_release_should_be_isolated(value_set: str) -> None:
    """A pod no policy selects accepts everything: every workload's pods, and Spark's executor
    pods, are selected (at least by the release's default deny)."""
    rendered = render_set(value_set)
    pods = [dict(pod_metadata(o)["labels"]) for o in rendered.of_kind(*WORKLOAD_KINDS)]
    if rendered.by_component("ConfigMap", "spark-conf"):
        pods.append(_executor_labels(rendered))
    if rendered.by_component("ConfigMap", "airflow-step-pod"):
        pods.append(_step_pod_labels(rendered))  # no instance label: a policy of its own
    for labels in pods:
        assert _policies_selecting(rendered, labels), labels


class TestWhatEachPodServes:
    def test_serving_and_the_airflow_ui_should_be_open_on_their_port_only(self) -> None:
        rendered = render_set("both")
        assert _peers(rendered, "serving") == {"http": {"*"}}
        assert _peers(rendered, "airflow-api-server") == {"api": {"*"}}

    def test_connect_rest_port_should_admit_the_comparison_only(self) -> None:
        """The REST port creates connectors (reads any table the connector's login may): the
        release's is registered from inside the pod; only the comparison Job registers its
        run's own."""
        assert _peers(render_set("both"), "connect") == {
            "rest": {"comparison"},
            "metrics": {SCRAPER},
        }
        assert _peers(render_set("defaults"), "connect") == {"metrics": {SCRAPER}}

    def test_airflow_logs_should_be_read_by_the_api_server_only(self) -> None:
        rendered = render_set("both")
        assert _peers(rendered, "airflow-scheduler") == {"worker-logs": {"airflow-api-server"}}
        assert _peers(rendered, "airflow-triggerer") == {"8794": {"airflow-api-server"}}

    def test_jobs_and_clients_should_accept_nothing(self) -> None:
        rendered = render_set("both")
        for component in ("init", "minio-users", "airflow-db-migrate", "airflow-dag-processor"):
            assert _peers(rendered, component) == {}, component
        for component in ("archiver", "speed-layer", "kappa-stream"):  # local[N]: no executors
            assert _peers(rendered, component) == {"metrics": {SCRAPER}}, component

    def test_spark_drivers_should_accept_their_executors_on_the_callback_ports(self) -> None:
        rendered = render_set("pod-backend")
        for driver in ("archiver", "speed-layer", "kappa-stream"):
            assert _peers(rendered, driver) == {
                "spark-driver": {EXECUTOR},
                "spark-blockmgr": {EXECUTOR},
                "metrics": {SCRAPER},
            }
        assert _peers(rendered, "airflow-scheduler")["spark-driver"] == {EXECUTOR}
        (executors,) = rendered.by_component("NetworkPolicy", EXECUTOR)
        (rule,) = executors["spec"]["ingress"]
        sources = {
            p["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for p in rule["from"]
        }
        assert sources == {
            "archiver",
            "speed-layer",
            "kappa-stream",
            "airflow-scheduler",
            EXECUTOR,
            STEP_POD,
        }
        assert _matches(executors["spec"]["podSelector"]["matchLabels"], _executor_labels(rendered))
        # A step pod is a driver too: its executors alone reach it, on the callback ports.
        step_rules = [
            rule
            for policy in _policies_selecting(rendered, _step_pod_labels(rendered))
            for rule in policy["spec"].get("ingress", [])
        ]
        admitted = {
            str(port["port"]): {_source(peer) for peer in rule["from"]}
            for rule in step_rules
            for port in rule["ports"]
        }
        assert admitted == {"spark-driver": {EXECUTOR}, "spark-blockmgr": {EXECUTOR}}


def test_should_be_switched_off_with_a_value() -> None:
    assert render_set("both").of_kind("NetworkPolicy")
    assert (
        render(load_values(*VALUE_SETS["both"], networkPolicies={"enabled": False})).of_kind(
            "NetworkPolicy"
        )
        == []
    )


def test_producers_should_be_chosen_by_their_labels() -> None:
    """`lk produce` and other producers outside the release reach Kafka only when labelled."""
    custom = render({"networkPolicies": {"producers": [{"team": "ingest"}]}})
    (policy,) = custom.by_component("NetworkPolicy", "kafka")
    peers = [p["podSelector"]["matchLabels"] for p in policy["spec"]["ingress"][0]["from"]]
    assert {"team": "ingest"} in peers and PRODUCER not in peers
    assert _peers(render({"networkPolicies": {"producers": []}}), "kafka") == {
        "kafka": _expected_clients("defaults")["kafka"] - {"producer"},
        "metrics": {SCRAPER},
    }
