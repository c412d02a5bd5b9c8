"""The bench's CPU by thread (`tests/benchmarks/threads.py`): a thread's burn is found under its
name, in the window it happened in, and a window's figures are per micro-batch and in cores."""

from __future__ import annotations

import os
import threading
import time

from tests.benchmarks.threads import CpuWindows, by_name, snapshot, window_figures, window_lines


def _burn(seconds: float) -> None:
    end = time.process_time() + seconds
    while time.process_time() < end:
        pass


def test_a_live_threads_cpu_is_found_under_its_name() -> None:
    stop, burned = threading.Event(), threading.Event()

    def spin() -> None:
        # Its own CPU time, not the wall clock's: on a busy machine 0.4 s of wall time may give
        # the thread less than 0.2 s of CPU.
        while not stop.is_set():
            if time.thread_time() >= 0.25:
                burned.set()

    before = snapshot(os.getpid())
    worker = threading.Thread(target=spin)
    worker.start()
    try:
        assert burned.wait(timeout=60)
        after = snapshot(os.getpid())  # while it runs: an ended thread's time is lost
    finally:
        stop.set()
        worker.join()
    used = by_name(before, after)
    # Python names no native thread before 3.14: Linux gives it the process's name, digits
    # folded away as for any thread.
    assert sum(used.values()) >= 0.2
    assert all(not any(c.isdigit() for c in name) for name in used)


def test_windows_close_when_over_and_hold_their_micro_batches() -> None:
    windows = CpuWindows({"self": os.getpid()}, window_s=0.2)
    windows.start(batches=0)
    _burn(0.25)
    windows.tick(batches=5)  # over: closed
    windows.tick(batches=6)  # just opened: left open
    _burn(0.12)
    windows.tick(batches=7, last=True)  # over half over: closed
    windows.tick(batches=8, last=True)  # a trailing moment: dropped
    first, last = windows.windows
    assert first["micro_batches"] == 5 and last["micro_batches"] == 2
    assert first["cpu_s"]["self"] >= 0.2
    figures = window_figures(first)
    assert figures["cpu_s_per_micro_batch"] == round(first["cpu_s"]["self"] / 5, 2)
    assert 0 < figures["cores"] <= 2.0
    assert "5 micro-batches" in window_lines(windows.windows)[0]
