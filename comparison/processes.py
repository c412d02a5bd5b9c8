"""The deployment's parts as the `lk` processes an operator runs, with what each one costs.

A comparison measures the architectures as they run for real: each component (`lk stream`,
`lk archive`, `lk batch`, `lk reprocess`, `lk serve`) is a process of its own, and its cost is
read from the operating system (psutil): CPU-seconds of its whole process tree (Spark's JVM is a
child of the Python driver) and the peak of the tree's resident memory, sampled.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil

LK = Path(sys.executable).with_name("lk")
"""The `lk` of the running environment (a comparison never runs another install's)."""


@dataclass(slots=True)
class Usage:
    """CPU-seconds and peak resident memory of a process tree, as sampled so far."""

    cpu_seconds: float = 0.0
    peak_rss_bytes: int = 0
    _cpu_by_pid: dict[int, float] = field(default_factory=dict)

    def sample(self, root: psutil.Process) -> None:
        """Add what the tree has used since the last sample. A child's CPU time is kept after
        it exits (its last sample stands), so short-lived children are undercounted by at most
        one sampling interval."""
        try:
            tree = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        rss = 0
        for proc in tree:
            try:
                with proc.oneshot():
                    times = proc.cpu_times()
                    self._cpu_by_pid[proc.pid] = times.user + times.system
                    rss += proc.memory_info().rss
            except psutil.Error:
                continue  # exited between the listing and the read
        self.cpu_seconds = sum(self._cpu_by_pid.values())
        self.peak_rss_bytes = max(self.peak_rss_bytes, rss)


@dataclass
class LkProcess:
    """One `lk` command run as a process of its own session (so that it and its JVM stop
    together), its output appended to `log`, its usage sampled while it runs."""

    name: str
    args: list[str]
    env: dict[str, str]
    log: Path
    cwd: Path | None = None
    process: subprocess.Popen[bytes] | None = None
    usage: Usage = field(default_factory=Usage)
    restarts: int = 0
    _sampler: threading.Thread | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("ab") as out:
            self.process = subprocess.Popen(
                [str(LK), *self.args],
                cwd=self.cwd,
                env={**os.environ, **self.env},
                start_new_session=True,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        self._sampler = threading.Thread(
            target=self._sample_until_exit, args=(self.process,), daemon=True
        )
        self._sampler.start()

    def _sample_until_exit(self, process: subprocess.Popen[bytes]) -> None:
        try:
            root = psutil.Process(process.pid)
        except psutil.Error:
            return
        base = Usage()  # this run's usage, added to what earlier runs (restarts) used
        spent_before = self.usage.cpu_seconds
        while process.poll() is None:
            base.sample(root)
            self.usage.cpu_seconds = spent_before + base.cpu_seconds
            self.usage.peak_rss_bytes = max(self.usage.peak_rss_bytes, base.peak_rss_bytes)
            time.sleep(0.5)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def ensure_running(self) -> bool:
        """Restart it if it died (as Kubernetes would); whether it had."""
        if self.alive:
            return False
        self.restarts += 1
        self.start()
        return True

    def wait(self, timeout_s: float | None = None) -> int:
        assert self.process is not None
        code = self.process.wait(timeout_s)
        if self._sampler is not None:
            self._sampler.join(5)
        return code

    def kill(self) -> None:
        assert self.process is not None
        os.killpg(self.process.pid, signal.SIGKILL)
        self.wait(30)

    def stop(self, grace_s: float = 60.0) -> None:
        """SIGTERM, as `kubectl delete pod` sends; SIGKILL after `grace_s`.

        The signal goes to `lk` alone, as the kubelet sends it to a container's main process:
        `lk` stops its queries and Spark, and Spark's JVM ends with it. Signalled too, the JVM
        would stop its SparkContext under a query still stopping (a traceback in the log)."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.send_signal(signal.SIGTERM)
        try:
            self.wait(grace_s)
        except subprocess.TimeoutExpired:
            self.kill()
        else:
            with contextlib.suppress(ProcessLookupError):  # what outlived `lk`, if anything
                os.killpg(self.process.pid, signal.SIGKILL)

    def tail(self, chars: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


@dataclass(frozen=True, slots=True)
class Finished:
    """A one-shot `lk` command run to its end."""

    returncode: int
    seconds: float
    usage: Usage
    output_tail: str


def run_to_end(process: LkProcess, timeout_s: float) -> Finished:
    """Run a one-shot command (`lk batch`, `lk reprocess`) and measure it."""
    started = time.monotonic()
    process.start()
    try:
        code = process.wait(timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        code = -9
    return Finished(code, time.monotonic() - started, process.usage, process.tail())
