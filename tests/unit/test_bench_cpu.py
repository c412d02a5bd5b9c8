"""The bench's CPU account: a child that ends between two samples still counts (through what
its parent reaped), and a child seen alive and then reaped counts once, not twice."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from tests.benchmarks.cpu import CpuAccount

BURN_S = 0.4
TICKS_S = 0.05
"""The child burns this much more: /proc counts CPU in clock ticks of 10 ms and psutil adds user
and system times up, so a burn of exactly BURN_S can read as 0.39."""
# A child that burns BURN_S of CPU; held, it then waits for its stdin to close, not for a time (on
# a loaded machine a test can miss a window of any length). Its parent, the group's root, stays.
_CHILD = (
    "import sys, time; t = time.process_time()\n"
    f"while time.process_time() - t < {BURN_S + TICKS_S}: pass\n"
    "{then}"
)


def _root(held: bool) -> subprocess.Popen[bytes]:
    """The group's root: runs the child, reaps it, then waits to be killed. Its stdin, a pipe
    the test holds, is the child's too: closing it releases a held child."""
    child = [sys.executable, "-c", _CHILD.format(then="sys.stdin.read()" if held else "")]
    parent = f"import subprocess, time; subprocess.run({child!r}); time.sleep(60)"
    return subprocess.Popen([sys.executable, "-c", parent], stdin=subprocess.PIPE)


def _stop(root: subprocess.Popen[bytes]) -> None:
    assert root.stdin is not None
    root.stdin.close()  # a held child too ends
    root.kill()
    root.wait()


def _members(root: subprocess.Popen[bytes]) -> dict[str, tuple[int, list[int], bool]]:
    process = psutil.Process(root.pid)
    return {"g": (root.pid, [root.pid, *(c.pid for c in process.children(recursive=True))], True)}


def _wait(condition: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            pytest.fail("the child did not get there in time")
        time.sleep(0.05)


def _children(root: subprocess.Popen[bytes]) -> list[psutil.Process]:
    return psutil.Process(root.pid).children()


def _burnt(root: subprocess.Popen[bytes]) -> bool:
    children = _children(root)
    return bool(children) and sum(children[0].cpu_times()[:2]) >= BURN_S


def test_a_child_that_ends_between_samples_should_count() -> None:
    root = _root(held=False)
    try:
        account = CpuAccount()
        account.sample("step", {"g": (root.pid, [root.pid], True)})  # before the child runs
        _wait(lambda: _children(root) == [] and psutil.Process(root.pid).cpu_times()[2] > 0)
        account.sample("step", _members(root))
        assert account.steps["step"]["g"] >= BURN_S
    finally:
        _stop(root)


def test_a_child_seen_alive_then_reaped_should_count_once() -> None:
    root = _root(held=True)
    try:
        account = CpuAccount()
        account.sample("step", {"g": (root.pid, [root.pid], True)})
        _wait(lambda: _burnt(root))
        account.sample("step", _members(root))  # the child alive, its burn done
        assert root.stdin is not None
        root.stdin.close()  # releases the child
        _wait(lambda: _children(root) == [])
        account.sample("step", _members(root))  # reaped: nothing more to count
        assert BURN_S <= account.steps["step"]["g"] < 1.5 * (BURN_S + TICKS_S)  # the burn, once
        assert set(account.as_dict()["step"]) >= {"busy_s", "idle_s", "groups_cpu_s"}
    finally:
        _stop(root)
