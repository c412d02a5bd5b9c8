"""`lk demo`, the main job, as a user runs it: both architectures live on one small workload,
every scenario, and the report; on a busy machine.

The report opens in Chromium with every figure and no console error, and the numbers in its
JSON agree with what this test computes itself from the workload and the run's store: Lambda is
exact after its batch, Kappa is off by exactly its late-dropped events, readers never saw a gap
or a mix, and the compaction difference is the as-of join's alone: the table-table join
(`segment_totals`) is exact in both after compaction.

While the live feed produces, two CPU-bound loops run beside it, each in a session of its own
(as another tenant's work would, scheduled as a group of its own): the streams fall behind
and read partitions unevenly in larger micro-batches, and still each drops exactly the
workload's truly late events: CONTRACT §3 judges every record against the records before it
in its partition, whatever the micro-batches.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from comparison.figures import ComparisonRun
from comparison.sampler import served
from core.catalog import VIEW_NAMES
from core.comparison import view_distance
from core.kafka_io import read_topic
from core.oracle import (
    compute_views,
    late_event_ids,
    load_jsonl_values,
    load_profiles_jsonl,
)
from core.settings import Settings
from core.store import state, versions
from core.store.connection import connect
from core.store.streams import LAMBDA_SPEED
from core.workload import default_profiles_path
from tests.browser import chromium
from tests.conftest import ROOT
from tests.unit.test_comparison_report import FIGURE_IDS, section_html

FEED_STARTS = "  producing "
"""`lk demo`'s line as its live feed starts (the steady scenario)."""
FEED_DONE = "  produced "
"""`lk demo`'s line once its feed has produced every line (the streams then catch up)."""
BUSY_LOOP = "while True:\n    pass\n"


@dataclass
class BusyLoops:
    """CPU-bound loops, each a process in a session of its own; stopped by PID."""

    count: int = 2
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    cpu_seconds: float = 0.0
    """What they used, read just before they were killed."""

    def start(self) -> None:
        if self.processes:
            return
        for _ in range(self.count):
            self.processes.append(
                subprocess.Popen([sys.executable, "-c", BUSY_LOOP], start_new_session=True)
            )

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                try:
                    times = psutil.Process(process.pid).cpu_times()
                    self.cpu_seconds += times.user + times.system
                except psutil.Error:
                    pass
                process.kill()
            process.wait()
        self.processes.clear()


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
                if line.startswith(FEED_STARTS):
                    loops.start()
                elif line.startswith(FEED_DONE):
                    loops.stop()
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
        # Every figure, at the least cost: the logic change is the same path as the fix.
        "--scenarios", "steady,late,bug-and-fix,compaction",
        "--out-dir", str(tmp_path),
        env=stack_env,
        timeout=1800,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr
    assert done.busy_cpu_seconds > 0  # the loops ran beside the feed
    report = Path(re.search(r"report: (\S+)", out)[1])  # type: ignore[index]
    run = ComparisonRun.read(report.with_name("comparison.json"))
    ns = stack.namespaced(run.workload["namespace"])

    # Every scenario played, in order; both architectures sampled in each.
    assert [s.name for s in run.scenarios] == ["steady", "late", "bug-and-fix", "compaction"]
    for scenario in ("steady", "late"):
        assert {s.architecture for s in run.samples if s.scenario == scenario} == {
            "lambda",
            "kappa",
        }
    assert all(f.p50_s is not None and f.p50_s > 0 for f in run.freshness)

    # Deployment → first answer, measured per architecture before the steady state.
    assert {w.architecture for w in run.warmup} == {"lambda", "kappa"}
    assert all(w.seconds > 0 for w in run.warmup)

    # Late data: Lambda's batch closes everything, so it is exact after it; Kappa is not,
    # exactly when its watermark dropped something.
    late = {x.architecture: x for x in run.late}
    assert late["lambda"].rows_off_after_batch == 0
    assert late["lambda"].repaired_at_s is not None
    assert (late["kappa"].rows_off_after_batch > 0) == (late["kappa"].late_dropped > 0)
    # Each stream drops exactly the workload's truly late events, busy machine or not; the
    # report prints that count beside the drops.
    truly_late = run.workload["late_events"]
    for architecture in ("lambda", "kappa"):
        assert late[architecture].late_dropped == truly_late, (architecture, truly_late)
    assert f"held {truly_late:,} truly late events" in section_html(report.read_text(), "fig-late")

    # Every version change: readers saw the old answer, then the new one, whole.
    for change in run.reprocessing:
        if change.scenario == "bug" and change.readers.versions_seen[-1:] == []:
            continue
        assert change.readers.gaps == 0, change
        assert change.readers.mixed == 0, change
    assert {(c.scenario, c.architecture) for c in run.reprocessing} >= {
        ("fix", "lambda"), ("fix", "kappa"), ("compaction", "kappa")
    }  # fmt: skip
    for wrong in run.wrong_answers:
        assert wrong.seconds_wrong >= 0

    # The end state, computed here: Lambda equals the oracle (logic version 1); Kappa equals it
    # without its late-dropped events, except the compaction difference the run reported.
    events = report.with_name("events.jsonl")
    values = load_jsonl_values(events)
    profiles = default_profiles_path(events)
    changes = load_profiles_jsonl(profiles) + load_profiles_jsonl(
        profiles.with_name("profiles-resend.jsonl")
    )
    with connect(ns) as conn:
        live = versions.live_stream(conn, "kappa")
        assert live is not None
        late_ids = state.late_event_ids(conn, live)
        speed_late_ids = state.late_event_ids(conn, LAMBDA_SPEED)
    # The log holds the workload as the generator counted it (line by line, each user's events
    # on the partition the generator computed), and what each stream dropped is truly late.
    records = [(r.partition, r.offset, r.value) for r in read_topic(ns, ns.events_topic)]
    truly_late_ids = late_event_ids(records, ns.watermark_delay_ms)
    assert len(truly_late_ids) == truly_late
    assert speed_late_ids == truly_late_ids
    assert late_ids == truly_late_ids
    lambda_oracle = compute_views(values, changes)
    kappa_oracle = compute_views(values, changes, keep=lambda e: e.event_id not in late_ids)
    lambda_now, kappa_now = served(ns, "lambda"), served(ns, "kappa")
    for view in VIEW_NAMES:
        assert view_distance(view, lambda_now[view][0], lambda_oracle.views[view]).exact, view
        kappa_off = view_distance(view, kappa_now[view][0], kappa_oracle.views[view]).off
        expected_off = run.compaction.rows_differing["kappa"] if view == "revenue_by_segment" else 0  # type: ignore[union-attr]
        assert kappa_off == expected_off, view
    assert run.compaction is not None
    assert run.compaction.rows_differing["lambda"] == 0
    assert run.compaction.rows_differing_by_view == {
        "revenue_by_segment": run.compaction.rows_differing,
        "segment_totals": {"lambda": 0, "kappa": 0},
    }
    assert "segment_totals lambda 0, kappa 0." in section_html(report.read_text(), "fig-compaction")
    assert run.compaction.profile_records_after < run.compaction.profile_records_before

    # Cost, storage, the chart's weight and the code: measured, not empty.
    assert {c.architecture for c in run.cost} >= {"lambda", "kappa", "shared"}
    assert all(c.cpu_seconds > 0 for c in run.cost if c.architecture != "shared")
    stored = {(s.architecture, s.what): s.bytes for s in run.stored}
    assert stored[("lambda", "master dataset")] > 0 and stored[("kappa", "retained log")] > 0
    assert {w.mode for w in run.chart_weight} == {"lambda", "kappa", "both"}
    assert run.code is not None and run.code.shared > 0

    # The report, in a browser: every figure, no console error.
    errors: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(report.as_uri(), wait_until="load")
        for fig_id in FIGURE_IDS:
            assert page.locator(f"#{fig_id}").is_visible(), fig_id
            assert page.locator(f"#{fig_id} img").count() == 1, fig_id
    assert errors == []
    assert "published: http" in out
