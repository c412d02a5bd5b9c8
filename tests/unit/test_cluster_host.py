"""infra/cluster: the pure parts of host cleanup, DNS packets, builds and OCI images."""

from __future__ import annotations

import hashlib
import io
import json
import struct
import tarfile
from pathlib import Path

import pytest

from core.settings import Settings
from infra.cluster import build, cluster, images, install, network
from infra.cluster.host import Mount, mounts_to_unmount, parse_mountinfo
from infra.stack.process import StackError

MOUNTINFO = """\
22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw
30 22 0:25 / /run rw,nosuid shared:5 - tmpfs tmpfs rw
101 22 254:0 /work/s/cluster/kubelet /work/s/cluster/kubelet rw - ext4 /dev/vda rw
102 101 0:51 / /work/s/cluster/kubelet/pods/u1/volumes/secret/my\\040secret rw - tmpfs tmpfs rw
103 30 0:52 / /run/lk-cluster/containerd/io.containerd.grpc.v1.cri/netns/cni-1 rw - nsfs nsfs rw
104 30 0:53 / /run/lk-cluster/containerd/v2.task/k8s.io/abc/rootfs rw - overlay o rw
105 30 0:54 / /run/lk-clusterx rw - tmpfs tmpfs rw
106 30 0:55 / /run/lk-cluster/containerd/io.containerd.grpc.v1.cri/netns/cni-1 rw - nsfs nsfs rw
"""


def test_parse_mountinfo_unescapes_and_reads_the_fs_type() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    assert mounts[0] == Mount(22, 1, "/", "ext4", "/dev/vda")
    secret = mounts[3]
    assert secret.mount_point.endswith("volumes/secret/my secret")
    assert secret.fs_type == "tmpfs"
    assert secret.parent_id == 101


def test_mounts_to_unmount_deepest_first_and_only_ours() -> None:
    mounts = parse_mountinfo(MOUNTINFO)
    roots = [Path("/work/s/cluster/kubelet"), Path("/run/lk-cluster")]
    targets = mounts_to_unmount(mounts, roots)
    assert "/run/lk-clusterx" not in targets  # a sibling with the same prefix is not ours
    assert "/" not in targets and "/run" not in targets
    assert targets[-1] == "/work/s/cluster/kubelet"  # the root's own bind mount goes last
    depth = [t.count("/") for t in targets]
    assert depth == sorted(depth, reverse=True)
    # a stacked mount is unmounted once per layer, the later one first
    assert targets.count("/run/lk-cluster/containerd/io.containerd.grpc.v1.cri/netns/cni-1") == 2


def _answer(query: bytes, ips: list[str]) -> bytes:
    header = struct.pack(">HHHHHH", 0x4C4B, 0x8180, 1, len(ips), 0, 0)
    answers = b"".join(
        b"\xc0\x0c" + struct.pack(">HHIH", 1, 1, 30, 4) + bytes(int(p) for p in ip.split("."))
        for ip in ips
    )
    return header + query[12:] + answers


def test_dns_query_and_answer() -> None:
    query = network.dns_query("kubernetes.default.svc.cluster.local")
    assert b"\x0akubernetes\x07default\x03svc\x07cluster\x05local\x00" in query
    assert network.dns_answer_ips(_answer(query, ["10.96.0.1"])) == ["10.96.0.1"]
    nxdomain = bytearray(_answer(query, []))
    nxdomain[3] |= 3
    assert network.dns_answer_ips(bytes(nxdomain)) == []


KUBERNETES_GO_MOD = """\
module k8s.io/kubernetes

go 1.24.0

require (
\tk8s.io/api v0.0.0
)

replace (
\tk8s.io/api => ./staging/src/k8s.io/api
\tk8s.io/client-go => ./staging/src/k8s.io/client-go
\tgithub.com/other/thing => github.com/other/thing v1.0.0
)
"""


def test_build_module_replaces_each_staging_module_by_its_release() -> None:
    go_mod = build.render_build_go_mod(KUBERNETES_GO_MOD, "v1.34.4")
    assert "require k8s.io/kubernetes v1.34.4" in go_mod
    assert "\tk8s.io/api => k8s.io/api v0.34.4\n" in go_mod
    assert "\tk8s.io/client-go => k8s.io/client-go v0.34.4\n" in go_mod
    assert "github.com/other" not in go_mod
    assert "\ngo 1.24.0\n" in go_mod


def test_ldflags_stamp_the_version() -> None:
    ldflags = build.kubernetes_ldflags("v1.34.4")
    assert ldflags.startswith("-s -w ")
    assert "-X k8s.io/component-base/version.gitVersion=v1.34.4" in ldflags
    assert "-X k8s.io/component-base/version.gitMinor=34" in ldflags
    assert "-X k8s.io/client-go/pkg/version.gitVersion=v1.34.4" in ldflags
    assert build.helm_module("v3.22.0") == "helm.sh/helm/v3/cmd/helm"
    assert build.helm_module("v4.3.1") == "helm.sh/helm/v4/cmd/helm"
    helm = build.helm_ldflags("v3.22.0", "v1.34.4")
    assert "-X helm.sh/helm/v3/internal/version.version=v3.22.0" in helm
    # `helm template` without a cluster assumes the cluster's Kubernetes version, not v1.20
    assert "-X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=34" in helm


def test_oci_archive_is_a_valid_reproducible_layout() -> None:
    spec = images.busybox_image(b"\x7fELF fake", "lk.local/busybox:1.35")
    archive = images.oci_archive(spec)
    assert archive == images.oci_archive(spec)  # same inputs, same digest
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        files = {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    index = json.loads(files["index.json"])
    entry = index["manifests"][0]
    assert entry["annotations"]["io.containerd.image.name"] == "lk.local/busybox:1.35"
    assert entry["annotations"]["org.opencontainers.image.ref.name"] == "1.35"
    for name, blob in files.items():
        if name.startswith("blobs/sha256/"):
            assert hashlib.sha256(blob).hexdigest() == name.rsplit("/", 1)[1]
    manifest = json.loads(files[f"blobs/sha256/{entry['digest'].split(':')[1]}"])
    layer = files[f"blobs/sha256/{manifest['layers'][0]['digest'].split(':')[1]}"]
    with tarfile.open(fileobj=io.BytesIO(layer)) as tar:
        members = {m.name: m for m in tar.getmembers()}
    assert members["bin/busybox"].mode == 0o755
    assert members["bin/sh"].issym() and members["bin/sh"].linkname == "busybox"
    config = json.loads(files[f"blobs/sha256/{manifest['config']['digest'].split(':')[1]}"])
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]


def _pvc(**spec: object) -> dict[str, object]:
    return {
        "metadata": {
            "name": "data",
            "namespace": "ns",
            "uid": "u-1",
            "annotations": {"volume.kubernetes.io/storage-provisioner": "lk.local/hostpath"},
        },
        "spec": {
            "storageClassName": "standard",
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            **spec,
        },
        "status": {"phase": "Pending"},
    }


def test_provisioner_makes_a_pre_bound_volume_for_its_pending_claims() -> None:
    from infra.cluster import provisioner

    assert provisioner.wants_volume(_pvc())
    assert not provisioner.wants_volume(_pvc(volumeName="pvc-u-1"))  # already bound
    other = _pvc()
    other["metadata"]["annotations"] = {}  # type: ignore[index]
    assert not provisioner.wants_volume(other)  # another provisioner's claim
    pv = provisioner.volume_for(_pvc(), Path("/v/pvc-u-1"), "lk-node")
    assert pv["metadata"]["name"] == "pvc-u-1"
    assert pv["spec"]["claimRef"] == {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": "ns",
        "name": "data",
        "uid": "u-1",
    }
    assert pv["spec"]["capacity"] == {"storage": "1Gi"}
    assert pv["spec"]["hostPath"]["path"] == "/v/pvc-u-1"
    assert pv["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    released = {**pv, "status": {"phase": "Released"}}
    assert provisioner.released(released)
    assert not provisioner.released({**pv, "status": {"phase": "Bound"}})


def _settings_with_owner(tmp_path: Path, other: Path) -> Settings:
    settings = Settings(
        stack_dir=tmp_path / "ours",
        cluster_run_dir=tmp_path / "run",
        cluster_netns="lk-test-no-such-netns",
    )
    (tmp_path / "run").mkdir()
    other.mkdir(parents=True)
    (tmp_path / "run" / "owner").write_text(f"{other}\n")
    return settings


def test_claim_cleans_up_a_dead_cluster_left_by_another_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    other = tmp_path / "theirs" / "cluster"
    settings = _settings_with_owner(tmp_path, other)
    cleaned: list[Path] = []
    monkeypatch.setattr(cluster, "down", lambda s, _p: cleaned.append(s.stack_path))
    cluster.claim(settings, lambda _m: None)
    assert cleaned == [other.parent]


def test_claim_refuses_while_another_folders_cluster_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _settings_with_owner(tmp_path, tmp_path / "theirs" / "cluster")
    monkeypatch.setattr(cluster.network, "pids_in_netns", lambda _s: [4242])
    with pytest.raises(StackError, match="keeps its state in"):
        cluster.claim(settings, lambda _m: None)


def test_install_passes_an_all_digit_image_tag_as_a_string() -> None:
    """A short commit hash such as 5458245 is a number to `--set`; the schema wants a string."""
    argv = install.install_argv(Settings(), "both", "5458245")
    tags = [arg for arg in argv if ".tag=" in arg]
    assert tags == ["--set-string=image.tag=5458245"]
