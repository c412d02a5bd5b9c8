"""A local volume provisioner: PVCs of the default StorageClass get a folder on the node.

``python -m infra.cluster.provisioner --stack-dir <stack> --api-port 16443``, a host process
that talks to the API through the relay as the admin. Kubernetes' own hostpath provisioner
makes each folder 0750 root: pods running as a non-root user (the chart's, with fsGroup, which
hostPath volumes ignore) could not write. Here, as kind's local-path provisioner does, each
claim gets a world-writable folder under the cluster's state (``volumes/pvc-<uid>``), bound
through a pre-bound hostPath PersistentVolume; a released volume (reclaim policy Delete) has
its folder and PV deleted. It polls once a second: a one-node development cluster needs no
more.
"""

from __future__ import annotations

import argparse
import contextlib
import shutil
import sys
import time
from pathlib import Path
from typing import Any

from core.settings import Settings
from infra.cluster import api, paths
from infra.stack.process import StackError

PROVISIONER = "lk.local/hostpath"
_PROVISIONER_ANNOTATIONS = (
    "volume.kubernetes.io/storage-provisioner",
    "volume.beta.kubernetes.io/storage-provisioner",
)


def wants_volume(pvc: dict[str, Any]) -> bool:
    """A pending claim the PV controller handed to this provisioner."""
    meta, spec = pvc.get("metadata", {}), pvc.get("spec", {})
    annotations = meta.get("annotations") or {}
    ours = any(annotations.get(a) == PROVISIONER for a in _PROVISIONER_ANNOTATIONS)
    return (
        ours
        and not spec.get("volumeName")
        and pvc.get("status", {}).get("phase") == "Pending"
        and spec.get("volumeMode", "Filesystem") == "Filesystem"
    )


def volume_for(pvc: dict[str, Any], folder: Path, node: str) -> dict[str, Any]:
    """The PersistentVolume for ``pvc``, pre-bound to it."""
    meta, spec = pvc["metadata"], pvc["spec"]
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {
            "name": f"pvc-{meta['uid']}",
            "annotations": {"pv.kubernetes.io/provisioned-by": PROVISIONER},
        },
        "spec": {
            "capacity": {"storage": spec.get("resources", {}).get("requests", {}).get("storage")},
            "accessModes": spec.get("accessModes") or ["ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Delete",
            "storageClassName": spec.get("storageClassName"),
            "volumeMode": "Filesystem",
            "hostPath": {"path": str(folder), "type": "DirectoryOrCreate"},
            "claimRef": {
                "apiVersion": "v1",
                "kind": "PersistentVolumeClaim",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
            },
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [node],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def released(pv: dict[str, Any]) -> bool:
    annotations = pv.get("metadata", {}).get("annotations") or {}
    return (
        annotations.get("pv.kubernetes.io/provisioned-by") == PROVISIONER
        and pv.get("spec", {}).get("persistentVolumeReclaimPolicy") == "Delete"
        and pv.get("status", {}).get("phase") in ("Released", "Failed")
    )


def sync(settings: Settings, volumes: Path) -> None:
    """One round: provision the pending claims, delete the released volumes."""
    for pvc in api.get(settings, "/api/v1/persistentvolumeclaims").get("items", []):
        if not wants_volume(pvc):
            continue
        folder = volumes / f"pvc-{pvc['metadata']['uid']}"
        folder.mkdir(parents=True, exist_ok=True)
        folder.chmod(0o777)  # any user of the pod may write (hostPath ignores fsGroup)
        with contextlib.suppress(StackError):  # HTTP 409: made in an earlier round
            api.request(
                settings,
                "POST",
                "/api/v1/persistentvolumes",
                volume_for(pvc, folder, settings.cluster_node_name),
            )
            meta = pvc["metadata"]
            print(f"provisioned {meta['namespace']}/{meta['name']} in {folder}", flush=True)
    for pv in api.get(settings, "/api/v1/persistentvolumes").get("items", []):
        if not released(pv):
            continue
        folder = Path(pv["spec"].get("hostPath", {}).get("path", ""))
        if folder.parent == volumes:
            shutil.rmtree(folder, ignore_errors=True)
        with contextlib.suppress(StackError):
            api.request(settings, "DELETE", f"/api/v1/persistentvolumes/{pv['metadata']['name']}")
            print(f"deleted {pv['metadata']['name']} and {folder}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.cluster.provisioner")
    parser.add_argument("--stack-dir", required=True, type=Path)
    parser.add_argument("--api-port", required=True, type=int)
    parser.add_argument("--node-name", required=True)
    args = parser.parse_args(argv)
    settings = Settings(
        stack_dir=args.stack_dir, cluster_api_port=args.api_port, cluster_node_name=args.node_name
    )
    volumes = paths.volumes_dir(settings)
    volumes.mkdir(parents=True, exist_ok=True)
    print(f"provisioner {PROVISIONER}: volumes in {volumes}", flush=True)
    while True:
        try:
            sync(settings, volumes)
        except (StackError, OSError, ValueError) as exc:
            print(f"sync failed: {exc}", flush=True)
        time.sleep(1.0)


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        sys.exit(main())
