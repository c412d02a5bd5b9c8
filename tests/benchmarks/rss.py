"""Peak resident memory of the local stack while the benchmark runs (and, through
`tests.benchmarks.cpu`, the CPU each group used in each step).

A background thread samples, every second, the RSS of named groups of processes (each a root
PID and all its descendants): Kafka, MinIO and Postgres as the stack's PID files name them
(Postgres's backends are children of its postmaster), the bench's Spark JVM (with its Python
workers) and the serving API while it runs. The peak is of the *sum* at one instant, which is
what a node must hold; each group's own peak is reported too. RSS counts pages shared between
processes (Postgres's shared buffers) once per process, so the sum errs on the high side.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

import psutil

from core.settings import Settings
from tests.benchmarks.cpu import CpuAccount

MIB = 1024 * 1024


def _tree(root: int) -> list[int]:
    """`root` and every descendant that is alive now."""
    try:
        process = psutil.Process(root)
        return [root, *(child.pid for child in process.children(recursive=True))]
    except psutil.Error:
        return []


def _rss(pid: int) -> int:
    try:
        return int(psutil.Process(pid).memory_info().rss)
    except psutil.Error:
        return 0


def stack_pids(settings: Settings) -> dict[str, int]:
    """The PIDs `lk stack up` recorded for its services (those it did not start are absent)."""
    from infra.stack import stack

    pids = {}
    for service in stack.services(settings):
        pid = service.process.pid()
        if pid is not None:
            pids[service.name] = pid
    return pids


@dataclass
class RssReport:
    peak_total_bytes: int = 0
    peak_at_s: float = 0.0  # seconds since sampling started
    at_peak_bytes: dict[str, int] = field(default_factory=dict)  # each group at that instant
    group_peaks_bytes: dict[str, int] = field(default_factory=dict)
    samples: int = 0
    step_peaks_bytes: dict[str, int] = field(default_factory=dict)  # peak total per bench step

    def as_dict(self) -> dict[str, Any]:
        def mib(value: int) -> float:
            return round(value / MIB, 1)

        return {
            "peak_total_mib": mib(self.peak_total_bytes),
            "peak_at_s": round(self.peak_at_s, 1),
            "at_peak_mib": {k: mib(v) for k, v in self.at_peak_bytes.items()},
            "group_peaks_mib": {k: mib(v) for k, v in self.group_peaks_bytes.items()},
            "step_peaks_mib": {k: mib(v) for k, v in self.step_peaks_bytes.items()},
            "samples": self.samples,
        }


class RssSampler:
    """Samples the groups' RSS every `interval_s` in a daemon thread until `stop()`."""

    def __init__(self, interval_s: float = 1.0) -> None:
        self.interval_s = interval_s
        self.report = RssReport()
        self.cpu = CpuAccount()
        self._groups: dict[str, tuple[int, bool, bool]] = {}
        self._step = "setup"
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)
        self._started = time.monotonic()

    def watch(self, group: str, pid: int, *, counted: bool = True, tree: bool = True) -> None:
        """Sample `pid` (and, with `tree`, its descendants) as `group`; a group not `counted`
        is reported on its own but left out of the total (load generators, the bench itself)."""
        with self._lock:
            self._groups[group] = (pid, counted, tree)

    def forget(self, group: str) -> None:
        with self._lock:
            self._groups.pop(group, None)
            self.cpu.forget(group)

    def step(self, name: str) -> None:
        """Attribute the samples from now on to bench step `name` (for the per-step peaks)."""
        with self._lock:
            self._step = name

    def start(self) -> RssSampler:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> RssReport:
        self._stopping.set()
        if self._thread.is_alive():
            self._thread.join(timeout=10)
        return self.report

    def sample(self) -> tuple[dict[str, int], int, dict[str, tuple[int, list[int], bool]]]:
        """One sample: bytes per group (a PID in two groups' trees counts in the first), the
        total of the counted groups, and each group's (root, PIDs sampled, as a tree)."""
        with self._lock:
            groups = dict(self._groups)
        seen: set[int] = set()
        sizes = {}
        members = {}
        total = 0
        for group, (root, counted, tree) in groups.items():
            pids = [pid for pid in (_tree(root) if tree else [root]) if pid not in seen]
            seen.update(pids)
            members[group] = (root, pids, tree)
            sizes[group] = sum(_rss(pid) for pid in pids)
            total += sizes[group] if counted else 0
        return sizes, total, members

    def _run(self) -> None:
        while not self._stopping.is_set():
            sizes, total, members = self.sample()
            report = self.report
            with self._lock:
                self.cpu.sample(self._step, members)
                report.samples += 1
                if total > report.peak_total_bytes:
                    report.peak_total_bytes = total
                    report.peak_at_s = time.monotonic() - self._started
                    report.at_peak_bytes = sizes
                for group, size in sizes.items():
                    report.group_peaks_bytes[group] = max(
                        size, report.group_peaks_bytes.get(group, 0)
                    )
                step_peak = report.step_peaks_bytes.get(self._step, 0)
                report.step_peaks_bytes[self._step] = max(step_peak, total)
            self._stopping.wait(self.interval_s)
