"""Where the machine's CPU went in each bench step: each watched group's CPU-seconds, and the
whole machine's busy and idle CPU-seconds, so a step's figure can be read against what ran.

`RssSampler` feeds it each second with the PIDs of every group (a root and its descendants).
A process's own user and system time counts from when it is first seen: a process that was
running when its group was first sampled counts from then, one that started later counts whole.
A process that ends between two samples would be lost, and many do: Postgres starts a backend
per connection. So for a group sampled as a tree, the CPU its root has reaped from children
(the kernel's `cutime` and `cstime`) counts too, less what those children were last seen using.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import psutil


def _cpu_seconds(pid: int) -> tuple[float, float] | None:
    """(own, reaped from its children) user and system CPU-seconds of `pid`; None if gone."""
    try:
        times = psutil.Process(pid).cpu_times()
    except psutil.Error:
        return None
    return times.user + times.system, times.children_user + times.children_system


def machine_seconds() -> tuple[float, float]:
    """(busy, idle) CPU-seconds of the whole machine since boot; waiting on I/O is idle."""
    times = psutil.cpu_times()
    idle = times.idle + getattr(times, "iowait", 0.0)
    return sum(times) - idle, idle


@dataclass
class _Group:
    seen: dict[int, float] = field(default_factory=dict)  # pid -> its own CPU-s when last seen
    reaped: float | None = None  # its root's reaped children's CPU-s when last sampled


@dataclass
class CpuAccount:
    """CPU-seconds per step and group; feed it with `sample`, read it with `as_dict`."""

    steps: dict[str, dict[str, float]] = field(default_factory=dict)
    machine: dict[str, dict[str, float]] = field(default_factory=dict)
    _groups: dict[str, _Group] = field(default_factory=dict)
    _machine_last: tuple[float, float] | None = None

    def sample(self, step: str, groups: dict[str, tuple[int, list[int], bool]]) -> None:
        """One sample. `groups`: name -> (root PID, the PIDs sampled now, sampled as a tree)."""
        used = self.steps.setdefault(step, {})
        for name, (root, pids, tree) in groups.items():
            used[name] = used.get(name, 0.0) + self._group_delta(name, root, pids, tree)
        busy, idle = machine_seconds()
        if self._machine_last is not None:
            machine = self.machine.setdefault(step, {"busy_s": 0.0, "idle_s": 0.0})
            machine["busy_s"] += busy - self._machine_last[0]
            machine["idle_s"] += idle - self._machine_last[1]
        self._machine_last = (busy, idle)

    def _group_delta(self, name: str, root: int, pids: list[int], tree: bool) -> float:
        first = name not in self._groups
        group = self._groups.setdefault(name, _Group())
        delta = 0.0
        now: dict[int, float] = {}
        reaped = 0.0
        for pid in pids:
            times = _cpu_seconds(pid)
            if times is None:
                continue
            now[pid], children = times
            if pid == root:
                reaped = children
            if pid in group.seen:
                delta += now[pid] - group.seen[pid]
            elif not first:  # started since the group's last sample
                delta += now[pid]
        if tree:
            if group.reaped is not None:
                gone = sum(s for pid, s in group.seen.items() if pid not in now and pid != root)
                delta += max(0.0, reaped - group.reaped - gone)
            group.reaped = reaped
        group.seen = now
        return delta

    def forget(self, name: str) -> None:
        """A group no longer watched: a later group of that name starts afresh."""
        self._groups.pop(name, None)

    def as_dict(self) -> dict[str, Any]:
        return {
            step: {
                **{k: round(v, 1) for k, v in self.machine.get(step, {}).items()},
                "groups_cpu_s": {
                    k: round(v, 1) for k, v in sorted(used.items(), key=lambda kv: -kv[1])
                },
            }
            for step, used in self.steps.items()
        }
