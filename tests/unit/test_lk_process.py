"""How the comparison and the fault suite stop an `lk` component: SIGTERM to `lk` alone, as the
kubelet sends it to a container's main process, then whatever outlived it is killed."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil
import pytest

from comparison import processes
from comparison.processes import LkProcess

# A stand-in for `lk stream`: it starts a child (Spark's JVM) and, on SIGTERM, writes down that
# it was asked to stop and exits; the child notes a SIGTERM of its own, which it must not get.
FAKE_LK = """#!{python}
import signal, subprocess, sys, time
from pathlib import Path
folder = Path(sys.argv[1])
child = subprocess.Popen([sys.executable, "-c", '''
import signal, sys, time
from pathlib import Path
signal.signal(signal.SIGTERM, lambda *_: (Path(sys.argv[1], "child-term").touch(), sys.exit(0)))
Path(sys.argv[1], "child-pid").write_text(str(__import__("os").getpid()))
time.sleep(120)
''', str(folder)])
def stop(*_):
    (folder / "lk-term").touch()
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
(folder / "ready").touch()
time.sleep(120)
"""


def test_stop_signals_lk_alone_then_ends_what_it_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "lk"
    fake.write_text(FAKE_LK.format(python=sys.executable))
    fake.chmod(0o755)
    monkeypatch.setattr(processes, "LK", fake)
    component = LkProcess("stream", [str(tmp_path)], {}, tmp_path / "stream.log")
    component.start()
    deadline = time.monotonic() + 30
    while not (tmp_path / "child-pid").exists() or not (tmp_path / "ready").exists():
        assert time.monotonic() < deadline, (tmp_path / "stream.log").read_text()
        time.sleep(0.1)
    child = int((tmp_path / "child-pid").read_text())

    component.stop(grace_s=10)

    assert (tmp_path / "lk-term").exists()
    assert not (tmp_path / "child-term").exists()  # the JVM is not stopped under `lk`
    assert not component.alive
    assert _gone(child, within_s=5), "the child outlived the stop"


def _gone(pid: int, within_s: float) -> bool:
    deadline = time.monotonic() + within_s
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.1)
    return False
