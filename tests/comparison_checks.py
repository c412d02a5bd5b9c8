"""What a comparison run must show, wherever it ran: `lk demo` on the local stack
(`tests/comparison/`, `make test-compare`) or the chart's comparison Job on the cluster
(`tests/k8s/test_chart_on_cluster.py`, in `make test-k8s` and CI).

The run's numbers (`comparison.json`) must agree with what the test computes itself from the
workload, the log and the run's store: Lambda is exact after its batch, Kappa is off by
exactly its late-dropped events, each stream dropped exactly the workload's truly late events
(busy machine or not: CONTRACT §3 judges every record against the records before it in its
partition), readers never saw a gap or a mix, and the compaction difference is the as-of
join's alone. The report opens in Chromium with every figure and no console error.

While the run's feed produces, two CPU-bound loops run beside it, each in a session of its own
(as another tenant's work would, scheduled as a group of its own): the streams fall behind and
read partitions unevenly in larger micro-batches.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psutil

from comparison.figures import ComparisonRun
from core.catalog import VIEW_NAMES
from core.comparison import view_distance
from core.events import ProfileChange
from core.oracle import compute_views, late_event_ids
from tests.browser import chromium
from tests.unit.test_comparison_report import FIGURE_IDS, section_html

SCENARIOS = ("steady", "late", "bug-and-fix", "compaction", "segment-move")
"""Every figure at the least cost: the logic change is the same path as the fix."""
FEED_STARTS = "  producing "
"""The run's line as its live feed starts (the steady scenario)."""
FEED_DONE = "  produced "
"""The run's line once its feed has produced every line (the streams then catch up)."""
BUSY_LOOP = "while True:\n    pass\n"


@dataclass
class BusyLoops:
    """CPU-bound loops, each a process in a session of its own; stopped by PID. `line` starts
    them at the run's feed and stops them once it has produced."""

    count: int = 2
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)
    cpu_seconds: float = 0.0
    """What they used, read just before they were killed."""

    def line(self, text: str) -> None:
        if text.startswith(FEED_STARTS):
            self.start()
        elif text.startswith(FEED_DONE):
            self.stop()

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
class RunState:
    """What the test reads itself after the run: the log, each stream's late events, and every
    view each architecture serves."""

    records: Sequence[tuple[int, int, bytes | None]]
    """The `events` topic: (partition, offset, value), in each partition's order."""
    late_ids: Mapping[str, set[str]]
    """Per architecture, the events its live stream dropped as late."""
    served: Mapping[str, Mapping[str, list[dict[str, Any]]]]
    """Per architecture and view, the rows the serving layer answers."""


def check_run(
    run: ComparisonRun,
    report: str,
    values: Sequence[bytes],
    changes: Sequence[ProfileChange],
    state: RunState,
    delay_ms: int,
    *,
    in_a_pod: bool = False,
    cdc_enabled: bool = True,
) -> None:
    """Every check of a run that played `SCENARIOS`: its numbers (`run`, and the `report`'s
    HTML) against the test's own, from the workload's event `values` and profile `changes` (in
    the order produced, the compaction scenario's resend last) and the run's `state`;
    `in_a_pod`: the run was the chart's comparison Job; `cdc_enabled`: it wrote its profiles
    through the database."""
    # Every scenario played, in order; both architectures sampled in each.
    assert [s.name for s in run.scenarios] == list(SCENARIOS)
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
    # exactly when its watermark dropped something. Each stream drops exactly the workload's
    # truly late events, busy machine or not; the report prints that count beside the drops.
    late = {x.architecture: x for x in run.late}
    assert late["lambda"].rows_off_after_batch == 0
    assert late["lambda"].repaired_at_s is not None
    assert (late["kappa"].rows_off_after_batch > 0) == (late["kappa"].late_dropped > 0)
    truly_late = run.workload["late_events"]
    for architecture in ("lambda", "kappa"):
        assert late[architecture].late_dropped == truly_late, (architecture, truly_late)
    assert f"held {truly_late:,} truly late events" in section_html(report, "fig-late")

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

    # The log holds the workload as the generator counted it (line by line, each user's events
    # on the partition the generator computed), and what each stream dropped is exactly that.
    truly_late_ids = late_event_ids(state.records, delay_ms)
    assert len(truly_late_ids) == truly_late
    for architecture in ("lambda", "kappa"):
        assert state.late_ids[architecture] == truly_late_ids, architecture

    # The end state: Lambda equals the oracle (logic version 1); Kappa equals it without its
    # late-dropped events, except the compaction difference the run reported.
    lambda_oracle = compute_views(list(values), list(changes))
    kappa_late = state.late_ids["kappa"]
    kappa_oracle = compute_views(
        list(values), list(changes), keep=lambda e: e.event_id not in kappa_late
    )
    assert run.compaction is not None
    for view in VIEW_NAMES:
        lambda_now = state.served["lambda"][view]
        assert view_distance(view, lambda_now, lambda_oracle.views[view]).exact, view
        kappa_off = view_distance(view, state.served["kappa"][view], kappa_oracle.views[view]).off
        expected_off = run.compaction.rows_differing["kappa"] if view == "revenue_by_segment" else 0
        assert kappa_off == expected_off, view
    assert run.compaction.rows_differing["lambda"] == 0
    assert run.compaction.rows_differing_by_view == {
        "revenue_by_segment": run.compaction.rows_differing,
        "segment_totals": {"lambda": 0, "kappa": 0},
    }
    assert "segment_totals lambda 0, kappa 0." in section_html(report, "fig-compaction")
    assert run.compaction.profile_records_after < run.compaction.profile_records_before

    # A profile changes in the database: the moved users' every order counts for their new
    # segment in segment_totals, visible in both; revenue_by_segment keeps each order with the
    # segment it had then, so the new segment has none of it.
    move = run.segment_move
    assert move is not None and move.users > 0
    assert move.through == ("database" if cdc_enabled else "topic")
    for architecture in ("lambda", "kappa"):
        assert move.visible_s[architecture] is not None, architecture
        assert move.expected_moved_cents[architecture] > 0, architecture
        assert move.served_moved_cents[architecture] == move.expected_moved_cents[architecture]
        assert move.as_of_new_segment_cents[architecture] == 0, architecture

    # Cost, storage, the chart's weight and the code: measured, not empty. In the chart's Job
    # the stores are other pods, whose CPU is not the Job's to read, and the image has no Helm
    # SDK to render the chart with: those two are `lk demo`'s alone.
    shared = set() if in_a_pod else {"shared"}
    assert {c.architecture for c in run.cost} >= {"lambda", "kappa", *shared}
    assert all(c.cpu_seconds > 0 for c in run.cost if c.architecture != "shared")
    stored = {(s.architecture, s.what): s.bytes for s in run.stored}
    assert stored[("lambda", "master dataset")] > 0 and stored[("kappa", "retained log")] > 0
    modes = set() if in_a_pod else {"lambda", "kappa", "both"}
    assert {w.mode for w in run.chart_weight} == modes
    assert run.code is not None and run.code.shared > 0


SCENARIO_FIGURES = {"segment-move": "fig-segment-move"}
"""The figures that only their own scenario fills: a run that did not play it shows the figure
as not measured."""


def check_report_in_a_browser(url: str, unmeasured: Collection[str] = ()) -> None:
    """The report as a reader opens it: every figure with its picture, no console error; a
    figure of `unmeasured` (what the run could not measure where it ran), or of a scenario
    these checks do not play, says so instead."""
    unplayed = [fig for scenario, fig in SCENARIO_FIGURES.items() if scenario not in SCENARIOS]
    errors: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        page.on("pageerror", lambda e: errors.append(str(e)))
        page.goto(url, wait_until="load")
        for fig_id in FIGURE_IDS:
            assert page.locator(f"#{fig_id}").is_visible(), fig_id
            absent = fig_id in unmeasured or fig_id in unplayed
            shown = f"#{fig_id} p.absent" if absent else f"#{fig_id} img"
            assert page.locator(shown).count() == 1, fig_id
    assert errors == []
