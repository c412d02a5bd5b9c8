"""infra.images: what the podman path builds and how, without building (no podman needed)."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from core.settings import Settings
from infra import images
from infra.images import base
from infra.images.errors import ImagesError, last_line


def _settings(tmp_path: Path) -> Settings:
    return Settings(
        home=tmp_path, stack_dir=None, cache_dir=tmp_path / "cache", spark_jars_dir=None
    )


class TestHostMirrors:
    def test_should_read_deb822_sources(self, tmp_path: Path) -> None:
        (tmp_path / "sources.list.d").mkdir()
        (tmp_path / "sources.list.d" / "debian.sources").write_text(
            "Types: deb\nURIs: http://mirror.example/debian/\nSuites: bookworm bookworm-updates\n"
            "Components: main\n\n"
            "Types: deb\n# a comment\nURIs: http://mirror.example/debian-security\n"
            "Suites: bookworm-security\nComponents: main\n"
        )
        assert base.host_mirrors(tmp_path) == (
            "http://mirror.example/debian",
            "http://mirror.example/debian-security",
        )

    def test_should_read_one_line_sources_and_skip_other_suites(self, tmp_path: Path) -> None:
        (tmp_path / "sources.list").write_text(
            "deb [arch=amd64] https://packages.example/apt cloud-sdk-bookworm main\n"
            "deb http://ftp.example/debian bookworm main\n"
        )
        mirror, security = base.host_mirrors(tmp_path)
        assert mirror == "http://ftp.example/debian"
        assert security == base.DEFAULT_SECURITY_MIRROR

    def test_should_fall_back_to_deb_debian_org(self, tmp_path: Path) -> None:
        assert base.host_mirrors(tmp_path) == (base.DEFAULT_MIRROR, base.DEFAULT_SECURITY_MIRROR)


class TestBaseFingerprint:
    def test_should_change_with_the_mirror_and_the_extra_certificates(self, tmp_path: Path) -> None:
        ca = tmp_path / "proxy.crt"
        ca.write_text("-----BEGIN CERTIFICATE-----\nA\n")
        first = base.fingerprint("http://a/debian", "http://a/sec", [])
        assert first == base.fingerprint("http://a/debian", "http://a/sec", [])
        assert first != base.fingerprint("http://b/debian", "http://a/sec", [])
        with_ca = base.fingerprint("http://a/debian", "http://a/sec", [ca])
        assert with_ca != first
        ca.write_text("-----BEGIN CERTIFICATE-----\nB\n")
        assert base.fingerprint("http://a/debian", "http://a/sec", [ca]) != with_ca

    def test_reference_should_be_a_local_tag_never_latest(self) -> None:
        ref = base.base_ref("0123456789ab")
        assert ref == "localhost/lambda-kappa/base:bookworm-0123456789ab"

    def test_sources_should_cover_updates_and_security(self) -> None:
        text = base.debian_sources("http://m/debian", "http://m/debian-security")
        assert "Suites: bookworm bookworm-updates" in text
        assert "URIs: http://m/debian-security\nSuites: bookworm-security" in text

    def test_should_carry_what_the_dockerfiles_need(self) -> None:
        # app.Dockerfile: python/pip (PYTHON_IMAGE); every Dockerfile: useradd (passwd).
        assert {"python3", "python3-venv", "python3-pip", "ca-certificates", "passwd"} <= set(
            base.PACKAGES
        )
        assert any(c.startswith("ENV PATH=") for c in base.IMAGE_CHANGES)


class TestNames:
    def test_should_be_what_containerd_resolves_the_chart_s_names_to(self) -> None:
        # The chart renders lambda-kappa/app:TAG; the CRI normalises it to docker.io/...
        assert images.image_name("app", "v1-3-gabc") == "docker.io/lambda-kappa/app:v1-3-gabc"

    @pytest.mark.parametrize("tag", ["", "latest"])
    def test_should_refuse_a_tag_that_is_not_unique(self, tag: str) -> None:
        with pytest.raises(ImagesError, match="unique tag"):
            images.image_name("app", tag)

    def test_tag_should_be_a_git_description(self) -> None:
        assert re.fullmatch(r"[\w.-]+(-dirty-[0-9a-f]{8})?", images.image_tag())


class TestBuildCommands:
    def _plans(self, tmp_path: Path) -> dict[str, images.BuildPlan]:
        return images.build_plans(
            _settings(tmp_path),
            "t1",
            base_ref="localhost/lambda-kappa/base:bookworm-x",
            go_ref="go:1",
        )

    def test_should_plan_the_five_images_from_infra_docker(self, tmp_path: Path) -> None:
        plans = self._plans(tmp_path)
        assert tuple(plans) == images.COMPONENTS
        for name, plan in plans.items():
            assert plan.dockerfile == images.DOCKER_DIR / f"{name}.Dockerfile"
            assert plan.dockerfile.is_file()

    def test_should_use_the_vm_s_limits_runc_and_the_host_network(self, tmp_path: Path) -> None:
        cmd = images.podman_build_command(self._plans(tmp_path)["postgres"], "t1")
        joined = " ".join(cmd)
        assert cmd[:2] == ["podman", "build"]
        assert "--runtime runc" in joined
        assert "--network host" in joined
        assert "--ulimit nofile=4096:4096 --ulimit nproc=4096:4096" in joined
        assert "--pull=never" in cmd
        assert "--build-arg BASE_IMAGE=localhost/lambda-kappa/base:bookworm-x" in joined
        assert cmd[-3:] == ["-t", "docker.io/lambda-kappa/postgres:t1", str(images.ROOT)]

    def test_airflow_should_build_on_the_app_image_of_the_same_tag(self, tmp_path: Path) -> None:
        plan = self._plans(tmp_path)["airflow"]
        assert plan.build_args == {"APP_IMAGE": "docker.io/lambda-kappa/app:t1"}

    def test_caches_should_be_build_volumes_under_the_cache_folder(self, tmp_path: Path) -> None:
        plans = self._plans(tmp_path)
        cache = _settings(tmp_path).cache_path
        app = dict(plans["app"].volumes)
        assert app[cache / "images" / "uv"] == "/root/.cache/uv"
        # The stack's Maven repository (infra/stack/artifacts.py), where the Dockerfiles look.
        assert app[cache / "m2"] == "/root/.cache/lk/m2"
        assert dict(plans["kafka"].volumes)[cache / "m2"] == "/root/.m2/repository"
        cmd = images.podman_build_command(plans["app"], "t1")
        assert f"{cache / 'images' / 'uv'}:/root/.cache/uv" in cmd

    def test_minio_should_build_the_stack_s_version_with_its_go_caches(
        self, tmp_path: Path
    ) -> None:
        settings = _settings(tmp_path)
        plan = self._plans(tmp_path)["minio"]
        go = settings.cache_path / "go"
        assert plan.build_args["MINIO_VERSION"] == settings.minio_version
        assert plan.build_args["GO_IMAGE"] == "go:1"
        # The same paths inside: Go's build cache is keyed by them.
        assert plan.build_args["GOMODCACHE"] == str(go / "mod")
        assert plan.build_args["GOCACHE"] == str(go / "build")
        assert dict(plan.volumes) == {go / "mod": str(go / "mod"), go / "build": str(go / "build")}

    def test_dockerfile_arguments_should_exist(self, tmp_path: Path) -> None:
        for plan in self._plans(tmp_path).values():
            text = plan.dockerfile.read_text()
            for arg in plan.build_args:
                assert re.search(rf"^ARG {arg}=", text, re.MULTILINE), (plan.component, arg)


class TestBuildAll:
    def test_should_refuse_an_unknown_image_before_any_work(self, tmp_path: Path) -> None:
        with pytest.raises(ImagesError, match="unknown image"):
            images.build_all(_settings(tmp_path), "t1", components=["banana"])


class TestLoad:
    def test_should_say_when_the_cluster_is_not_up(self, tmp_path: Path) -> None:
        with pytest.raises(ImagesError, match="no containerd socket"):
            images.load_into_containerd(tmp_path / "nope.sock", ["docker.io/lambda-kappa/app:t1"])

    def test_default_socket_should_be_the_cluster_s(self, tmp_path: Path) -> None:
        from infra.cluster.paths import containerd_socket

        settings = _settings(tmp_path)
        assert images.default_socket(settings) == containerd_socket(settings)


def test_last_line_should_prefer_the_error() -> None:
    output = "STEP 1/2: FROM x\nE: Unable to locate package nope\nsome trailing noise\n"
    assert last_line(output) == "E: Unable to locate package nope"
    assert last_line("") == "no output"


def test_last_line_should_put_the_cause_before_podman_s_summary() -> None:
    output = (
        "STEP 2/2: RUN apt-get install -y nope\n"
        "E: Unable to locate package nope\n"
        'Error: building at STEP "RUN apt-get install -y nope": while running runtime: '
        "exit status 100\n"
    )
    line = last_line(output)
    assert line.startswith("E: Unable to locate package nope (building at STEP")


def test_a_build_should_leave_only_its_own_tag_of_the_project_s_images(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each tag holds about 6 GB: older tags go, and so does nothing else (the base, the Go
    toolchain, images of other projects)."""
    stored = [
        "docker.io/lambda-kappa/app:new",
        "docker.io/lambda-kappa/app:old",
        "docker.io/lambda-kappa/airflow:old",
        "localhost/lambda-kappa/base:bookworm-833c8ce86a2a",
        "docker.io/library/busybox:old",
    ]
    calls: list[list[str]] = []

    def run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, "\n".join(stored) + "\n", "")

    monkeypatch.setattr(images.subprocess, "run", run)
    removed = images.prune_other_tags("new", log=lambda _: None)
    assert removed == ["docker.io/lambda-kappa/app:old", "docker.io/lambda-kappa/airflow:old"]
    assert calls[-1] == ["podman", "rmi", "--force", *removed]


def test_a_build_should_remove_the_stages_earlier_builds_left_but_not_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Untagged images with the label of the component's builds, but the newest: this build's
    own, whose parents are the layer cache the next build reuses."""
    left = [
        {"Id": "sha256:old", "Created": 100},
        {"Id": "sha256:newest", "Created": 300},
        {"Id": "sha256:older", "Created": 50},
    ]
    calls: list[list[str]] = []

    def run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, json.dumps(left), "")

    monkeypatch.setattr(images.subprocess, "run", run)
    removed = images.prune_left_stages("app", log=lambda _: None)
    assert removed == ["sha256:old", "sha256:older"]
    assert calls[0][:2] == ["podman", "images"]
    assert "dangling=true" in calls[0] and f"label={images.BUILD_LABEL}=app" in calls[0]
    assert calls[-1] == ["podman", "rmi", "--ignore", *removed]
    left[:] = left[1:2]
    calls.clear()
    assert images.prune_left_stages("app", log=lambda _: None) == []
    assert len(calls) == 1  # listed, nothing removed


def test_every_build_should_carry_its_component_s_label(tmp_path: Path) -> None:
    plans = images.build_plans(_settings(tmp_path), "t1", base_ref="base:1", go_ref="go:1")
    for component, plan in plans.items():
        cmd = images.podman_build_command(plan, "t1")
        assert cmd[cmd.index("--label") + 1] == f"{images.BUILD_LABEL}={component}"


def test_loading_a_build_into_containerd_removes_the_project_s_other_tags_there(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The cluster's containerd keeps every tag ever loaded, and the CRI a `sha256:<id>`
    reference of each: both go for older tags, and nothing else (the pause image, another
    project's images, the digests the new tag shares)."""
    listing = (
        "REF TYPE DIGEST SIZE PLATFORMS LABELS\n"
        "docker.io/lambda-kappa/app:new t sha256:n1 2.6GiB linux/amd64 -\n"
        "docker.io/lambda-kappa/app:old t sha256:o1 2.6GiB linux/amd64 -\n"
        "docker.io/lambda-kappa/kafka:old t sha256:k1 400MiB linux/amd64 -\n"
        "docker.io/lambda-kappa/kafka:new t sha256:k1 400MiB linux/amd64 -\n"
        "registry.k8s.io/pause:3.10 t sha256:p1 680KiB linux/amd64 -\n"
        "lk.local/busybox:1.35 t sha256:b1 2MiB linux/amd64 -\n"
        "sha256:aaa t sha256:o1 2.6GiB linux/amd64 -\n"
        "sha256:bbb t sha256:n1 2.6GiB linux/amd64 -\n"
        "sha256:ccc t sha256:k1 400MiB linux/amd64 -\n"
        "sha256:ddd t sha256:p1 680KiB linux/amd64 -\n"
    )
    names = "\n".join(line.split()[0] for line in listing.splitlines()[1:])
    calls: list[list[str]] = []

    def run(cmd: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        calls.append(cmd)
        return subprocess.CompletedProcess(cmd, 0, names if "-q" in cmd else listing, "")

    monkeypatch.setattr(images.subprocess, "run", run)
    monkeypatch.setattr(images.shutil, "which", lambda _: "/usr/bin/ctr")
    socket = tmp_path / "containerd.sock"
    socket.touch()
    refs = ["docker.io/lambda-kappa/app:new", "docker.io/lambda-kappa/kafka:new"]
    images.load_into_containerd(socket, refs, log=lambda _: None)  # both present: no import
    ctr = ["ctr", "--address", str(socket), "-n", "k8s.io"]
    assert calls[-1] == [
        *ctr, "images", "rm",
        "docker.io/lambda-kappa/app:old", "docker.io/lambda-kappa/kafka:old", "sha256:aaa",
    ]  # fmt: skip
    calls.clear()
    images.load_into_containerd(socket, ["lk.local/busybox:1.35"], log=lambda _: None)
    assert not any("rm" in call for call in calls)  # not a build of ours: nothing removed
