"""Stopping what a test or a benchmark started, by its process group."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
from typing import Any


def stop_group(process: subprocess.Popen[Any], grace_s: float = 60) -> None:
    """SIGTERM to the process's own group (started with `start_new_session`), SIGKILL after
    `grace_s`: its children (a JVM, workers) go with it."""
    if process.poll() is not None:
        return
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
