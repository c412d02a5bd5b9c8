"""What each architecture deploys: Kappa has no archiver, no batch RBAC, no batch DAG wiring
and keeps `events` forever; Lambda has the archiver, the speed layer and the batch wiring;
`both` has both."""

from __future__ import annotations

import pytest

from tests.charts.chart_utils import (
    CI_DIR,
    ROOT,
    VALUE_SETS,
    Rendered,
    containers,
    env_of,
    load_values,
    pod_metadata,
    pod_spec,
    render,
    render_set,
)

LAMBDA_ONLY = {"archiver", "speed-layer"}
KAPPA_ONLY = {"kappa-stream"}
ALWAYS = {
    "kafka",
    "minio",
    "postgres",
    "serving",
    "airflow-api-server",
    "airflow-scheduler",
    "airflow-dag-processor",
    "airflow-triggerer",
    "spark-history",
    "statsd-exporter",  # Airflow's metrics (metrics.enabled, the default)
    "connect",  # change data capture (connect.enabled, the default)
}


def _env(rendered: Rendered, component: str, kind: str = "Deployment") -> dict[str, str]:
    (workload,) = rendered.by_component(kind, component)
    main = next(containers(workload, init=False))
    return {k: v.get("value", "<from secret>") for k, v in env_of(main).items()}


def _args(rendered: Rendered, component: str) -> list[str]:
    (workload,) = rendered.by_component("Deployment", component)
    return list(next(containers(workload, init=False))["args"])


def _init_job(rendered: Rendered) -> dict:
    (job,) = rendered.by_component("Job", "init")
    return job


class TestKappa:
    @pytest.fixture
    def rendered(self) -> Rendered:
        return render_set("kappa")  # cached: one render for the class

    def test_should_deploy_the_stream_job_and_no_lambda_component(self, rendered: Rendered) -> None:
        deployed = rendered.components("Deployment", "StatefulSet")
        assert deployed == ALWAYS | KAPPA_ONLY
        assert _args(rendered, "kappa-stream") == ["lk", "stream", "--architecture", "kappa"]

    def test_should_have_no_batch_rbac(self, rendered: Rendered) -> None:
        assert rendered.of_kind("Role", "RoleBinding", "ServiceAccount") == []
        scheduler = rendered.by_component("Deployment", "airflow-scheduler")[0]
        assert "serviceAccountName" not in scheduler["spec"]["template"]["spec"]

    def test_should_not_wire_the_batch_dag_in_airflow(self, rendered: Rendered) -> None:
        for component in ("airflow-scheduler", "airflow-dag-processor", "airflow-api-server"):
            env = _env(rendered, component)
            assert env["LK_ARCHITECTURE"] == "kappa"
            assert "LK_BATCH_SCHEDULE" not in env

    def test_should_schedule_data_quality_as_the_values_say(self) -> None:
        """`data_quality` runs in kappa too: without LK_DQ_SCHEDULE its DAG took the setting's
        default, hourly, whatever `dataQuality.schedule` said (a run started by an upgrade to
        kappa outlived the release's uninstall, its step pod waiting for the operator)."""
        for schedule in ("", "@daily"):
            values = load_values(*VALUE_SETS["kappa"], dataQuality={"schedule": schedule})
            rendered = render(values)
            for component in ("airflow-scheduler", "airflow-dag-processor"):
                assert _env(rendered, component)["LK_DQ_SCHEDULE"] == schedule, component

    def test_should_keep_events_forever_even_with_a_lambda_retention(self) -> None:
        rendered = render({"architecture": "kappa", "kafka": {"lambdaEventsRetentionMs": 3600000}})
        job = _init_job(rendered)
        assert job["metadata"]["annotations"]["lambda-kappa.io/events-retention-ms"] == "-1"
        env = _env(rendered, "init", kind="Job")
        assert env["LK_ARCHITECTURE"] == "kappa"
        assert "LK_LAMBDA_EVENTS_RETENTION_MS" not in env

    def test_should_serve_kappa(self, rendered: Rendered) -> None:
        assert _args(rendered, "serving")[:4] == ["lk", "serve", "--architecture", "kappa"]


class TestLambda:
    @pytest.fixture
    def rendered(self) -> Rendered:
        return render_set("lambda")

    def test_should_deploy_archiver_and_speed_layer_but_no_kappa_job(
        self, rendered: Rendered
    ) -> None:
        assert rendered.components("Deployment", "StatefulSet") == ALWAYS | LAMBDA_ONLY
        assert _args(rendered, "archiver") == ["lk", "archive"]
        assert _args(rendered, "speed-layer") == ["lk", "stream", "--architecture", "lambda"]

    def test_should_bind_the_spark_role_to_the_batch_service_account(
        self, rendered: Rendered
    ) -> None:
        (role,) = rendered.of_kind("Role")
        resources = set(role["rules"][0]["resources"])
        assert {"pods", "services", "configmaps", "persistentvolumeclaims"} <= resources
        assert "create" in role["rules"][0]["verbs"]
        (binding,) = rendered.of_kind("RoleBinding")
        (account,) = rendered.of_kind("ServiceAccount")
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "Role",
            "name": role["metadata"]["name"],
        }
        assert binding["subjects"][0]["name"] == account["metadata"]["name"]
        assert rendered.of_kind("ClusterRole", "ClusterRoleBinding") == []
        scheduler = rendered.by_component("Deployment", "airflow-scheduler")[0]
        spec = scheduler["spec"]["template"]["spec"]
        assert spec["serviceAccountName"] == account["metadata"]["name"]
        # local[2]: the batch driver needs no API access, so no token is mounted.
        assert spec["automountServiceAccountToken"] is False

    def test_should_wire_the_batch_dag_in_airflow(self, rendered: Rendered) -> None:
        env = _env(rendered, "airflow-scheduler")
        assert env["LK_ARCHITECTURE"] == "lambda"
        assert env["LK_BATCH_SCHEDULE"] == "@hourly"

    def test_should_pass_the_finite_lambda_retention_to_init(self, rendered: Rendered) -> None:
        job = _init_job(rendered)
        assert job["metadata"]["annotations"]["lambda-kappa.io/events-retention-ms"] == "604800000"
        assert _env(rendered, "init", kind="Job")["LK_LAMBDA_EVENTS_RETENTION_MS"] == "604800000"

    def test_should_keep_events_forever_by_default(self) -> None:
        job = _init_job(render({"architecture": "lambda"}))
        assert job["metadata"]["annotations"]["lambda-kappa.io/events-retention-ms"] == "-1"


class TestBoth:
    @pytest.fixture
    def rendered(self) -> Rendered:
        return render_set("both")

    def test_should_deploy_every_component(self, rendered: Rendered) -> None:
        expected = ALWAYS | LAMBDA_ONLY | KAPPA_ONLY
        assert rendered.components("Deployment", "StatefulSet") == expected

    def test_should_have_batch_rbac_and_batch_wiring(self, rendered: Rendered) -> None:
        assert rendered.by_component("ServiceAccount", "spark-batch")
        assert rendered.by_component("RoleBinding", "spark-batch")
        assert _env(rendered, "airflow-scheduler")["LK_BATCH_SCHEDULE"] == "@hourly"

    def test_should_keep_events_forever(self, rendered: Rendered) -> None:
        job = _init_job(rendered)
        assert job["metadata"]["annotations"]["lambda-kappa.io/events-retention-ms"] == "-1"
        assert "LK_LAMBDA_EVENTS_RETENTION_MS" not in _env(rendered, "init", kind="Job")

    def test_should_serve_both(self, rendered: Rendered) -> None:
        assert _args(rendered, "serving")[:4] == ["lk", "serve", "--architecture", "both"]


class TestSparkOnKubernetes:
    @pytest.fixture
    def rendered(self) -> Rendered:
        return render_set("spark-kubernetes")

    def test_should_run_the_stream_driver_with_the_spark_service_account(
        self, rendered: Rendered
    ) -> None:
        (job,) = rendered.by_component("Deployment", "kappa-stream")
        spec = job["spec"]["template"]["spec"]
        (account,) = rendered.by_component("ServiceAccount", "spark-stream")
        assert spec["serviceAccountName"] == account["metadata"]["name"]
        assert spec["automountServiceAccountToken"] is True
        (binding,) = rendered.by_component("RoleBinding", "spark-stream")
        assert binding["subjects"][0]["name"] == account["metadata"]["name"]
        # Kappa: the stream role only, still no batch identity.
        assert rendered.by_component("ServiceAccount", "spark-batch") == []

    def test_should_give_executors_a_way_back_to_the_driver(self, rendered: Rendered) -> None:
        env = _env(rendered, "kappa-stream")
        assert env["LK_SPARK_MASTER"] == "k8s://https://kubernetes.default.svc"
        assert env["SPARK_LOCAL_IP"] == "$(POD_IP)"
        assert env["SPARK_CONF_DIR"] == "/opt/lk/spark-conf"
        assert "spark.kubernetes.driver.pod.name=$(POD_NAME)" in env["PYSPARK_SUBMIT_ARGS"]
        # Executors reach the driver by its pod IP (a pod's hostname has no DNS record).
        assert "spark.driver.host=$(POD_IP)" in env["PYSPARK_SUBMIT_ARGS"]
        (job,) = rendered.by_component("Deployment", "kappa-stream")
        ports = {p["containerPort"] for p in next(containers(job, init=False))["ports"]}
        assert ports == {7078, 7079, 9108}  # and its metrics (metrics.enabled)
        (config,) = rendered.by_component("ConfigMap", "spark-conf")
        conf = config["data"]["spark-defaults.conf"]
        assert "spark.driver.port                            7078" in conf
        assert "spark.kubernetes.container.image             lambda-kappa/app:0.1.0" in conf
        assert "spark.kubernetes.namespace                   lambda-kappa" in conf

    def test_local_mode_should_have_no_spark_kubernetes_objects(self) -> None:
        rendered = render_set("kappa")
        assert rendered.by_component("ConfigMap", "spark-conf") == []
        assert "SPARK_CONF_DIR" not in _env(rendered, "kappa-stream")

    def test_stream_drivers_may_keep_spark_in_their_pod_while_steps_use_kubernetes(
        self,
    ) -> None:
        """`stream.sparkMaster` (the real cluster's values: a small node): the stream drivers
        run Spark in local mode, with no executor pods, no Kubernetes identity and no
        call-back ports, while the batch layer's drivers keep spark.master."""
        values = load_values(*VALUE_SETS["spark-kubernetes"], stream={"sparkMaster": "local[2]"})
        rendered = render(values)
        env = _env(rendered, "kappa-stream")
        assert env["LK_SPARK_MASTER"] == "local[2]"
        assert not {"SPARK_LOCAL_IP", "SPARK_CONF_DIR", "PYSPARK_SUBMIT_ARGS"} & set(env)
        (job,) = rendered.by_component("Deployment", "kappa-stream")
        spec = job["spec"]["template"]["spec"]
        assert "serviceAccountName" not in spec and spec["automountServiceAccountToken"] is False
        ports = next(containers(job, init=False))["ports"]
        assert [p["name"] for p in ports] == ["metrics"]  # no call-back port
        # The steps' driver (the Airflow scheduler, local backend here) still starts executors.
        scheduler_env = _env(rendered, "airflow-scheduler")
        assert scheduler_env["LK_SPARK_MASTER"] == "k8s://https://kubernetes.default.svc"
        assert scheduler_env["SPARK_CONF_DIR"] == "/opt/lk/spark-conf"


def _step_pod(rendered: Rendered) -> dict:
    """The DAGs' step pod: the chart's pod_template_file (ConfigMap airflow-step-pod)."""
    import yaml

    (configmap,) = rendered.by_component("ConfigMap", "airflow-step-pod")
    return dict(yaml.safe_load(configmap["data"]["step-pod.yaml"]))


def _scheduler_spec(rendered: Rendered) -> dict:
    (scheduler,) = rendered.by_component("Deployment", "airflow-scheduler")
    return dict(scheduler["spec"]["template"]["spec"])


def _binding_of(rendered: Rendered, component: str) -> tuple[str, str]:
    """(role, service account) of the component's RoleBinding."""
    (binding,) = rendered.by_component("RoleBinding", component)
    return binding["roleRef"]["name"], binding["subjects"][0]["name"]


class TestAirflowSparkBackend:
    """`airflow.sparkBackend`: the DAGs' Spark steps in the scheduler pod (local) or each in a
    pod of its own (kubernetes, KubernetesPodOperator); the scheduler gets the identity and
    the rights that needs, in every architecture."""

    def test_local_is_the_default_and_sets_no_pod_settings(self) -> None:
        env = _env(render_set("both"), "airflow-scheduler")
        assert env["LK_SPARK_BACKEND"] == "local"
        assert not [name for name in env if name.startswith("LK_K8S_")]
        assert render_set("both").by_component("ConfigMap", "airflow-step-pod") == []

    def test_kubernetes_wires_the_step_pods_and_lets_the_scheduler_start_them(self) -> None:
        rendered = render_set("pod-backend")
        env = _env(rendered, "airflow-scheduler")
        (batch_account,) = rendered.by_component("ServiceAccount", "spark-batch")
        (secret,) = rendered.by_component("Secret", "credentials")
        (spark_conf,) = rendered.by_component("ConfigMap", "spark-conf")
        assert env["LK_SPARK_BACKEND"] == "kubernetes"
        # The step pod is the chart's template, which the scheduler mounts where the DAGs read it.
        template = env["LK_K8S_POD_TEMPLATE_FILE"]
        assert template == "/opt/airflow/pod-templates/step-pod.yaml"
        spec = _scheduler_spec(rendered)
        (mount,) = (m for m in spec["containers"][0]["volumeMounts"] if m["name"] == "step-pod")
        assert template.startswith(mount["mountPath"] + "/")
        volumes = {v["name"]: v for v in spec["volumes"]}
        assert volumes["step-pod"]["configMap"]["name"] == "lk-airflow-step-pod"
        pod = _step_pod(rendered)
        (base,) = pod["spec"]["containers"]
        base_env = {e["name"]: e for e in base["env"]}
        assert pod["metadata"]["namespace"] == "lambda-kappa"
        assert base["name"] == "base"  # the operator's container, which gets the step's args
        assert base["image"] == "lambda-kappa/app:0.1.0"
        assert pod["spec"]["serviceAccountName"] == batch_account["metadata"]["name"]
        refs = {
            e["valueFrom"]["secretKeyRef"]["name"]
            for e in base["env"]
            if "valueFrom" in e and "secretKeyRef" in e["valueFrom"]
        }
        assert refs == {secret["metadata"]["name"]}
        assert (
            base_env["LK_MINIO_ACCESS_KEY"]["valueFrom"]["secretKeyRef"]["key"]
            == "minio-airflow-user"
        )
        assert (
            base_env["LK_POSTGRES_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"]
            == "postgres-password"
        )
        pod_volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        assert pod_volumes["spark-conf"]["configMap"]["name"] == spark_conf["metadata"]["name"]
        assert pod["spec"]["automountServiceAccountToken"] is True  # it starts executor pods
        (launcher,) = rendered.by_component("Role", "airflow-pod-launcher")
        rights = {r: set(rule["verbs"]) for rule in launcher["rules"] for r in rule["resources"]}
        assert {"create", "get", "watch", "delete"} <= rights["pods"]
        assert "create" in rights["pods/exec"]  # the XCom sidecar's result
        assert "get" in rights["pods/log"]
        role, account = _binding_of(rendered, "airflow-pod-launcher")
        assert (role, account) == (launcher["metadata"]["name"], batch_account["metadata"]["name"])
        assert spec["serviceAccountName"] == account
        assert spec["automountServiceAccountToken"] is True

    def test_kappa_reprocessing_with_executor_pods_has_its_own_identity(self) -> None:
        rendered = render_set("spark-kubernetes")  # kappa, k8s:// master, local backend
        (account,) = rendered.by_component("ServiceAccount", "spark-reprocess")
        name = account["metadata"]["name"]
        role, bound = _binding_of(rendered, "spark-reprocess")
        assert bound == name and role.endswith("spark-driver")
        spec = _scheduler_spec(rendered)
        assert (spec["serviceAccountName"], spec["automountServiceAccountToken"]) == (name, True)
        assert rendered.by_component("ServiceAccount", "spark-batch") == []
        assert rendered.by_component("Role", "airflow-pod-launcher") == []

    def test_kappa_step_pods_on_local_spark_need_no_spark_role(self) -> None:
        rendered = render(
            load_values(CI_DIR / "kappa-values.yaml", airflow={"sparkBackend": "kubernetes"})
        )
        (account,) = rendered.by_component("ServiceAccount", "spark-reprocess")
        assert rendered.by_component("RoleBinding", "spark-reprocess") == []
        assert rendered.by_component("Role", "spark-driver") == []
        assert _binding_of(rendered, "airflow-pod-launcher")[1] == account["metadata"]["name"]
        pod = _step_pod(rendered)
        assert pod["spec"]["serviceAccountName"] == account["metadata"]["name"]
        assert "spark-conf" not in {v["name"] for v in pod["spec"]["volumes"]}
        assert pod["spec"]["automountServiceAccountToken"] is False


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
def test_pods_exec_should_be_granted_only_for_the_xcom_sidecar(value_set: str) -> None:
    """Issue 15, item 8: exec into pods is the pod launcher's alone, and only with step pods:
    the operator reads each step's result from its XCom sidecar (do_xcom_push) by exec."""
    assert "do_xcom_push=True" in (ROOT / "dags" / "lk_dags" / "pods.py").read_text()
    rendered = render_set(value_set)
    with_exec = {
        role["metadata"]["labels"]["app.kubernetes.io/component"]: set(rule["verbs"])
        for role in rendered.of_kind("Role", "ClusterRole")
        for rule in role["rules"]
        if "pods/exec" in rule["resources"] or "*" in rule["resources"]
    }
    if rendered.values["airflow"]["sparkBackend"] == "kubernetes":
        # create: exec over SPDY; get: over WebSocket, the Python client's way.
        assert with_exec == {"airflow-pod-launcher": {"create", "get"}}
        (launcher,) = rendered.by_component("Role", "airflow-pod-launcher")
        reason = launcher["metadata"]["annotations"]["lambda-kappa.io/pods-exec-reason"]
        assert "XCom sidecar" in reason
    else:
        assert with_exec == {}


INDEPENDENT = ("kafka", "connect", "minio", "postgres", "statsd-exporter")
"""Components whose pods are the same in every architecture."""


def test_a_change_of_architecture_should_leave_the_log_and_the_stores_running() -> None:
    """`helm upgrade` from one architecture to another replaces only the pods whose work
    changes (the streams, the serving API, Airflow's): the log's, the stores' and the metrics
    exporter's pod templates are the same, so Kubernetes rolls none of them. A label or a
    checksum that names the architecture would restart Kafka and Postgres on every switch, and
    every stream with them."""
    templates = {
        architecture: {
            component: _template(render_set(architecture), component) for component in INDEPENDENT
        }
        for architecture in ("lambda", "kappa", "both")
    }
    assert templates["lambda"] == templates["kappa"] == templates["both"]


def _template(rendered: Rendered, component: str) -> dict:
    (workload,) = [
        w for kind in ("Deployment", "StatefulSet") for w in rendered.by_component(kind, component)
    ]
    return {"metadata": pod_metadata(workload), "spec": pod_spec(workload)}
