"""`infra.stack.process.ManagedProcess`: a PID file names one process, not whatever has its PID."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from infra.stack.process import ManagedProcess, start_time


def test_a_started_process_is_found_and_stopped(tmp_path: Path) -> None:
    process = ManagedProcess("sleeper", tmp_path / "run", tmp_path / "logs")
    pid = process.start([sys.executable, "-c", "import time; time.sleep(60)"])
    assert process.pid() == pid
    assert process.pid_file.read_text().split() == [str(pid), str(start_time(pid))]
    assert process.stop(timeout_s=10) is True
    assert process.pid() is None and not process.pid_file.exists()


def test_a_reused_pid_is_not_taken_for_ours(tmp_path: Path) -> None:
    process = ManagedProcess("gone", tmp_path / "run", tmp_path / "logs")
    process.run_dir.mkdir(parents=True)
    # This test's own PID, with another start time: as if ours had died and the PID moved on.
    process.pid_file.write_text(f"{os.getpid()} 1\n")
    assert start_time(os.getpid()) != "1"
    assert process.pid() is None
    assert process.stop() is False  # nothing signalled


def test_an_old_pid_file_without_start_time_is_still_read(tmp_path: Path) -> None:
    process = ManagedProcess("old", tmp_path / "run", tmp_path / "logs")
    process.run_dir.mkdir(parents=True)
    process.pid_file.write_text(f"{os.getpid()}\n")
    assert process.pid() == os.getpid()
