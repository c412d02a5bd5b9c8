"""`lk demo`, the main job, as a user runs it: both architectures live on one small workload,
every scenario, and the report; on a busy machine (`make test-compare`).

What a run must show is `tests/comparison_checks.py`'s, which the cluster's comparison Job
must show too (`tests/k8s/test_chart_on_cluster.py`, the one CI runs): this test reads the log
and the run's store on the local stack, as the cluster's reads them from a pod.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from comparison.figures import ComparisonRun
from comparison.sampler import served
from core.kafka_io import read_topic
from core.oracle import load_jsonl_values, load_profiles_jsonl
from core.settings import Settings
from core.store import state, versions
from core.store.connection import connect
from core.store.streams import LAMBDA_SPEED
from core.workload import default_profiles_path
from tests.comparison_checks import (
    SCENARIOS,
    BusyLoops,
    RunState,
    check_report_in_a_browser,
    check_run,
)
from tests.conftest import ROOT


@dataclass(frozen=True)
class Done:
    returncode: int
    stdout: str
    stderr: str
    busy_cpu_seconds: float


def run_demo_on_a_busy_machine(*args: str, env: dict[str, str], timeout: float) -> Done:
    """`lk demo` as a user runs it, with `BusyLoops` running while its feed produces; the
    loops are killed whatever happens."""
    lk = Path(sys.executable).with_name("lk")
    loops = BusyLoops()
    lines: list[str] = []
    with tempfile.TemporaryFile("w+") as stderr:
        process = subprocess.Popen(
            [str(lk), "demo", *args],
            cwd=ROOT,
            env={**os.environ, **env},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        watchdog = threading.Timer(timeout, _interrupt, (process,))
        watchdog.start()
        try:
            assert process.stdout is not None
            for line in process.stdout:
                lines.append(line)
                loops.line(line)
            process.wait()
        finally:
            watchdog.cancel()
            loops.stop()
            if process.poll() is None:
                process.kill()
                process.wait()
        stderr.seek(0)
        return Done(process.returncode, "".join(lines), stderr.read(), loops.cpu_seconds)


def _interrupt(process: subprocess.Popen[str]) -> None:
    """As on Ctrl-C: `lk demo` stops its deployment on the way out; killed if it does not."""
    process.send_signal(signal.SIGINT)
    try:
        process.wait(120)
    except subprocess.TimeoutExpired:
        process.kill()


def test_demo_compares_both_architectures_live_and_reports(
    stack: Settings, stack_env: dict[str, str], tmp_path: Path
) -> None:
    done = run_demo_on_a_busy_machine(
        "--seed", "11", "--events", "900", "--rate", "30", "--sample-every", "2",
        "--scenarios", ",".join(SCENARIOS),
        "--out-dir", str(tmp_path),
        env=stack_env,
        timeout=1800,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr
    assert done.busy_cpu_seconds > 0  # the loops ran beside the feed
    assert "published: http" in out
    report = Path(re.search(r"report: (\S+)", out)[1])  # type: ignore[index]
    run = ComparisonRun.read(report.with_name("comparison.json"))
    ns = stack.namespaced(run.workload["namespace"])

    events = report.with_name("events.jsonl")
    profiles = default_profiles_path(events)
    changes = [  # as produced: the workload's, the compaction's resend, the segment move's
        change
        for name in (profiles.name, "profiles-resend.jsonl", "profiles-moved.jsonl")
        for change in load_profiles_jsonl(profiles.with_name(name))
    ]
    with connect(ns) as conn:
        live = versions.live_stream(conn, "kappa")
        assert live is not None
        late_ids = {
            "kappa": state.late_event_ids(conn, live),
            "lambda": state.late_event_ids(conn, LAMBDA_SPEED),
        }
    records = [(r.partition, r.offset, r.value) for r in read_topic(ns, ns.events_topic)]
    answers = {a: {view: rows for view, (rows, _) in served(ns, a).items()} for a in late_ids}
    check_run(
        run,
        report.read_text(),
        load_jsonl_values(events),
        changes,
        RunState(records, late_ids, answers),
        ns.watermark_delay_ms,
    )
    check_report_in_a_browser(report.as_uri())
