"""`lk demo`, the main job, as a user runs it: both architectures live on one small workload,
every scenario, and the report.

The report opens in Chromium with every figure and no console error, and the numbers in its
JSON agree with what this test computes itself from the workload and the run's store: Lambda is
exact after its batch, Kappa is off by exactly its late-dropped events, readers never saw a gap
or a mix, and the compaction difference is the as-of join's alone.
"""

from __future__ import annotations

import re
from pathlib import Path

from comparison.figures import ComparisonRun
from comparison.sampler import served
from core.catalog import VIEW_NAMES
from core.comparison import view_distance
from core.oracle import (
    compute_views,
    load_jsonl_values,
    load_profiles_jsonl,
)
from core.settings import Settings
from core.store import state, versions
from core.store.connection import connect
from core.workload import default_profiles_path
from tests.browser import chromium
from tests.conftest import run_lk
from tests.unit.test_comparison_report import FIGURE_IDS


def test_demo_compares_both_architectures_live_and_reports(
    stack: Settings, stack_env: dict[str, str], tmp_path: Path
) -> None:
    done = run_lk(
        "demo", "--seed", "11", "--events", "900", "--rate", "30", "--sample-every", "2",
        # Every figure, at the least cost: the logic change is the same path as the fix.
        "--scenarios", "steady,late,bug-and-fix,compaction",
        "--out-dir", str(tmp_path),
        env=stack_env,
        timeout=1800,
    )  # fmt: skip
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr
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

    # Late data: Lambda's batch closes everything, so it is exact after it; Kappa is not,
    # exactly when its watermark dropped something.
    late = {x.architecture: x for x in run.late}
    assert late["lambda"].rows_off_after_batch == 0
    assert late["lambda"].repaired_at_s is not None
    assert (late["kappa"].rows_off_after_batch > 0) == (late["kappa"].late_dropped > 0)

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
