"""Where a process's CPU went, by thread name: what `cpu.py` cannot tell inside one JVM.

A Spark driver's JVM runs the streaming query's thread, the tasks' threads, the JIT compilers,
the garbage collector, the S3A and Kafka clients' threads. Linux names each thread (the JVM
gives it the Java name, cut to 15 characters); `snapshot` reads every thread's CPU-seconds
and `by_name` sums the difference of two snapshots per name, with digits folded
(``C2 CompilerThre#``), so threads that came and went count under their kind.
"""

from __future__ import annotations

import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_TICKS = os.sysconf("SC_CLK_TCK")
_DIGITS = re.compile(r"\d+")

Snapshot = dict[int, tuple[str, float]]
"""Thread id -> (name, CPU-seconds so far)."""


def snapshot(pid: int) -> Snapshot:
    """Every live thread of `pid`: its name and CPU-seconds (empty if the process is gone)."""
    threads: Snapshot = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return threads
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue  # ended meanwhile
        name = stat[stat.index("(") + 1 : stat.rindex(")")]
        fields = stat[stat.rindex(")") + 2 :].split()
        threads[int(tid)] = (name, (int(fields[11]) + int(fields[12])) / _TICKS)
    return threads


def by_name(before: Snapshot, after: Snapshot) -> dict[str, float]:
    """CPU-seconds per thread name between two snapshots, largest first. A thread that ended
    in between is lost (its time is the kernel's to reap, not per thread)."""
    used: dict[str, float] = {}
    for tid, (name, seconds) in after.items():
        start = before.get(tid, (name, 0.0))[1]
        kind = _DIGITS.sub("#", name)
        used[kind] = used.get(kind, 0.0) + seconds - start
    return dict(sorted(used.items(), key=lambda item: -item[1]))


JIT = "C# CompilerThre"
"""The JIT compilers' threads (C1 and C2), as `by_name` folds them."""


@dataclass
class CpuWindows:
    """The CPU of some processes (name -> PID) by thread, in consecutive windows of a run, with
    the micro-batches each window saw: a stream's JVM compiles for minutes after it starts, so
    its first minute says little of what a micro-batch costs later."""

    pids: dict[str, int]
    window_s: float = 30.0
    windows: list[dict[str, Any]] = field(default_factory=list)
    _started: float = 0.0
    _at: tuple[float, int, dict[str, Snapshot]] | None = None

    def start(self, batches: int) -> None:
        self._started = time.monotonic()
        self._at = (self._started, batches, self._snapshots())

    def tick(self, batches: int, *, last: bool = False) -> None:
        """Close the window if it is over; with `last`, if it is at least half over (a shorter
        one, a second or two of trailing idle, would only add noise)."""
        assert self._at is not None, "start() first"
        began, before, snapshots = self._at
        now = time.monotonic()
        if now - began < (self.window_s / 2 if last else self.window_s):
            return
        after = self._snapshots()
        used = {name: by_name(snapshots[name], after[name]) for name in self.pids}
        self.windows.append(
            {
                "from_s": round(began - self._started, 1),
                "to_s": round(now - self._started, 1),
                "micro_batches": batches - before,
                "cpu_s": {name: round(sum(u.values()), 2) for name, u in used.items()},
                "jit_cpu_s": round(sum(u.get(JIT, 0.0) for u in used.values()), 2),
                "by_thread": {
                    name: {t: round(s, 2) for t, s in u.items() if s >= 0.05}
                    for name, u in used.items()
                },
            }
        )
        self._at = (now, batches, after)

    def _snapshots(self) -> dict[str, Snapshot]:
        return {name: snapshot(pid) for name, pid in self.pids.items()}


def window_lines(windows: list[dict[str, Any]]) -> list[str]:
    """One line per window: CPU a micro-batch (and the JIT's part), and cores."""
    lines = []
    for w in windows:
        n, span = max(w["micro_batches"], 1), w["to_s"] - w["from_s"]
        total = sum(w["cpu_s"].values())
        parts = ", ".join(f"{name} {s / n:.2f}" for name, s in w["cpu_s"].items())
        lines.append(
            f"    {w['from_s']:5.0f}-{w['to_s']:4.0f} s: {w['micro_batches']} micro-batches, "
            f"{total / n:.2f} CPU-s each ({parts}; the JIT {w['jit_cpu_s'] / n:.2f}), "
            f"{total / span if span else 0:.2f} cores"
        )
    return lines


def window_figures(window: dict[str, Any]) -> dict[str, float]:
    """A window's CPU a micro-batch and in cores (every process of `CpuWindows` together)."""
    total = sum(window["cpu_s"].values())
    span = window["to_s"] - window["from_s"]
    return {
        "cpu_s_per_micro_batch": round(total / max(window["micro_batches"], 1), 2),
        "cores": round(total / span, 2) if span else 0.0,
    }
