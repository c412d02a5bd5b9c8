"""Issue 43: metrics from every long-running component. Each scrapeable pod announces itself
with `prometheus.io/*` annotations that name one of its own named ports; the Prometheus
Operator's monitors appear only when asked and select the same ports; the NetworkPolicies
admit the scrapers to each of them; metrics.enabled=false takes all of it away."""

from __future__ import annotations

import re
from typing import Any

import helm_python as helm
import pytest
import yaml

from tests.charts.chart_utils import (
    CHART_DIR,
    CI_DIR,
    KUBE_VERSIONS,
    NAMESPACE,
    ROOT,
    VALUE_SETS,
    WORKLOAD_KINDS,
    Manifest,
    Rendered,
    containers,
    env_of,
    load_values,
    pod_metadata,
    pod_spec,
    render,
    render_set,
    validate,
)

# The fixed contract (../shared rules of issue 43; docs/METRICS.md): component -> the named
# container port, its number and the path.
TARGETS: dict[str, tuple[str, int, str]] = {
    "archiver": ("metrics", 9108, "/metrics"),
    "speed-layer": ("metrics", 9108, "/metrics"),
    "kappa-stream": ("metrics", 9108, "/metrics"),
    "serving": ("http", 8000, "/metrics"),
    "kafka": ("metrics", 9404, "/metrics"),
    "connect": ("metrics", 9404, "/metrics"),
    "minio": ("s3", 9000, "/minio/v2/metrics/cluster"),
    "postgres": ("metrics", 9187, "/metrics"),
    "statsd-exporter": ("metrics", 9102, "/metrics"),
}
BY_SERVICE = {"serving", "statsd-exporter"}  # ServiceMonitors; the rest PodMonitors
AIRFLOW = ("airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer")
SERVICE_MONITOR_VALUES = CI_DIR / "service-monitor-values.yaml"
CLUSTER_VALUES = ROOT / "infra" / "cluster" / "values.yaml"
MONITOR_KINDS = ("PodMonitor", "ServiceMonitor")
# The fields of monitoring.coreos.com/v1 the chart renders (no CRD schema is vendored here).
ENDPOINT_FIELDS = {"port", "path", "interval", "scrapeTimeout"}
SPEC_FIELDS = {
    "PodMonitor": {"selector", "namespaceSelector", "podMetricsEndpoints"},
    "ServiceMonitor": {"selector", "namespaceSelector", "endpoints"},
}

# metrics.scrapeFrom's default: the pods named prometheus, in any namespace
SCRAPE_FROM = {
    "namespaceSelector": {},
    "podSelector": {"matchLabels": {"app.kubernetes.io/name": "prometheus"}},
}


def _component(obj: Manifest) -> str:
    return str(obj["metadata"]["labels"]["app.kubernetes.io/component"])


def _workload(rendered: Rendered, component: str) -> Manifest:
    (obj,) = [
        o for o in rendered.of_kind("Deployment", "StatefulSet") if _component(o) == component
    ]
    return obj


def _named_ports(obj: Manifest) -> dict[str, Manifest]:
    return {p["name"]: p for c in containers(obj, init=False) for p in c.get("ports", [])}


def _container(obj: Manifest, name: str) -> Manifest:
    (found,) = [c for c in containers(obj, init=False) if c["name"] == name]
    return found


def _expected_targets(rendered: Rendered) -> set[str]:
    values = rendered.values
    expected = {"serving"}
    if values["architecture"] in ("lambda", "both"):
        expected |= {"archiver", "speed-layer"}
    if values["architecture"] in ("kappa", "both"):
        expected.add("kappa-stream")
    for service in ("kafka", "connect", "minio", "postgres"):
        if values[service]["enabled"]:
            expected.add(service)
    if values["airflow"]["enabled"]:
        expected.add("statsd-exporter")
    return expected


def _scraped(rendered: Rendered) -> dict[str, Manifest]:
    """component -> workload, for every pod template that asks to be scraped."""
    return {
        _component(o): o
        for o in rendered.of_kind(*WORKLOAD_KINDS)
        if pod_metadata(o).get("annotations", {}).get("prometheus.io/scrape") == "true"
    }


def _matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())


def _admitted(rendered: Rendered, component: str) -> list[tuple[Manifest, Any]]:
    """(port, peers) of every ingress rule of the policies that select `component`'s pods."""
    labels = pod_metadata(_workload(rendered, component))["labels"]
    found = []
    for policy in rendered.of_kind("NetworkPolicy"):
        if _matches(policy["spec"]["podSelector"]["matchLabels"], labels):
            for rule in policy["spec"].get("ingress", []):
                found += [(port, rule.get("from")) for port in rule.get("ports", [])]
    return found


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
class TestScrapeablePods:
    def test_every_target_should_carry_the_annotations(self, value_set: str) -> None:
        rendered = render_set(value_set)
        scraped = _scraped(rendered)
        assert set(scraped) == _expected_targets(rendered)
        for component, obj in scraped.items():
            _, number, path = TARGETS[component]
            annotations = pod_metadata(obj)["annotations"]
            assert annotations["prometheus.io/port"] == str(number), component
            assert annotations["prometheus.io/path"] == path, component

    def test_annotated_port_should_be_a_named_port_of_the_pod(self, value_set: str) -> None:
        rendered = render_set(value_set)
        for component, obj in _scraped(rendered).items():
            name, number, _ = TARGETS[component]
            port = _named_ports(obj).get(name)
            assert port, (component, name)
            assert port["containerPort"] == number, component
            assert port.get("protocol", "TCP") == "TCP", component

    def test_network_policies_should_admit_the_scrapers_to_each_port(self, value_set: str) -> None:
        rendered = render_set(value_set)
        scrapers = rendered.values["metrics"]["scrapeFrom"]
        assert scrapers == [SCRAPE_FROM]  # the Prometheus pods of any namespace
        for component in _scraped(rendered):
            name = TARGETS[component][0]
            admitted = _admitted(rendered, component)
            # serving's http port is open to every source already.
            open_to_all = [p for p, peers in admitted if p["port"] == name and peers is None]
            by_scrapers = [p for p, peers in admitted if p["port"] == name and peers == scrapers]
            assert by_scrapers or (component == "serving" and open_to_all), component


class TestStreamDrivers:
    @pytest.mark.parametrize("component", ["archiver", "speed-layer", "kappa-stream"])
    def test_should_serve_on_the_port_lk_metrics_port_names(self, component: str) -> None:
        obj = _workload(render_set("both"), component)
        main = next(containers(obj, init=False))
        assert env_of(main)["LK_METRICS_PORT"]["value"] == "9108"
        assert env_of(main)["LK_METRICS_HOST"]["value"] == "0.0.0.0"  # scraped on the pod IP
        assert {"name": "metrics", "containerPort": 9108} in main["ports"]

    def test_spark_on_kubernetes_should_keep_the_call_back_ports_beside_it(self) -> None:
        obj = _workload(render_set("spark-kubernetes"), "kappa-stream")
        assert set(_named_ports(obj)) == {"metrics", "spark-driver", "spark-blockmgr"}
        annotations = pod_metadata(obj)["annotations"]
        assert "checksum/spark-conf" in annotations and "prometheus.io/scrape" in annotations


class TestKafka:
    def test_broker_should_run_the_jmx_exporter_agent_on_its_metrics_port(self) -> None:
        rendered = render_set("defaults")
        kafka = _workload(rendered, "kafka")
        broker = _container(kafka, "kafka")
        agents = [a for a in broker["command"] if a.startswith("-javaagent:")]
        assert agents == [
            "-javaagent:/opt/jmx-exporter/jmx_prometheus_javaagent.jar"
            "=9404:/etc/kafka-metrics/jmx-exporter.yaml"
        ]
        # Before the main class: JVM options after it would be the broker's arguments.
        assert broker["command"].index(agents[0]) < broker["command"].index("kafka.Kafka")
        mounts = {m["mountPath"]: m["name"] for m in broker["volumeMounts"]}
        volumes = {v["name"]: v for v in pod_spec(kafka)["volumes"]}
        assert volumes[mounts["/etc/kafka-metrics"]]["configMap"]["name"] == "lk-kafka-metrics"

    def test_image_should_hold_the_agent_where_the_chart_looks(self) -> None:
        dockerfile = (ROOT / "infra" / "docker" / "kafka.Dockerfile").read_text()
        pom = (ROOT / "infra" / "maven" / "jmx-exporter.pom.xml").read_text()
        assert "<artifactId>jmx_prometheus_javaagent</artifactId>" in pom
        assert "-DoutputDirectory=/opt/jmx-exporter" in dockerfile
        assert "-Dmdep.stripVersion=true" in dockerfile  # jmx_prometheus_javaagent.jar
        assert "COPY --from=jars /opt/jmx-exporter /opt/jmx-exporter" in dockerfile

    def test_exporter_should_read_only_the_mbeans_it_exports(self) -> None:
        """Reading every MBean costs the broker ~180 ms of CPU per scrape (measured); the
        listed ones ~18 ms. Each rule's MBeans must be included, or it exports nothing."""
        config = yaml.safe_load(
            render_set("defaults").named("ConfigMap", "lk-kafka-metrics")["data"][
                "jmx-exporter.yaml"
            ]
        )
        included = config["includeObjectNames"]
        assert included and all(not name.startswith("*") for name in included)
        domains = {name.split(":")[0] for name in included}
        assert domains == {"kafka.server", "kafka.controller", "kafka.network", "kafka.log"}
        names = {rule["name"] for rule in config["rules"]}
        for wanted in (
            "kafka_server_brokertopicmetrics_$1_total",  # messages, bytes in and out
            "kafka_$1_$2_$3",  # under-replicated partitions, offline partitions
            "kafka_network_requestmetrics_totaltimems",  # request latency
            "kafka_log_log_$1",  # log end offsets per partition
        ):
            assert wanted in names
        assert "kafka.log:type=Log,name=LogEndOffset,*" in included
        assert "kafka.log:type=Log,topic=__consumer_offsets,*" in config["excludeObjectNames"]

    def test_a_changed_exporter_config_should_restart_the_broker(self) -> None:
        default = pod_metadata(_workload(render({}), "kafka"))["annotations"]
        assert "checksum/metrics" in default


class TestConnect:
    def test_worker_should_run_the_jmx_exporter_agent_on_its_metrics_port(self) -> None:
        connect = _workload(render_set("defaults"), "connect")
        worker = _container(connect, "connect")
        agents = [a for a in worker["command"] if a.startswith("-javaagent:")]
        assert agents == [
            "-javaagent:/opt/jmx-exporter/jmx_prometheus_javaagent.jar"
            "=9404:/etc/connect-metrics/jmx-exporter.yaml"
        ]
        main_class = "org.apache.kafka.connect.cli.ConnectDistributed"
        assert worker["command"].index(agents[0]) < worker["command"].index(main_class)
        mounts = {m["mountPath"]: m["name"] for m in worker["volumeMounts"]}
        volumes = {v["name"]: v for v in pod_spec(connect)["volumes"]}
        assert volumes[mounts["/etc/connect-metrics"]]["configMap"]["name"] == (
            "lk-connect-metrics"
        )
        assert "checksum/metrics" in pod_metadata(connect)["annotations"]

    def test_exporter_should_read_only_the_mbeans_it_exports(self) -> None:
        config = yaml.safe_load(
            render_set("defaults").named("ConfigMap", "lk-connect-metrics")["data"][
                "jmx-exporter.yaml"
            ]
        )
        included = config["includeObjectNames"]
        assert included and all(not name.startswith("*") for name in included)
        assert {name.split(":")[0] for name in included} == {"kafka.connect", "debezium.postgres"}
        names = {rule["name"] for rule in config["rules"]}
        for wanted in (
            "kafka_connect_worker_connector_tasks",  # tasks by state: the alert's
            "kafka_connect_source_task_records_$3_total",  # records polled and written
            "debezium_streaming_connected",
            "debezium_streaming_milliseconds_behind_source",
        ):
            assert wanted in names
        (tasks,) = [
            r for r in config["rules"] if r["name"] == "kafka_connect_worker_connector_tasks"
        ]
        assert set(tasks["labels"]) == {"connector", "state"}

    def test_connect_enabled_false_should_leave_no_target(self) -> None:
        rendered = render({"connect": {"enabled": False}})
        assert "connect" not in _scraped(rendered)
        assert not [o for o in rendered.objects if o["metadata"]["name"] == "lk-connect-metrics"]


class TestMinio:
    def test_should_serve_its_cluster_metrics_without_a_token(self) -> None:
        minio = _container(_workload(render_set("defaults"), "minio"), "minio")
        assert env_of(minio)["MINIO_PROMETHEUS_AUTH_TYPE"]["value"] == "public"


class TestPostgres:
    @pytest.fixture
    def rendered(self) -> Rendered:
        return render_set("defaults")

    def test_exporter_should_be_a_sidecar_of_the_postgres_image(self, rendered: Rendered) -> None:
        pod = _workload(rendered, "postgres")
        server, exporter = (_container(pod, "postgres"), _container(pod, "exporter"))
        assert exporter["image"] == server["image"]
        assert exporter["command"] == ["prometheus-postgres-exporter"]
        assert "--web.listen-address=:9187" in exporter["args"]
        env = env_of(exporter)
        assert env["DATA_SOURCE_URI"]["value"] == "127.0.0.1:5432/serving?sslmode=disable"
        assert env["DATA_SOURCE_USER"]["value"] == "lk_monitor"
        assert env["DATA_SOURCE_PASS"]["valueFrom"]["secretKeyRef"]["key"] == (
            "monitoring-postgres-password"
        )
        # The exporter never holds the owner's password.
        keys = {e["valueFrom"]["secretKeyRef"]["key"] for e in exporter["env"] if "valueFrom" in e}
        assert keys == {"monitoring-postgres-password"}

    def test_start_script_should_make_a_pg_monitor_login_on_every_start(
        self, rendered: Rendered
    ) -> None:
        scripts = rendered.named("ConfigMap", "lk-postgres-scripts")["data"]
        start = scripts["start.sh"]
        assert 'if [ -n "${MONITORING_PASSWORD:-}" ]' in start
        assert "--file=/opt/lk/postgres/monitoring.sql" in start
        # After the first-start block and before the server: on every start.
        assert start.index("monitoring.sql") > start.index("cluster initialized")
        lines = start.rstrip().splitlines()
        (last,) = [n for n, line in enumerate(lines) if line.startswith("exec postgres")]
        assert lines[last].startswith("exec postgres -D \"$PGDATA\" -c listen_addresses='*'")
        # The server is the script's last command (its options continued over lines).
        assert all(line.endswith("\\") for line in lines[last:-1])
        sql = scripts["monitoring.sql"]
        assert 'GRANT pg_monitor TO :"user";' in sql
        assert "PASSWORD :'pw'" in sql and "NOSUPERUSER" in sql
        server = env_of(_container(_workload(rendered, "postgres"), "postgres"))
        assert server["MONITORING_USER"]["value"] == "lk_monitor"
        assert server["MONITORING_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == (
            "monitoring-postgres-password"
        )

    def test_exporter_should_export_the_replication_slots_retained_wal(
        self, rendered: Rendered
    ) -> None:
        """The extra query (--extend.query-path) behind the dashboard's change data capture row
        and the alert LambdaKappaReplicationSlotWalHigh: postgres_exporter names each value
        column <query>_<column> and keeps the LABEL columns as labels."""
        scripts = rendered.named("ConfigMap", "lk-postgres-scripts")["data"]
        queries = yaml.safe_load(scripts["queries.yaml"])
        columns = {
            f"{query}_{column}": usage["usage"]
            for query, spec in queries.items()
            for metric in spec["metrics"]
            for column, usage in metric.items()
        }
        assert columns["pg_replication_slot_retained_bytes"] == "GAUGE"
        assert columns["pg_replication_slot_active"] == "GAUGE"
        assert columns["pg_replication_slot_slot_name"] == "LABEL"
        exporter = _container(_workload(rendered, "postgres"), "exporter")
        (flag,) = [a for a in exporter["args"] if a.startswith("--extend.query-path=")]
        mounts = {m["mountPath"]: m["name"] for m in exporter["volumeMounts"]}
        path = flag.split("=", 1)[1]
        assert path.rsplit("/", 1) == ["/opt/lk/postgres", "queries.yaml"]
        volumes = {v["name"]: v for v in pod_spec(_workload(rendered, "postgres"))["volumes"]}
        assert volumes[mounts["/opt/lk/postgres"]]["configMap"]["name"] == "lk-postgres-scripts"

    def test_image_should_carry_debian_s_exporter(self) -> None:
        dockerfile = (ROOT / "infra" / "docker" / "postgres.Dockerfile").read_text()
        assert "prometheus-postgres-exporter" in dockerfile


class TestAirflowStatsd:
    @pytest.fixture
    def rendered(self) -> Rendered:
        return render_set("both")

    @pytest.mark.parametrize("component", AIRFLOW)
    def test_every_airflow_component_should_send_to_the_exporter(
        self, rendered: Rendered, component: str
    ) -> None:
        env = env_of(next(containers(_workload(rendered, component), init=False)))
        (service,) = rendered.by_component("Service", "statsd-exporter")
        (udp,) = [p for p in service["spec"]["ports"] if p["name"] == "statsd"]
        assert env["AIRFLOW__METRICS__STATSD_ON"]["value"] == "True"
        assert env["AIRFLOW__METRICS__STATSD_HOST"]["value"] == service["metadata"]["name"]
        assert env["AIRFLOW__METRICS__STATSD_PORT"]["value"] == str(udp["port"])
        assert udp["protocol"] == "UDP"
        # Tags as labels, one name per metric.
        assert env["AIRFLOW__METRICS__STATSD_INFLUXDB_ENABLED"]["value"] == "True"
        assert env["AIRFLOW__METRICS__LEGACY_NAMES_ON"]["value"] == "False"

    def test_exporter_should_listen_where_its_service_points(self, rendered: Rendered) -> None:
        exporter = _workload(rendered, "statsd-exporter")
        main = _container(exporter, "statsd-exporter")
        assert "--statsd.listen-udp=:9125" in main["args"]
        assert "--web.listen-address=:9102" in main["args"]
        ports = _named_ports(exporter)
        assert ports["statsd"] == {"name": "statsd", "containerPort": 9125, "protocol": "UDP"}
        (service,) = rendered.by_component("Service", "statsd-exporter")
        for port in service["spec"]["ports"]:
            assert port["targetPort"] in ports
        assert main["image"] == "lambda-kappa/statsd:0.1.0"

    def test_mappings_should_give_prometheus_names(self, rendered: Rendered) -> None:
        (config,) = rendered.by_component("ConfigMap", "statsd-exporter")
        mappings = yaml.safe_load(config["data"]["mappings.yaml"])
        names = {m["match"]: m["name"] for m in mappings["mappings"]}
        assert names["airflow.dagrun.duration.*"] == "airflow_dagrun_duration_seconds"
        assert names["airflow.task.duration"] == "airflow_task_duration_seconds"
        assert names["airflow.ti.finish"] == "airflow_ti_finish_total"
        assert mappings["defaults"]["observer_type"] == "histogram"
        for name in names.values():
            assert re.fullmatch(r"airflow_[a-z_]+", name), name

    def test_only_airflow_should_reach_the_statsd_port(self, rendered: Rendered) -> None:
        udp = [
            (p, peers)
            for p, peers in _admitted(rendered, "statsd-exporter")
            if p["port"] == "statsd"
        ]
        ((port, peers),) = udp
        assert port["protocol"] == "UDP"
        sources = {
            peer["podSelector"]["matchLabels"]["app.kubernetes.io/component"] for peer in peers
        }
        assert sources == set(AIRFLOW)

    def test_kappa_without_airflow_should_have_no_exporter(self) -> None:
        rendered = render({"architecture": "kappa", "airflow": {"enabled": False}})
        assert rendered.by_component("Deployment", "statsd-exporter") == []
        assert "statsd-exporter" not in _scraped(rendered)


class TestScrapeFrom:
    def test_should_admit_the_given_peers(self) -> None:
        monitoring = [
            {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mon"}}}
        ]
        rendered = render({"metrics": {"scrapeFrom": monitoring}})
        for component in ("kafka", "postgres", "minio"):
            name = TARGETS[component][0]
            assert (
                {"port": name, "protocol": "TCP"},
                monitoring,
            ) in _admitted(rendered, component), component

    def test_empty_should_add_no_rule_rather_than_admit_everyone(self) -> None:
        rendered = render({"metrics": {"scrapeFrom": []}})
        for component in ("kafka", "postgres", "statsd-exporter", "speed-layer"):
            for port, peers in _admitted(rendered, component):
                assert port["port"] != "metrics" and peers, component
        assert rendered.by_component("NetworkPolicy", "speed-layer") == []  # default deny only


class TestMonitors:
    def test_should_not_be_rendered_by_default(self) -> None:
        for value_set in VALUE_SETS:
            assert render_set(value_set).of_kind(*MONITOR_KINDS) == [], value_set

    @pytest.fixture
    def rendered(self) -> Rendered:
        return render(load_values(SERVICE_MONITOR_VALUES))

    def test_should_cover_every_target_once(self, rendered: Rendered) -> None:
        monitors = rendered.of_kind(*MONITOR_KINDS)
        by_component = {_component(m): m for m in monitors}
        assert len(by_component) == len(monitors)
        assert set(by_component) == _expected_targets(rendered) == set(TARGETS)
        for component, monitor in by_component.items():
            kind = "ServiceMonitor" if component in BY_SERVICE else "PodMonitor"
            assert monitor["kind"] == kind, component
            assert monitor["apiVersion"] == "monitoring.coreos.com/v1"

    def test_pod_monitors_should_select_the_pods_and_their_named_port(
        self, rendered: Rendered
    ) -> None:
        for monitor in rendered.of_kind("PodMonitor"):
            component = _component(monitor)
            pod = _workload(rendered, component)
            assert _matches(monitor["spec"]["selector"]["matchLabels"], pod_metadata(pod)["labels"])
            (endpoint,) = monitor["spec"]["podMetricsEndpoints"]
            name, number, path = TARGETS[component]
            assert endpoint["port"] == name and endpoint["path"] == path
            assert _named_ports(pod)[name]["containerPort"] == number

    def test_service_monitors_should_select_the_service_and_its_port(
        self, rendered: Rendered
    ) -> None:
        for monitor in rendered.of_kind("ServiceMonitor"):
            component = _component(monitor)
            services = [
                s
                for s in rendered.of_kind("Service")
                if _matches(monitor["spec"]["selector"]["matchLabels"], s["metadata"]["labels"])
            ]
            (service,) = services
            (endpoint,) = monitor["spec"]["endpoints"]
            name, number, path = TARGETS[component]
            assert endpoint["port"] == name and endpoint["path"] == path
            (port,) = [p for p in service["spec"]["ports"] if p["name"] == name]
            assert port["targetPort"] == name
            assert _named_ports(_workload(rendered, component))[name]["containerPort"] == number

    def test_should_carry_the_values_labels_interval_and_namespace(
        self, rendered: Rendered
    ) -> None:
        monitor_values = rendered.values["metrics"]["serviceMonitor"]
        for monitor in rendered.of_kind(*MONITOR_KINDS):
            assert set(monitor["spec"]) == SPEC_FIELDS[monitor["kind"]]
            for key, value in monitor_values["labels"].items():
                assert monitor["metadata"]["labels"][key] == value
            assert monitor["spec"]["namespaceSelector"] == {"matchNames": [NAMESPACE]}
            endpoints = monitor["spec"].get("podMetricsEndpoints") or monitor["spec"]["endpoints"]
            for endpoint in endpoints:
                assert set(endpoint) == ENDPOINT_FIELDS
                assert endpoint["interval"] == monitor_values["interval"]
                assert endpoint["scrapeTimeout"] == monitor_values["scrapeTimeout"]

    def test_example_values_should_lint_and_validate(self, rendered: Rendered) -> None:
        report = helm.lint(
            CHART_DIR,
            load_values(SERVICE_MONITOR_VALUES),
            strict=True,
            namespace=NAMESPACE,
            kube_version=f"v{KUBE_VERSIONS[0]}.0",
        )
        assert report["errors"] == [], report
        assert [m for m in report["messages"] if m["severity"] >= 2] == []
        for obj in rendered.objects:
            if obj["kind"] not in MONITOR_KINDS:
                validate(obj, KUBE_VERSIONS[-1])


class TestMetricsDisabled:
    @pytest.fixture
    def rendered(self) -> Rendered:
        return render(load_values(SERVICE_MONITOR_VALUES, metrics={"enabled": False}))

    def test_should_remove_every_annotation_port_and_exporter(self, rendered: Rendered) -> None:
        assert _scraped(rendered) == {}
        assert rendered.of_kind(*MONITOR_KINDS) == []
        assert rendered.by_component("Deployment", "statsd-exporter") == []
        for name in ("lk-kafka-metrics", "lk-connect-metrics"):
            assert [o for o in rendered.objects if o["metadata"]["name"] == name] == []
        for obj in rendered.of_kind(*WORKLOAD_KINDS):
            for c in containers(obj):
                assert c["name"] != "exporter"
                assert "metrics" not in {p["name"] for p in c.get("ports", [])}, c["name"]
                env = env_of(c)
                assert "LK_METRICS_PORT" not in env and "AIRFLOW__METRICS__STATSD_ON" not in env
                assert "MINIO_PROMETHEUS_AUTH_TYPE" not in env
                assert not any(str(a).startswith("-javaagent:") for a in c.get("command", []))

    def test_should_remove_the_scrape_rules(self, rendered: Rendered) -> None:
        for policy in rendered.of_kind("NetworkPolicy"):
            for rule in policy["spec"].get("ingress", []):
                assert rule.get("from") != [SCRAPE_FROM], policy["metadata"]["name"]


def test_cluster_values_should_give_every_new_container_a_small_request() -> None:
    """infra/cluster/values.yaml: one 2-CPU node; an exporter asks 5m."""
    values = load_values(CLUSTER_VALUES, architecture="both")
    rendered = render(values)
    exporter = _container(_workload(rendered, "postgres"), "exporter")
    statsd = _container(_workload(rendered, "statsd-exporter"), "statsd-exporter")
    assert exporter["resources"]["requests"]["cpu"] == "5m"
    assert statsd["resources"]["requests"]["cpu"] == "5m"
