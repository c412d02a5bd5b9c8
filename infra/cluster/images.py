"""Tiny OCI images written by hand, and importing images into the node's containerd.

An image here is one uncompressed layer of a few files (a static binary and its links), a
config and a manifest, packed as an OCI image layout tarball that
``ctr -n k8s.io images import`` reads. That is enough for the pause image (the sandbox of
every pod) and the smoke test's busybox; the project's own images come from podman.
"""

from __future__ import annotations

import hashlib
import io
import json
import tarfile
from dataclasses import dataclass, field
from pathlib import Path

from core.settings import Settings
from infra.cluster import paths
from infra.stack.process import run_tool

_FIXED_MTIME = 0  # reproducible tarballs: the same inputs give the same image digest


@dataclass(frozen=True)
class ImageFile:
    """One file of the image's only layer: its content, or a symlink target."""

    path: str  # inside the image, without a leading slash
    content: bytes = b""
    mode: int = 0o755
    link_to: str | None = None


@dataclass(frozen=True)
class ImageSpec:
    name: str  # full reference, e.g. registry.k8s.io/pause:3.10
    files: tuple[ImageFile, ...]
    entrypoint: tuple[str, ...] = ()
    cmd: tuple[str, ...] = ()
    env: tuple[str, ...] = ("PATH=/bin:/usr/bin:/sbin:/usr/sbin",)
    labels: dict[str, str] = field(default_factory=dict)


def _layer_tar(files: tuple[ImageFile, ...]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        dirs: set[str] = set()
        for f in files:
            parts = f.path.split("/")[:-1]
            for i in range(1, len(parts) + 1):
                d = "/".join(parts[:i])
                if d not in dirs:
                    dirs.add(d)
                    info = tarfile.TarInfo(d)
                    info.type = tarfile.DIRTYPE
                    info.mode = 0o755
                    info.mtime = _FIXED_MTIME
                    tar.addfile(info)
            info = tarfile.TarInfo(f.path)
            info.mtime = _FIXED_MTIME
            if f.link_to is not None:
                info.type = tarfile.SYMTYPE
                info.linkname = f.link_to
                info.mode = 0o777
                tar.addfile(info)
            else:
                info.size = len(f.content)
                info.mode = f.mode
                tar.addfile(info, io.BytesIO(f.content))
    return buf.getvalue()


def _digest(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def oci_archive(spec: ImageSpec) -> bytes:
    """The OCI image layout tarball of ``spec`` (what ``ctr images import`` reads)."""
    layer = _layer_tar(spec.files)
    layer_digest = _digest(layer)
    config: dict[str, object] = {
        "architecture": "amd64",
        "os": "linux",
        "config": {
            "Env": list(spec.env),
            **({"Entrypoint": list(spec.entrypoint)} if spec.entrypoint else {}),
            **({"Cmd": list(spec.cmd)} if spec.cmd else {}),
            **({"Labels": spec.labels} if spec.labels else {}),
        },
        "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
        "history": [{"created_by": "lambda-kappa infra/cluster/images.py"}],
    }
    config_bytes = json.dumps(config, sort_keys=True).encode()
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": _digest(config_bytes),
            "size": len(config_bytes),
        },
        "layers": [
            {
                "mediaType": "application/vnd.oci.image.layer.v1.tar",
                "digest": layer_digest,
                "size": len(layer),
            }
        ],
    }
    manifest_bytes = json.dumps(manifest, sort_keys=True).encode()
    tag = spec.name.rsplit(":", 1)[1] if ":" in spec.name.rsplit("/", 1)[-1] else "latest"
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": _digest(manifest_bytes),
                "size": len(manifest_bytes),
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": spec.name,
                    "org.opencontainers.image.ref.name": tag,
                },
            }
        ],
    }
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:

        def add(name: str, data: bytes) -> None:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            info.mtime = _FIXED_MTIME
            tar.addfile(info, io.BytesIO(data))

        add("oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
        add("index.json", json.dumps(index, sort_keys=True).encode())
        for blob in (config_bytes, manifest_bytes, layer):
            add(f"blobs/sha256/{hashlib.sha256(blob).hexdigest()}", blob)
    return out.getvalue()


def pause_image(binary: bytes, name: str) -> ImageSpec:
    return ImageSpec(name=name, files=(ImageFile("pause", binary),), entrypoint=("/pause",))


# The applets the smoke test (and a debugging shell) needs, as links to /bin/busybox.
BUSYBOX_APPLETS = (
    "sh", "cat", "echo", "env", "hostname", "httpd", "ls", "mkdir", "nc", "nslookup", "ps",
    "sleep", "wget",
)  # fmt: skip


def busybox_image(binary: bytes, name: str) -> ImageSpec:
    links = tuple(ImageFile(f"bin/{a}", link_to="busybox") for a in BUSYBOX_APPLETS)
    return ImageSpec(
        name=name,
        files=(ImageFile("bin/busybox", binary), *links, ImageFile("tmp/.keep", b"", 0o644)),
        cmd=("sh",),
    )


def ctr(settings: Settings, *args: str, timeout_s: float = 120.0) -> str:
    """Run ``ctr`` against the cluster's containerd (namespace k8s.io); its stdout."""
    argv = [
        "ctr",
        "--address",
        str(paths.containerd_socket(settings)),
        "-n",
        paths.CONTAINERD_NAMESPACE,
        *args,
    ]
    return run_tool(f"ctr {' '.join(args)}", argv, timeout_s=timeout_s)


def image_names(settings: Settings) -> set[str]:
    """The images containerd holds for the kubelet."""
    return {line.strip() for line in ctr(settings, "images", "ls", "-q").splitlines() if line}


def import_image(settings: Settings, archive: Path) -> None:
    """Import an OCI (or docker) image archive into the node, for pods to run it."""
    ctr(settings, "images", "import", str(archive), timeout_s=600)


def pin_image(settings: Settings, name: str) -> None:
    """Label an image so that the kubelet's image garbage collection never removes it."""
    ctr(settings, "images", "label", name, "io.cri-containerd.pinned=pinned")
