"""What the cluster runs, built from the package registries and cached under cache_path.

- Kubernetes (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy,
  kubectl): ``go build`` of ``k8s.io/kubernetes`` from the Go module proxy, through a small
  module whose go.mod requires it and replaces each split-out ``k8s.io/*`` module (the
  ``=> ./staging/...`` lines of Kubernetes' own go.mod) by its ``v0.x.y`` release.
- etcd: ``go build`` of a three-line main calling ``etcdmain.Main`` from
  ``go.etcd.io/etcd/server/v3`` (whose own go.mod replaces its siblings by local folders, so
  ``go install`` refuses it).
- The NetworkPolicy agent (kube-network-policies): its module's source, with the change
  ``infra.cluster.network_policies`` explains, built in a copy; its image holds that binary.
- CoreDNS and helm: ``go install module@version``.
- The pause image: ``gcc -static`` of Kubernetes' ``build/pause/linux/pause.c``, packed as an
  OCI image by ``infra.cluster.images``; and the smoke test's busybox image from Debian's
  static busybox.

Every artifact has a marker file holding its inputs' fingerprint: a second run builds nothing,
and a change of version builds again. containerd, runc and the CNI plugins are Debian's.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from core.settings import Settings
from infra.cluster import images, network_policies, paths
from infra.stack.artifacts import inputs_fingerprint, is_current, require_tool
from infra.stack.process import StackError

Progress = Callable[[str], None]

# What ``go build`` makes from k8s.io/kubernetes, in two invocations: the first is the list the
# project's first build used (so the Go build cache answers it), the second adds kubectl.
KUBERNETES_COMMANDS = (
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kubelet",
    "kube-proxy",
)
CLIENT_COMMANDS = ("kubectl",)
PAUSE_IMAGE = "registry.k8s.io/pause:3.10"
BUSYBOX_IMAGE = "lk.local/busybox:1.35"
BUSYBOX_BINARY = Path("/bin/busybox")  # Debian's busybox-static
_STAGING = re.compile(r"^\s*(k8s\.io/[\w.-]+)\s*=>\s*\./staging/src/\1\s*$")


def go_env(settings: Settings, *, mod_mode: bool) -> dict[str, str]:
    """The Go environment of every build here: one module and build cache under cache_path."""
    go_root = settings.cache_path / "go"
    flags = "-buildvcs=false -modcacherw" + (" -mod=mod" if mod_mode else "")
    return {
        **os.environ,
        "GOMODCACHE": str(go_root / "mod"),
        "GOCACHE": str(go_root / "build"),
        "GOFLAGS": flags,
        "CGO_ENABLED": "0",
        "GOTOOLCHAIN": "local",
    }


def kubernetes_ldflags(version: str) -> str:
    """Stamp the version, or the binaries report v0.0.0-master (and kubectl warns of skew)."""
    major, minor = version.lstrip("v").split(".")[:2]
    stamps = []
    for pkg in ("k8s.io/component-base/version", "k8s.io/client-go/pkg/version"):
        stamps += [f"{pkg}.gitVersion={version}", f"{pkg}.gitMajor={major}"]
        stamps += [f"{pkg}.gitMinor={minor}"]
        if pkg.startswith("k8s.io/component-base"):
            stamps.append(f"{pkg}.gitTreeState=clean")
    return "-s -w " + " ".join(f"-X {s}" for s in stamps)


def staging_replaces(kubernetes_go_mod: str, version: str) -> list[str]:
    """The replace lines of the build module: each staging module at its v0.x.y release."""
    staging_version = "v0." + version.lstrip("v").split(".", 1)[1]
    modules = sorted(
        m.group(1) for line in kubernetes_go_mod.splitlines() if (m := _STAGING.match(line))
    )
    if not modules:
        raise StackError("Kubernetes' go.mod names no ./staging modules: unexpected layout")
    return [f"{module} => {module} {staging_version}" for module in modules]


def render_build_go_mod(kubernetes_go_mod: str, version: str) -> str:
    go_line = next(
        (line for line in kubernetes_go_mod.splitlines() if line.startswith("go ")), "go 1.24.0"
    )
    replaces = "\n".join(f"\t{r}" for r in staging_replaces(kubernetes_go_mod, version))
    return (
        "module lambda-kappa.local/kubernetes-build\n\n"
        f"{go_line}\n\n"
        f"require k8s.io/kubernetes {version}\n\n"
        f"replace (\n{replaces}\n)\n"
    )


def _run(argv: list[str], env: dict[str, str], cwd: Path | None, what: str) -> str:
    result = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        lines = [ln for ln in result.stderr.strip().splitlines() if ln.strip()] or ["no output"]
        raise StackError(f"{what} failed: {lines[-1]}")
    return result.stdout


def kubernetes_module_dir(settings: Settings) -> Path:
    """k8s.io/kubernetes's source in the module cache (downloaded if needed)."""
    go = require_tool("go", "install Go (1.24+) to build Kubernetes from the Go module proxy")
    out = _run(
        [go, "mod", "download", "-json", f"k8s.io/kubernetes@{settings.kubernetes_version}"],
        go_env(settings, mod_mode=False),
        settings.cache_path,
        "go mod download k8s.io/kubernetes",
    )
    return Path(json.loads(out)["Dir"])


def kubernetes_binaries(settings: Settings, progress: Progress) -> Path:
    """kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, kubectl."""
    version = settings.kubernetes_version
    bin_dir = paths.kubernetes_bin_dir(settings)
    marker = bin_dir / ".built"
    go = require_tool("go", "install Go (1.24+) to build Kubernetes from the Go module proxy")
    go_version = _run([go, "env", "GOVERSION"], dict(os.environ), None, "go env").strip()
    ldflags = kubernetes_ldflags(version)
    commands = (*KUBERNETES_COMMANDS, *CLIENT_COMMANDS)
    fingerprint = inputs_fingerprint(version, go_version, ldflags, *commands)
    if is_current(marker, fingerprint) and all((bin_dir / c).is_file() for c in commands):
        return bin_dir
    progress(
        f"building Kubernetes {version} ({', '.join(commands)}) with {go_version}: about "
        "25 minutes on 2 cores the first time, cached after"
    )
    settings.cache_path.mkdir(parents=True, exist_ok=True)
    src = paths.build_dir(settings) / "src"
    src.mkdir(parents=True, exist_ok=True)
    k8s_go_mod = (kubernetes_module_dir(settings) / "go.mod").read_text()
    go_mod = render_build_go_mod(k8s_go_mod, version)
    if not (src / "go.mod").is_file() or (src / "go.mod").read_text() != go_mod:
        (src / "go.mod").write_text(go_mod)
    env = go_env(settings, mod_mode=True)
    _run([go, "mod", "download", "k8s.io/kubernetes"], env, src, "go mod download")
    bin_dir.mkdir(parents=True, exist_ok=True)
    for group in (KUBERNETES_COMMANDS, CLIENT_COMMANDS):
        packages = [f"k8s.io/kubernetes/cmd/{c}" for c in group]
        _run(
            [go, "build", "-ldflags", ldflags, "-o", f"{bin_dir}/", *packages],
            env,
            src,
            f"go build {' '.join(group)}",
        )
    marker.write_text(fingerprint)
    return bin_dir


def _go_install(
    settings: Settings, module: str, version: str, binary: str, ldflags: str = "-s -w"
) -> Path:
    bin_dir = paths.tools_bin_dir(settings)
    path = bin_dir / binary
    marker = bin_dir / f"{binary}.version"
    fingerprint = f"{module}@{version} {ldflags}"
    if path.is_file() and is_current(marker, fingerprint):
        return path
    go = require_tool("go", "install Go to build tools from the Go module proxy")
    env = {**go_env(settings, mod_mode=False), "GOBIN": str(bin_dir)}
    _run(
        [go, "install", "-ldflags", ldflags, f"{module}@{version}"],
        env,
        None,
        f"go install {module}",
    )
    if not path.is_file():
        raise StackError(f"go install {module}@{version} made no {binary} in {bin_dir}")
    marker.write_text(fingerprint)
    return path


def helm_module(version: str) -> str:
    major = version.lstrip("v").split(".")[0]
    return f"helm.sh/helm/v{major}/cmd/helm"


def helm_ldflags(version: str, kubernetes_version: str) -> str:
    """Stamp helm's version, and the Kubernetes version `helm template` and `helm lint` assume
    without a cluster (else v1.20, which charts with a kubeVersion constraint refuse): the
    cluster's own."""
    major = version.lstrip("v").split(".")[0]
    k8s_major, k8s_minor = kubernetes_version.lstrip("v").split(".")[:2]
    flags = ["-s", "-w", f"-X helm.sh/helm/v{major}/internal/version.version={version}"]
    flags.append(f"-X helm.sh/helm/v{major}/internal/version.metadata=")
    for pkg in ("pkg/lint/rules", "pkg/chartutil"):
        flags.append(f"-X helm.sh/helm/v{major}/{pkg}.k8sVersionMajor={k8s_major}")
        flags.append(f"-X helm.sh/helm/v{major}/{pkg}.k8sVersionMinor={k8s_minor}")
    return " ".join(flags)


def helm(settings: Settings, progress: Progress) -> Path:
    version = settings.helm_version
    module = helm_module(version)
    ldflags = helm_ldflags(version, settings.kubernetes_version)
    if not is_current(
        paths.tools_bin_dir(settings) / "helm.version", f"{module}@{version} {ldflags}"
    ):
        progress(f"building helm {version} (go install, about 3 minutes)")
    return _go_install(settings, module, version, "helm", ldflags)


def coredns(settings: Settings, progress: Progress) -> Path:
    module, version = "github.com/coredns/coredns", settings.coredns_version
    if not is_current(
        paths.tools_bin_dir(settings) / "coredns.version", f"{module}@{version} -s -w"
    ):
        progress(f"building CoreDNS {version} (go install, about 5 minutes)")
    return _go_install(settings, module, version, "coredns")


def pause_image_archive(settings: Settings, progress: Progress) -> Path:
    """The pod sandbox image: a static pause binary, as an OCI archive."""
    out_dir = paths.images_dir(settings)
    archive = out_dir / "pause.oci.tar"
    marker = out_dir / "pause.built"
    source = kubernetes_module_dir(settings) / "build" / "pause" / "linux" / "pause.c"
    fingerprint = inputs_fingerprint(source.read_text(), PAUSE_IMAGE)
    if archive.is_file() and is_current(marker, fingerprint):
        return archive
    progress(f"building the pause image {PAUSE_IMAGE} (gcc -static)")
    gcc = require_tool("gcc", "install gcc and libc6-dev (apt-get install gcc libc6-dev)")
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = out_dir / "pause"
    _run(
        [gcc, "-Os", "-static", "-Wall", "-DVERSION=v3.10", "-o", str(binary), str(source)],
        dict(os.environ),
        None,
        "gcc -static pause.c",
    )
    _run(["strip", str(binary)], dict(os.environ), None, "strip pause")
    archive.write_bytes(images.oci_archive(images.pause_image(binary.read_bytes(), PAUSE_IMAGE)))
    marker.write_text(fingerprint)
    return archive


def busybox_image_archive(settings: Settings) -> Path:
    """The smoke test's image (busybox httpd, wget, nslookup) from Debian's busybox-static."""
    if not BUSYBOX_BINARY.is_file():
        raise StackError(f"{BUSYBOX_BINARY} is missing: apt-get install busybox-static")
    out_dir = paths.images_dir(settings)
    archive = out_dir / "busybox.oci.tar"
    content = BUSYBOX_BINARY.read_bytes()
    marker = out_dir / "busybox.built"
    fingerprint = inputs_fingerprint(hashlib.sha256(content).hexdigest(), BUSYBOX_IMAGE)
    if archive.is_file() and is_current(marker, fingerprint):
        return archive
    out_dir.mkdir(parents=True, exist_ok=True)
    archive.write_bytes(images.oci_archive(images.busybox_image(content, BUSYBOX_IMAGE)))
    marker.write_text(fingerprint)
    return archive


_ETCD_MODULE = "go.etcd.io/etcd"
_ETCD_MAIN = """package main

import (
\t"os"

\t"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
"""


def etcd_go_mod(version: str) -> str:
    """The build module: the server and its sibling modules, all at the release."""
    siblings = ("server/v3", "api/v3", "client/pkg/v3", "client/v3", "pkg/v3")
    requires = "\n".join(f"\t{_ETCD_MODULE}/{m} {version}" for m in siblings)
    return f"module lambda-kappa.local/etcd-build\n\ngo 1.24.0\n\nrequire (\n{requires}\n)\n"


def etcd(settings: Settings, progress: Progress) -> Path:
    version = settings.etcd_version
    out = paths.tools_bin_dir(settings) / "etcd"
    marker = paths.tools_bin_dir(settings) / "etcd.version"
    go_mod = etcd_go_mod(version)
    fingerprint = inputs_fingerprint(go_mod, _ETCD_MAIN)
    if out.is_file() and is_current(marker, fingerprint):
        return out
    progress(f"building etcd {version} (go build, about a minute with Kubernetes' build cache)")
    go = require_tool("go", "install Go to build tools from the Go module proxy")
    src = paths.build_dir(settings) / "etcd-src"
    src.mkdir(parents=True, exist_ok=True)
    (src / "go.mod").write_text(go_mod)
    (src / "main.go").write_text(_ETCD_MAIN)
    out.parent.mkdir(parents=True, exist_ok=True)
    ldflags = "-s -w"
    _run(
        [go, "build", "-ldflags", ldflags, "-o", str(out), "."],
        go_env(settings, mod_mode=True),
        src,
        "go build etcd",
    )
    marker.write_text(fingerprint)
    return out


def network_policy_agent(settings: Settings, progress: Progress) -> Path:
    """kube-network-policies' static binary, changed as infra.cluster.network_policies says."""
    name, module = network_policies.NAME, network_policies.MODULE
    version = settings.network_policy_agent_version
    out = paths.tools_bin_dir(settings) / name
    marker = paths.tools_bin_dir(settings) / f"{name}.version"
    fingerprint = inputs_fingerprint(version, *network_policies.fingerprint())
    if out.is_file() and is_current(marker, fingerprint):
        return out
    progress(f"building {name} {version} (go build, about a minute)")
    go = require_tool("go", "install Go to build tools from the Go module proxy")
    download = _run(
        [go, "mod", "download", "-json", f"{module}@{version}"],
        go_env(settings, mod_mode=False),
        settings.cache_path,
        f"go mod download {module}",
    )
    src = paths.build_dir(settings) / name
    shutil.rmtree(src, ignore_errors=True)
    shutil.copytree(json.loads(download)["Dir"], src)
    for path in (src, *src.rglob("*")):  # the module cache's copy is read-only
        path.chmod(0o755 if path.is_dir() else 0o644)
    package = src / "pkg" / "networkpolicy"
    controller = package / "controller.go"
    controller.write_text(network_policies.patch_controller(controller.read_text()))
    (package / "nfqueue_target.go").write_text(network_policies.QUEUE_TARGET_GO)
    out.parent.mkdir(parents=True, exist_ok=True)
    _run(
        [go, "build", "-ldflags", "-s -w", "-o", str(out), "./cmd"],
        go_env(settings, mod_mode=True),
        src,
        f"go build {name}",
    )
    marker.write_text(fingerprint)
    return out


def network_policy_agent_image_archive(settings: Settings, progress: Progress) -> Path:
    """The agent's image: its static binary alone, as an OCI archive."""
    name = network_policies.NAME
    content = network_policy_agent(settings, progress).read_bytes()
    out_dir = paths.images_dir(settings)
    archive = out_dir / f"{name}.oci.tar"
    marker = out_dir / f"{name}.built"
    image = network_policies.image_name(settings)
    fingerprint = inputs_fingerprint(hashlib.sha256(content).hexdigest(), image)
    if archive.is_file() and is_current(marker, fingerprint):
        return archive
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = images.ImageSpec(
        name=image, files=(images.ImageFile(f"bin/{name}", content),), entrypoint=(f"/bin/{name}",)
    )
    archive.write_bytes(images.oci_archive(spec))
    marker.write_text(fingerprint)
    return archive


def build_all(settings: Settings, progress: Progress) -> None:
    """Everything `lk cluster up` needs; instant when cached."""
    kubernetes_binaries(settings, progress)
    etcd(settings, progress)
    network_policy_agent_image_archive(settings, progress)
    coredns(settings, progress)
    helm(settings, progress)
    pause_image_archive(settings, progress)
