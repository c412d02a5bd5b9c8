"""Background service processes, owned through PID files.

Each service runs in its own process group (so stopping it also stops its children) and is
remembered by a PID file under the stack folder, with the process's start time: `down` stops
only the very process a PID file names, so neither a service the user started by hand nor a
process that later reused the PID is ever touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


class StackError(RuntimeError):
    """A service could not be prepared, started or stopped; the message is one line for users."""


@dataclass(frozen=True)
class ManagedProcess:
    name: str
    run_dir: Path
    log_dir: Path

    @property
    def pid_file(self) -> Path:
        return self.run_dir / f"{self.name}.pid"

    @property
    def log_file(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def pid(self) -> int | None:
        """The PID we started, if that process is still alive (and still the same process)."""
        try:
            pid_text, _, started = self.pid_file.read_text().strip().partition(" ")
            pid = int(pid_text)
        except (FileNotFoundError, ValueError):
            return None
        if started and start_time(pid) not in (started, None):
            return None  # the PID now belongs to another process
        return pid if pid_alive(pid) else None

    def start(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: Path | None = None,
        user: str | None = None,
    ) -> int:
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with self.log_file.open("ab") as log:
            proc = subprocess.Popen(
                list(argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,  # own process group: stop() reaches the children too
                user=user,
            )
        self.pid_file.write_text(f"{proc.pid} {start_time(proc.pid) or ''}".strip() + "\n")
        return proc.pid

    def stop(
        self,
        timeout_s: float = 30.0,
        stop_signal: signal.Signals = signal.SIGTERM,
        whole_group: bool = True,
    ) -> bool:
        """Signal the process (group), then SIGKILL the group after the timeout.

        Returns True if a process was running.
        """
        pid = self.pid()
        if pid is None:
            self.pid_file.unlink(missing_ok=True)
            return False
        if whole_group:
            _signal_group(pid, stop_signal)
        else:
            os.kill(pid, stop_signal)
        if not wait_until(lambda: not pid_alive(pid), timeout_s):
            _signal_group(pid, signal.SIGKILL)
            wait_until(lambda: not pid_alive(pid), 10.0)
        self.pid_file.unlink(missing_ok=True)
        return True

    def log_tail(self, lines: int = 5) -> str:
        try:
            text = self.log_file.read_text(errors="replace").strip().splitlines()
        except FileNotFoundError:
            return ""
        return " | ".join(line.strip() for line in text[-lines:])


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(os.getpgid(pid), sig)
    except (ProcessLookupError, PermissionError):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child of ours counts as gone.
    try:
        with open(f"/proc/{pid}/stat") as stat:  # noqa: PTH123
            return stat.read().split(") ", 1)[1][0] != "Z"
    except (FileNotFoundError, IndexError):
        return True


def start_time(pid: int) -> str | None:
    """When the process started (clock ticks since boot, /proc's `starttime`): with the PID,
    it names one process; None where /proc cannot tell."""
    try:
        with open(f"/proc/{pid}/stat") as stat:  # noqa: PTH123
            return stat.read().rsplit(") ", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def port_open(host: str, port: int, timeout_s: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def wait_until(check: Callable[[], bool], timeout_s: float, interval_s: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            if check():
                return True
        except Exception:  # noqa: S110 - a service not answering yet is the normal case
            pass
        if time.monotonic() >= deadline:
            return False
        time.sleep(interval_s)


def run_tool(
    name: str, argv: Sequence[str], *, stdin: str | None = None, timeout_s: float = 120.0
) -> str:
    """Run a command-line tool; its stdout. A time-out or a non-zero exit is a `StackError`
    naming the tool and quoting the last line it wrote to stderr."""
    try:
        result = subprocess.run(
            list(argv), input=stdin, capture_output=True, text=True, check=False, timeout=timeout_s
        )
    except subprocess.TimeoutExpired as exc:
        raise StackError(f"{name} timed out after {timeout_s:.0f}s") from exc
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["no output"])[-1]
        raise StackError(f"{name} failed: {last}")
    return result.stdout
