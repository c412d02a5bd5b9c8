"""Every pod of every value set: requests and limits, probes (or a stated reason), a non-root
security context, pinned images pulled IfNotPresent, the app.kubernetes.io labels; and the
default release fits one kind node of 4 CPUs and 8 GiB."""

from __future__ import annotations

import os
import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.charts.chart_utils import (
    VALUE_SETS,
    WORKLOAD_KINDS,
    Manifest,
    Rendered,
    containers,
    load_values,
    pod_metadata,
    pod_spec,
    render,
    render_set,
)

NO_PROBE_REASON = "lambda-kappa.io/no-probe-reason"
# The kind node (infra/kind/cluster.yaml) has 4 CPUs and 9 GiB; kind's control plane, CoreDNS
# and kindnet ask about 1 CPU and 300 MiB of it, and the kubelet keeps some memory (its
# eviction threshold, 100 MiB): 8.5 GiB of requests leave it about 200 MiB more.
BUDGET_MILLICPU = 3000
BUDGET_MIB = 8.5 * 1024

# Memory quantity suffixes of Kubernetes, in MiB (a bare number is bytes).
_K8S_MIB = {
    "": 1 / 1024**2,
    "Ki": 1 / 1024,
    "Mi": 1,
    "Gi": 1024,
    "k": 1e3 / 1024**2,
    "M": 1e6 / 1024**2,
    "G": 1e9 / 1024**2,
}
# JVM sizes (Spark's executor memory): 768m, 1g.
_JVM_MIB = {"k": 1 / 1024, "m": 1, "g": 1024}


def millicpu(quantity: str | float) -> float:
    text = str(quantity)
    return float(text[:-1]) if text.endswith("m") else float(text) * 1000


def _split(quantity: str | float) -> tuple[float, str]:
    match = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(quantity))
    assert match, quantity
    return float(match[1]), match[2]


def mib(quantity: str | float) -> float:
    """A Kubernetes memory quantity in MiB."""
    number, unit = _split(quantity)
    return number * _K8S_MIB[unit]


def jvm_mib(size: str) -> float:
    """A JVM memory size in MiB."""
    number, unit = _split(size)
    return number * _JVM_MIB[unit.lower()]


def workloads(rendered: Rendered) -> list[Manifest]:
    return rendered.of_kind(*WORKLOAD_KINDS)


def _name(obj: Manifest, container: Manifest) -> str:
    return f"{obj['kind']}/{obj['metadata']['name']}:{container['name']}"


@pytest.mark.parametrize("value_set", sorted(VALUE_SETS))
class TestEveryWorkload:
    def test_every_container_should_have_requests_and_limits(self, value_set: str) -> None:
        for obj in workloads(render_set(value_set)):
            for c in containers(obj):
                resources = c.get("resources", {})
                for section in ("requests", "limits"):
                    assert set(resources.get(section, {})) >= {"cpu", "memory"}, _name(obj, c)
                assert millicpu(resources["requests"]["cpu"]) <= millicpu(
                    resources["limits"]["cpu"]
                ), _name(obj, c)
                assert mib(resources["requests"]["memory"]) <= mib(resources["limits"]["memory"]), (
                    _name(obj, c)
                )

    def test_every_long_running_container_should_have_probes_or_say_why_not(
        self, value_set: str
    ) -> None:
        # Jobs and the test pod run to completion; init containers cannot have probes.
        for obj in render_set(value_set).of_kind("Deployment", "StatefulSet"):
            reason = pod_metadata(obj).get("annotations", {}).get(NO_PROBE_REASON, "")
            for c in containers(obj, init=False):
                has_probes = "livenessProbe" in c and "readinessProbe" in c
                assert has_probes or len(reason) > 20, _name(obj, c)
                if "ports" in c and not reason:
                    assert has_probes, _name(obj, c)

    def test_no_probe_should_count_a_slow_answer_on_a_busy_node_as_a_failure(
        self, value_set: str
    ) -> None:
        """Kubernetes' default probe timeout is 1 s: with a comparison beside the release on a
        2-CPU node, Postgres's pg_isready took longer and the kubelet restarted it."""
        for obj in render_set(value_set).of_kind("Deployment", "StatefulSet"):
            for c in containers(obj, init=False):
                for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                    if probe in c:
                        assert c[probe].get("timeoutSeconds", 1) >= 5, (_name(obj, c), probe)

    def test_no_workload_should_go_without_probes(self, value_set: str) -> None:
        # The stream drivers were the last (issue 15, item 8): they have a heartbeat now.
        rendered = render_set(value_set)
        exempt = {
            o["metadata"]["labels"]["app.kubernetes.io/component"]
            for o in rendered.of_kind("Deployment", "StatefulSet")
            if NO_PROBE_REASON in pod_metadata(o).get("annotations", {})
        }
        assert exempt == set()

    def test_every_container_should_write_only_to_its_volumes(self, value_set: str) -> None:
        """Issue 15, item 8: a read-only root filesystem everywhere, and an emptyDir /tmp in
        every container (Spark's local dir, LK_HOME, the JVM's and Python's scratch space)."""
        for obj in workloads(render_set(value_set)):
            volumes = {v["name"]: v for v in pod_spec(obj).get("volumes", [])}
            for c in containers(obj):
                assert c["securityContext"].get("readOnlyRootFilesystem") is True, _name(obj, c)
                mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
                assert "/tmp" in mounts, _name(obj, c)
                assert "emptyDir" in volumes[mounts["/tmp"]], _name(obj, c)

    def test_every_container_should_run_as_non_root_without_privileges(
        self, value_set: str
    ) -> None:
        for obj in workloads(render_set(value_set)):
            pod = pod_spec(obj).get("securityContext", {})
            assert pod.get("runAsNonRoot") is True, obj["metadata"]["name"]
            assert pod.get("seccompProfile") == {"type": "RuntimeDefault"}
            for c in containers(obj):
                ctx = c.get("securityContext", {})
                assert ctx.get("runAsNonRoot") is True, _name(obj, c)
                assert isinstance(ctx.get("runAsUser"), int), _name(obj, c)
                assert ctx["runAsUser"] > 0, _name(obj, c)
                assert ctx.get("allowPrivilegeEscalation") is False, _name(obj, c)
                assert ctx.get("capabilities", {}).get("drop") == ["ALL"], _name(obj, c)
                assert "add" not in ctx.get("capabilities", {}), _name(obj, c)
                assert ctx.get("seccompProfile") == {"type": "RuntimeDefault"}, _name(obj, c)
                assert ctx.get("privileged") is not True, _name(obj, c)
                assert ctx.get("readOnlyRootFilesystem") is True, _name(obj, c)

    def test_every_image_should_be_pinned_and_pulled_if_not_present(self, value_set: str) -> None:
        for obj in workloads(render_set(value_set)):
            for c in containers(obj):
                image = c["image"]
                repository, _, tag = image.rpartition(":")
                assert repository and "/" not in tag, f"{_name(obj, c)}: {image} has no tag"
                assert tag != "latest", _name(obj, c)
                assert c.get("imagePullPolicy") == "IfNotPresent", _name(obj, c)

    def test_no_pod_should_get_service_link_variables(self, value_set: str) -> None:
        # With release `lk`, Service lk-kafka would inject LK_KAFKA_PORT=tcp://…, which the
        # settings would read as the Kafka port.
        for obj in workloads(render_set(value_set)):
            assert pod_spec(obj).get("enableServiceLinks") is False, obj["metadata"]["name"]

    def test_only_spark_drivers_should_mount_an_api_token(self, value_set: str) -> None:
        rendered = render_set(value_set)
        for obj in workloads(rendered):
            spec = pod_spec(obj)
            if spec.get("automountServiceAccountToken") is not False:
                assert "serviceAccountName" in spec, obj["metadata"]["name"]
                assert rendered.values.get("spark", {}).get("master", "").startswith("k8s://")

    def test_every_object_should_carry_the_recommended_labels(self, value_set: str) -> None:
        for obj in render_set(value_set).objects:
            labels = obj["metadata"]["labels"]
            for key in ("name", "instance", "component", "part-of", "managed-by", "version"):
                assert labels.get(f"app.kubernetes.io/{key}"), (obj["kind"], key)


class TestResourceBudget:
    @pytest.mark.parametrize("value_set", ["defaults", "lambda", "kappa", "both", "kind-both"])
    def test_default_sizes_should_fit_one_kind_node(self, value_set: str) -> None:
        cpu, memory = self._requests(render_set(value_set))
        assert cpu <= BUDGET_MILLICPU, f"{cpu}m CPU requested"
        assert memory <= BUDGET_MIB, f"{memory:.0f} MiB requested"

    def test_spark_on_kubernetes_with_its_executors_should_fit_one_kind_node(self) -> None:
        rendered = render_set("spark-kubernetes")
        cpu, memory = self._requests(rendered)
        k8s = rendered.values["spark"]["kubernetes"]
        drivers = [
            o
            for o in rendered.of_kind("Deployment")
            if any(
                e["name"] == "SPARK_CONF_DIR"
                for c in containers(o, init=False)
                for e in c.get("env", [])
            )
        ]
        assert drivers, "no Spark driver found"
        executors = len(drivers) * k8s["executorInstances"]
        cpu += executors * millicpu(k8s["executorRequestCores"])
        memory += executors * (
            jvm_mib(k8s["executorMemory"]) + jvm_mib(k8s["executorMemoryOverhead"])
        )
        assert cpu <= BUDGET_MILLICPU
        assert memory <= BUDGET_MIB, f"{memory:.0f} MiB with {executors} executors"

    def test_custom_resources_should_reach_the_pods(self) -> None:
        rendered = render_set("custom-resources")
        (serving,) = rendered.by_component("Deployment", "serving")
        assert serving["spec"]["replicas"] == 2
        main = next(containers(serving, init=False))
        assert main["resources"]["limits"]["memory"] == "768Mi"
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert (env["LK_SERVE_WORKERS"], env["LK_SERVE_POOL_MAX_SIZE"]) == ("2", "4")
        (speed,) = rendered.by_component("Deployment", "speed-layer")
        main = next(containers(speed, init=False))
        assert main["resources"]["requests"]["memory"] == "1536Mi"
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert env["LK_SPARK_DRIVER_MEMORY"] == "1g"

    @staticmethod
    def _requests(rendered: Rendered) -> tuple[float, float]:
        """Requests of everything running at once after install: long-running pods, plus the
        Jobs, which run while the rest starts. The test pod runs later, alone."""
        cpu = memory = 0.0
        for obj in rendered.of_kind("Deployment", "StatefulSet", "Job"):
            replicas = obj["spec"].get("replicas", 1)
            main = [c["resources"]["requests"] for c in containers(obj, init=False)]
            # Init containers run before the main ones: a pod needs the larger of the two.
            init = [c["resources"]["requests"] for c in pod_spec(obj).get("initContainers", [])]
            pod_cpu = max(
                sum(millicpu(r["cpu"]) for r in main),
                max((millicpu(r["cpu"]) for r in init), default=0),
            )
            pod_mem = max(
                sum(mib(r["memory"]) for r in main),
                max((mib(r["memory"]) for r in init), default=0),
            )
            cpu += replicas * pod_cpu
            memory += replicas * pod_mem
        return cpu, memory


class TestServingDeployment:
    def test_should_run_one_worker_and_say_where_its_metrics_are(self) -> None:
        # One worker for the default limit of half a CPU (`lk serve` would count the node's).
        (serving,) = render_set("defaults").by_component("Deployment", "serving")
        main = next(containers(serving, init=False))
        env = {e["name"]: e.get("value") for e in main["env"]}
        assert env["LK_SERVE_WORKERS"] == "1"
        assert (env["LK_SERVE_POOL_MIN_SIZE"], env["LK_SERVE_POOL_MAX_SIZE"]) == ("2", "8")
        annotations = pod_metadata(serving)["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert annotations["prometheus.io/path"] == "/metrics"
        assert annotations["prometheus.io/port"] == str(main["ports"][0]["containerPort"])


@pytest.mark.parametrize("value_set", ["lambda", "kappa", "both", "spark-kubernetes"])
class TestStreamDriverProbes:
    """Issue 15, item 8: a hung stream driver is restarted. Each query's heartbeat file (under
    LK_STREAM_HEARTBEAT_DIR, on the pod's /tmp) is checked with `find`: no Python, no JVM."""

    DRIVERS = ("archiver", "speed-layer", "kappa-stream")

    @staticmethod
    def _drivers(value_set: str) -> list[Manifest]:
        rendered = render_set(value_set)
        found = [
            o
            for c in TestStreamDriverProbes.DRIVERS
            for o in rendered.by_component("Deployment", c)
        ]
        assert found
        return found

    def test_should_restart_a_driver_whose_heartbeat_is_stale(self, value_set: str) -> None:
        for obj in self._drivers(value_set):
            main = next(containers(obj, init=False))
            heartbeat_dir = main["env"][
                [e["name"] for e in main["env"]].index("LK_STREAM_HEARTBEAT_DIR")
            ]["value"]
            assert heartbeat_dir.startswith("/tmp/"), heartbeat_dir  # the emptyDir
            for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
                command = main[probe]["exec"]["command"]
                assert command[:2] == ["sh", "-c"], probe
                assert '"$LK_STREAM_HEARTBEAT_DIR"' in command[2]
                assert "-mmin +10" in command[2]  # stream.heartbeatTimeoutMinutes
            liveness = main["livenessProbe"]
            # Restarted within two periods of the timeout; the startup probe allows 10 minutes.
            assert liveness["periodSeconds"] * liveness["failureThreshold"] <= 180
            startup = main["startupProbe"]
            assert startup["periodSeconds"] * startup["failureThreshold"] == 600

    def test_timeout_should_come_from_values(self, value_set: str) -> None:
        rendered = render(
            load_values(*VALUE_SETS[value_set], stream={"heartbeatTimeoutMinutes": 25})
        )
        for c in self.DRIVERS:
            for obj in rendered.by_component("Deployment", c):
                command = next(containers(obj, init=False))["livenessProbe"]["exec"]["command"]
                assert "-mmin +25" in command[2]


def test_heartbeat_check_should_pass_only_when_every_heartbeat_is_fresh(tmp_path: Path) -> None:
    """The probes' own shell command, run here: no heartbeat fails, a fresh one passes, one
    stale query among fresh ones fails."""
    (speed,) = render_set("lambda").by_component("Deployment", "speed-layer")
    command = next(containers(speed, init=False))["livenessProbe"]["exec"]["command"]

    def probe() -> int:
        env = {"PATH": os.environ["PATH"], "LK_STREAM_HEARTBEAT_DIR": str(tmp_path / "hb")}
        return subprocess.run(command, env=env, check=False).returncode

    assert probe() != 0  # no folder yet: Spark has not started a query
    (tmp_path / "hb").mkdir()
    assert probe() != 0  # no heartbeat yet
    (tmp_path / "hb" / "events").touch()
    assert probe() == 0
    stale = tmp_path / "hb" / "profiles"
    stale.touch()
    old = time.time() - 11 * 60
    os.utime(stale, (old, old))
    assert probe() != 0  # one hung query is enough


@pytest.mark.parametrize("value_set", ["lambda", "kappa", "both"])
def test_airflow_should_find_its_config_and_write_only_logs_and_tmp(value_set: str) -> None:
    """Airflow writes a default airflow.cfg into AIRFLOW_HOME when none exists, which a
    read-only root filesystem refuses: every Airflow container reads the chart's (a ConfigMap)
    and writes its logs to an emptyDir."""
    rendered = render_set(value_set)
    (config,) = rendered.by_component("ConfigMap", "airflow-config")
    for obj in rendered.of_kind(*WORKLOAD_KINDS):
        if not obj["metadata"]["labels"]["app.kubernetes.io/component"].startswith("airflow-"):
            continue
        volumes = {v["name"]: v for v in pod_spec(obj)["volumes"]}
        for c in containers(obj):
            if c.get("command", [None])[0] == "sh":  # the admin-user file, not Airflow
                continue
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["AIRFLOW_CONFIG"] == "/opt/airflow/config/airflow.cfg", _name(obj, c)
            mounts = {m["mountPath"]: m for m in c["volumeMounts"]}
            cfg = mounts["/opt/airflow/config"]
            assert cfg["readOnly"] is True
            assert volumes[cfg["name"]]["configMap"]["name"] == config["metadata"]["name"]
        if obj["kind"] == "Deployment":
            main = next(containers(obj, init=False))
            logs = {m["mountPath"]: m["name"] for m in main["volumeMounts"]}["/opt/airflow/logs"]
            assert "emptyDir" in volumes[logs], _name(obj, main)
