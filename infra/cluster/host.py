"""What the cluster changes on the host itself, and how `down` puts it back.

- Kernel settings the kubelet sets (``protectKernelDefaults: false``): recorded before it first
  starts, restored on `down`.
- Mounts (pod volumes under the kubelet's root, container root filesystems and pod network
  namespaces under containerd's state and root): unmounted deepest first, read from
  /proc/self/mountinfo.
- cgroups the kubelet and runc make (``kubepods`` in every hierarchy): removed once empty.
- Folders made on the host by tools that cannot be told otherwise (``ip netns`` bind-mounts
  /run/netns; the kubelet always makes /var/log/containers): removed on `down` if they did not
  exist before `up` and are empty.
- The host's iptables: never touched; `down` checks that ``iptables-save`` is unchanged.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.settings import Settings
from infra.cluster import paths

# The host-wide settings the kubelet writes when protectKernelDefaults is false.
KUBELET_SYSCTLS = ("vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops")
KUBELET_CGROUP = "kubepods"


def _load(record: Path) -> Any:
    """A JSON record of what the host had before the cluster changed it; None if absent."""
    try:
        return json.loads(record.read_text())
    except FileNotFoundError:
        return None


def _save(record: Path, values: dict[str, Any]) -> None:
    record.parent.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(values, indent=2) + "\n")


def _sysctl_record(settings: Settings) -> Path:
    return paths.cluster_dir(settings) / "host-sysctls.json"


def record_sysctls(settings: Settings) -> None:
    """Remember the host's values before the kubelet's first start (once: a second `up` after
    a crash must not record the kubelet's values as the host's)."""
    record = _sysctl_record(settings)
    if record.is_file():
        return
    _save(record, {k: Path("/proc/sys", k).read_text().strip() for k in KUBELET_SYSCTLS})


def restore_sysctls(settings: Settings) -> list[str]:
    """Put back what the kubelet changed; the keys restored."""
    record = _sysctl_record(settings)
    values: dict[str, str] | None = _load(record)
    if values is None:
        return []
    changed = []
    for key, value in values.items():
        path = Path("/proc/sys", key)
        if path.read_text().strip() != value:
            path.write_text(value + "\n")
            changed.append(key)
    record.unlink()
    return changed


@dataclass(frozen=True)
class Mount:
    mount_id: int
    parent_id: int
    mount_point: str
    fs_type: str
    source: str


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal (\\040...)."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a /proc/<pid>/mountinfo text, in its order."""
    mounts = []
    for line in text.splitlines():
        if not line.strip():
            continue
        left, _, right = line.partition(" - ")
        fields = left.split()
        after = right.split()
        mounts.append(
            Mount(
                mount_id=int(fields[0]),
                parent_id=int(fields[1]),
                mount_point=_unescape(fields[4]),
                fs_type=after[0] if after else "",
                source=_unescape(after[1]) if len(after) > 1 else "",
            )
        )
    return mounts


def _under(path: str, roots: list[Path]) -> bool:
    return any(path == str(r) or path.startswith(str(r).rstrip("/") + "/") for r in roots)


def mounts_to_unmount(mounts: list[Mount], roots: list[Path]) -> list[str]:
    """Mount points at or under any of ``roots``, deepest (and latest) first, each once per
    time it is mounted (stacked mounts are unmounted as many times)."""
    picked = [m for m in mounts if _under(m.mount_point, roots)]
    order = {m.mount_id: i for i, m in enumerate(mounts)}
    picked.sort(key=lambda m: (m.mount_point.count("/"), order[m.mount_id]), reverse=True)
    return [m.mount_point for m in picked]


def cluster_mount_roots(settings: Settings) -> list[Path]:
    return [
        paths.kubelet_dir(settings),
        paths.containerd_root(settings),
        paths.run_dir(settings),
    ]


def unmount_all(settings: Settings) -> list[str]:
    """Unmount everything the cluster mounted; the mount points that were unmounted."""
    roots = cluster_mount_roots(settings)
    done = []
    for _ in range(3):  # a lazily detached parent can reveal nothing new; a few passes suffice
        targets = mounts_to_unmount(
            parse_mountinfo(Path("/proc/self/mountinfo").read_text()), roots
        )
        if not targets:
            break
        for target in targets:
            result = subprocess.run(["umount", target], capture_output=True, check=False)
            if result.returncode != 0:
                subprocess.run(["umount", "-l", target], capture_output=True, check=False)
            done.append(target)
    return done


def remaining_mounts(settings: Settings) -> list[str]:
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    return mounts_to_unmount(mounts, cluster_mount_roots(settings))


def cgroup_hierarchies() -> list[Path]:
    """Mount points of the host's cgroup hierarchies (v1 controllers and the v2 one)."""
    mounts = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
    return sorted({Path(m.mount_point) for m in mounts if m.fs_type in ("cgroup", "cgroup2")})


def kubelet_cgroups() -> list[Path]:
    return [h / KUBELET_CGROUP for h in cgroup_hierarchies() if (h / KUBELET_CGROUP).is_dir()]


def kubepods_pids() -> set[int]:
    """Every process in a cgroup the kubelet made: the containers (and pod sandboxes)."""
    pids: set[int] = set()
    for top in kubelet_cgroups():
        for folder, _, files in os.walk(top):
            if "cgroup.procs" in files:
                with contextlib.suppress(OSError, ValueError):
                    text = Path(folder, "cgroup.procs").read_text()
                    pids.update(int(p) for p in text.split())
    return pids


def remove_cgroups() -> list[Path]:
    """Remove the kubepods trees, deepest first (a cgroup with processes stays: rmdir fails)."""
    removed = []
    for top in kubelet_cgroups():
        dirs = sorted((Path(d) for d, _, _ in os.walk(top)), key=lambda p: len(p.parts))
        for d in reversed(dirs):
            with contextlib.suppress(OSError):
                d.rmdir()
        if not top.exists():
            removed.append(top)
    return removed


def iptables_fingerprint() -> str | None:
    """A digest of the host's iptables rules (counters and comments left out); None without
    iptables-save."""
    save = shutil.which("iptables-save")
    if save is None:
        return None
    result = subprocess.run([save], capture_output=True, text=True, check=False)
    lines = [
        line.split(" [")[0] if line.startswith(":") else line
        for line in result.stdout.splitlines()
        if line and not line.startswith("#")
    ]
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _iptables_record(settings: Settings) -> Path:
    return paths.cluster_dir(settings) / "host-iptables.sha256"


def record_iptables(settings: Settings) -> None:
    fingerprint = iptables_fingerprint()
    record = _iptables_record(settings)
    if fingerprint and not record.is_file():
        record.parent.mkdir(parents=True, exist_ok=True)
        record.write_text(fingerprint + "\n")


def iptables_unchanged(settings: Settings) -> bool | None:
    """Whether the host's iptables are what they were before `up` (None: nothing recorded)."""
    record = _iptables_record(settings)
    if not record.is_file():
        return None
    same = record.read_text().strip() == iptables_fingerprint()
    record.unlink()
    return same


# Made on the host whatever the configuration; `down` removes them if it made them (and they
# are empty), in this order (children first).
HOST_FOLDERS = (
    Path("/var/lib/kubelet/device-plugins"),  # the kubelet's fixed device plugin socket folder
    Path("/var/lib/kubelet"),
    Path("/run/netns"),
    Path("/var/log/containers"),
    Path("/var/lib/cni/results"),  # libcni's cache of results (containerd cannot move it)
    Path("/var/lib/cni"),
)


# What the kubelet leaves in those folders (removed with them if the cluster made them).
KUBELET_FILES = {
    Path("/var/lib/kubelet/device-plugins"): ("kubelet.sock", "kubelet_internal_checkpoint"),
}


def _folders_record(settings: Settings) -> Path:
    return paths.cluster_dir(settings) / "host-folders.json"


def record_folders(settings: Settings) -> None:
    record = _folders_record(settings)
    try:
        existed: dict[str, bool] = json.loads(record.read_text())
    except (FileNotFoundError, ValueError):
        existed = {}
    for folder in HOST_FOLDERS:  # what an earlier `down` could not remove stays ours
        existed.setdefault(str(folder), folder.exists())
    _save(record, existed)


def remove_made_folders(settings: Settings) -> list[Path]:
    """Remove the host folders the cluster made, if empty; the ones removed."""
    record = _folders_record(settings)
    existed: dict[str, bool] | None = _load(record)
    if existed is None:
        return []
    removed = []
    kept: dict[str, bool] = {}  # made by the cluster but not empty yet: remembered for later
    for name, was_there in existed.items():
        folder = Path(name)
        if was_there or not folder.is_dir():
            continue
        for own in KUBELET_FILES.get(folder, ()):
            (folder / own).unlink(missing_ok=True)
        if any(folder.iterdir()):
            kept[name] = False
            continue
        # ip netns bind-mounts /run/netns on itself (same device: os.path.ismount says no)
        mounted = parse_mountinfo(Path("/proc/self/mountinfo").read_text())
        for _ in (m for m in mounted if m.mount_point == str(folder)):
            subprocess.run(["umount", str(folder)], capture_output=True, check=False)
        try:
            folder.rmdir()
            removed.append(folder)
        except OSError:
            kept[name] = False
    if kept:
        _save(record, kept)
    else:
        record.unlink()
    return removed
