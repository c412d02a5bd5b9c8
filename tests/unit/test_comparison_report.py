"""The comparison's report (comparison.report): every figure drawn from a realistic run, shown
by a real browser (Debian's Chromium through Playwright) without a request or a console error;
a run that measured nothing says so per figure; the JSON beside it reads back equal. Served
over HTTP as a bucket serves it, every picture draws and every link leads somewhere: an anchor
to a section of the page, the JSON to the run."""

from __future__ import annotations

import functools
import html
import json
import math
import random
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from comparison.figures import (
    WARM_UP,
    ChartWeight,
    CodeSize,
    Compaction,
    ComparisonRun,
    ComponentCost,
    Freshness,
    LateData,
    ReadersView,
    Reprocessing,
    Sample,
    ScenarioSpan,
    SegmentMove,
    StoredBytes,
    Sweep,
    SweepPoint,
    Warmup,
    WrongAnswers,
)
from comparison.report import JSON_FILE, REPORT_FILE, render, write_report
from comparison.report.common import colour
from core.catalog import VIEW_NAMES
from tests.browser import chromium

FIGURE_IDS = (
    "fig-error",
    "fig-warmup",
    "fig-freshness",
    "fig-late",
    "fig-reprocessing",
    "fig-history-cost",
    "fig-wrong-answers",
    "fig-segment-move",
    "fig-compaction",
    "fig-cost-cpu",
    "fig-cost-memory",
    "fig-stored",
    "fig-weight",
    "fig-code",
)
VIEWS = VIEW_NAMES
"""All eight, `page_views_hopping` and `segment_totals` (issue 42) and `search_conversions`
(issue 55) among them."""
MIB, GIB = 2**20, 2**30
NOT_MEASURED = "Not measured in this run."


def _share_off(architecture: str, view: str, t: float) -> tuple[float, int]:
    """A plausible error curve and served version: Lambda's late rows vanish at each hourly-like
    hand-off (every 150 s here); Kappa keeps its late-dropped rows until a replay."""
    weight = 1.0 + VIEWS.index(view) / 4
    if architecture == "lambda":
        handoffs = [h for h in (150, 300, 450, 600) if h <= t]
        since = t - (handoffs[-1] if handoffs else 0)
        share = 0.004 * weight * since / 30 if t >= 120 else 0.0
        if 260 <= t < 330:  # the new logic is live, the batch with it not yet published
            share = 0.35
        if 440 <= t < 540:  # the buggy logic, until its recompute
            share = 0.6 if view == "revenue_by_segment" else 0.2
        return share, 1 + len(handoffs) + (t >= 330) + (t >= 540)
    share = 0.025 * weight if t >= 150 else 0.0
    if 260 <= t < 380:
        share = 0.35
    if 440 <= t < 510:
        share = 0.6 if view == "revenue_by_segment" else 0.2
    if t >= 650 and view == "revenue_by_segment":
        share += 0.04  # the compacted profiles' history
    return share, 1 + (t >= 380) + (t >= 510) + (t >= 650)


LATE_LAMBDA = {
    "page_views": 4,
    "unique_users": 1,
    "search_ctr": 2,
    "revenue_by_segment": 3,
    "sessions": 5,
    "page_views_hopping": 20,
    "segment_totals": 2,
    "search_conversions": 0,
}
"""Lambda's rows off per view before its batch (37 in all); none after it. Every view has its
number, as the sampler's `views_off` gives one per view of the catalogue."""
LATE_KAPPA = {**LATE_LAMBDA, "search_ctr": 0}
"""Kappa's rows off per view before and after Lambda's batch (35 in all): its dropped events
stay dropped. A dropped page view is off in ten hopping windows: 20 rows against 4."""
COMPACTION = Compaction(
    profile_records_before=1_830,
    profile_records_after=400,
    rows_differing={"lambda": 0, "kappa": 14},
    explanation="Kappa's replay joined 61 orders placed before a segment change with "
    "the user's current segment: the older profile versions were compacted away. "
    "Lambda's master dataset kept them.",
    rows_differing_by_view={
        "revenue_by_segment": {"lambda": 0, "kappa": 14},
        "segment_totals": {"lambda": 0, "kappa": 0},
    },
)
"""Lambda 0 and 0; Kappa 14 in the as-of join and 0 in the table-table join."""
SEGMENT_MOVE = SegmentMove(
    users=20,
    segment="moved-1790000000",
    through="database",
    visible_s={"lambda": 1.84, "kappa": 1.21},
    expected_moved_cents={"lambda": 912_345, "kappa": 912_345},
    served_moved_cents={"lambda": 912_345, "kappa": 912_345},
    as_of_new_segment_cents={"lambda": 0, "kappa": 0},
)
"""Both exact in segment_totals, Kappa first, nothing in the as-of join's new segment."""


def synthetic_run() -> ComparisonRun:
    """A run with every field filled: 12 minutes of both architectures, five scenarios."""
    rng = random.Random(11)
    samples = []
    for step in range(0, 720, 8):
        t = float(step)
        for architecture in ("lambda", "kappa"):
            for view in VIEWS:
                expected = 40 + step // 2
                if architecture == "kappa" and 376 <= t < 392:  # the switch's brief outage
                    samples.append(
                        Sample(t, "logic-change", architecture, view, 0, expected, 0, None, 503)
                    )
                    continue
                share, version = _share_off(architecture, view, t)
                scenario = ("steady", "late", "logic-change", "bug-and-fix", "compaction")[
                    min(step // 150, 4)
                ]
                samples.append(
                    Sample(
                        t,
                        scenario,
                        architecture,
                        view,
                        step * 25,
                        expected,
                        round(share * expected),
                        version,
                    )
                )
    lags = {
        architecture: [round(rng.lognormvariate(math.log(median), 0.45), 3) for _ in range(300)]
        for architecture, median in (("lambda", 2.2), ("kappa", 1.7))
    }
    return ComparisonRun(
        created_at="2026-11-24T15:30:00Z",
        workload={
            "seed": 42,
            "events": 18_000,
            "rate_per_s": 25,
            "duration_s": 720,
            "profiles": 400,
            "late_events": 410,
            "event_time_span_s": 4 * 3600,
            "produced_in_s": 720,
            "watermark_delay_minutes": 10,
            "cpus": 2,
            "memory_gib": 23.4,
        },
        scenarios=[
            ScenarioSpan("steady", "steady state", 15, 120),
            ScenarioSpan("late", "late events", 120, 240, ["410 events 20 min late"]),
            ScenarioSpan("logic-change", "logic change v2", 240, 420, ["deployed at 260 s"]),
            ScenarioSpan("bug-and-fix", "bug and fix", 420, 600, ["v-bug at 440 s, fixed by v3"]),
            ScenarioSpan("compaction", "profiles compacted", 600, 720),
        ],
        warmup=[Warmup("lambda", 0.0, 14.5), Warmup("kappa", 0.0, 11.0)],
        samples=samples,
        freshness=[
            Freshness("lambda", lags["lambda"], 2.2, 5.6),
            Freshness("kappa", lags["kappa"], 1.7, 4.4),
        ],
        late=[
            LateData("lambda", 402, 37, 0, 300.0, LATE_LAMBDA, dict.fromkeys(VIEWS, 0)),
            LateData("kappa", 398, 35, 35, None, LATE_KAPPA, LATE_KAPPA),
        ],
        reprocessing=[
            Reprocessing(
                "logic-change",
                "lambda",
                "v2",
                "batch recompute",
                62.0,
                210.5,
                int(2.1 * GIB),
                ReadersView(48, [3, 4], 0, 0),
            ),
            Reprocessing(
                "logic-change",
                "kappa",
                "v2",
                "replay",
                118.0,
                384.0,
                int(1.6 * GIB),
                ReadersView(52, [1, 2], 2, 0),
            ),
            Reprocessing(
                "bug-and-fix",
                "lambda",
                "v3",
                "batch recompute",
                70.0,
                231.0,
                int(2.2 * GIB),
                ReadersView(44, [6, 7], 0, 0),
            ),
            Reprocessing(
                "bug-and-fix",
                "kappa",
                "v3",
                "replay",
                55.0,
                190.0,
                int(1.5 * GIB),
                ReadersView(40, [2, 3], 0, 0),
            ),
        ],
        wrong_answers=[
            WrongAnswers("lambda", "v-bug", 440.0, 540.0, 70.0, 231.0),
            WrongAnswers("kappa", "v-bug", 440.0, 510.0, 55.0, 190.0),
        ],
        compaction=COMPACTION,
        segment_move=SEGMENT_MOVE,
        cost=[
            ComponentCost("kafka", "shared", 95.0, 820 * MIB),
            ComponentCost("postgres", "shared", 140.0, 310 * MIB),
            ComponentCost("minio", "shared", 22.0, 180 * MIB),
            ComponentCost("serving API", "shared", 64.0, 240 * MIB),
            ComponentCost("archiver", "lambda", 180.0, 1_400 * MIB),
            ComponentCost("batch", "lambda", 441.5, 2_250 * MIB),
            ComponentCost("speed layer", "lambda", 260.0, 1_350 * MIB),
            ComponentCost("kappa stream", "kappa", 275.0, 1_300 * MIB),
            ComponentCost("kappa replay", "kappa", 574.0, 1_650 * MIB),
        ],
        stored=[
            StoredBytes("lambda", "master dataset", 46 * MIB),
            StoredBytes("lambda", "batch views", 9 * MIB),
            StoredBytes("lambda", "real-time views", 3 * MIB),
            StoredBytes("lambda", "checkpoints", 2 * MIB),
            StoredBytes("kappa", "retained log", 31 * MIB),
            StoredBytes("kappa", "view versions", 11 * MIB),
            StoredBytes("kappa", "checkpoints", 3 * MIB),
        ],
        chart_weight=[
            ChartWeight(
                "lambda",
                35,
                {
                    "ConfigMap": 4,
                    "Deployment": 7,
                    "Job": 3,
                    "NetworkPolicy": 8,
                    "Role": 1,
                    "RoleBinding": 1,
                    "Secret": 1,
                    "Service": 6,
                    "ServiceAccount": 1,
                    "StatefulSet": 3,
                },
                1560,
                6_341_787_648,
            ),
            ChartWeight(
                "kappa",
                31,
                {
                    "ConfigMap": 4,
                    "Deployment": 6,
                    "Job": 3,
                    "NetworkPolicy": 8,
                    "Secret": 1,
                    "Service": 6,
                    "StatefulSet": 3,
                },
                1360,
                5_402_263_552,
            ),
            ChartWeight(
                "both",
                36,
                {
                    "ConfigMap": 4,
                    "Deployment": 8,
                    "Job": 3,
                    "NetworkPolicy": 8,
                    "Role": 1,
                    "RoleBinding": 1,
                    "Secret": 1,
                    "Service": 6,
                    "ServiceAccount": 1,
                    "StatefulSet": 3,
                },
                1860,
                7_415_529_472,
            ),
        ],
        code=CodeSize(
            shared=7_725,
            lambda_only=823,
            kappa_only=353,
            by_room={
                "core": {"part": "shared", "lines": 3_673},
                "lk": {"part": "shared", "lines": 1_300},
                "quality": {"part": "shared", "lines": 1_061},
                "serving": {"part": "shared", "lines": 1_032},
                "stream_engine": {"part": "shared", "lines": 357},
                "dags": {"part": "shared", "lines": 302},
                "batch_layer": {"part": "lambda", "lines": 625},
                "speed_layer": {"part": "lambda", "lines": 103},
                "dags/lambda_*": {"part": "lambda", "lines": 95},
                "kappa": {"part": "kappa", "lines": 320},
                "dags/kappa_*": {"part": "kappa", "lines": 33},
                "infra": {"part": "tooling", "lines": 3_761},
                "tests": {"part": "tooling", "lines": 11_788},
            },
        ),
        sweep=SWEEP,
        log_file="compare.log",
    )


SWEEP = Sweep(
    date="2026-11-28",
    machine={"cpus": 2, "memory_gib": 23.4, "kind": "a shared VM"},
    points=[
        SweepPoint("lambda", 10_000, 41.2, 60.1, 900 * MIB),
        SweepPoint("kappa", 10_000, 18.5, 25.0, None),
        SweepPoint("lambda", 100_000, 52.0, None, None),
        SweepPoint("kappa", 100_000, 31.0, 48.0, 800 * MIB),
        SweepPoint("lambda", 1_000_000, 96.0, 210.0, int(2.4 * GIB)),
        SweepPoint("kappa", 1_000_000, 160.0, 300.0, int(1.7 * GIB)),
        SweepPoint("lambda", 5_000_000, 290.0, 900.0, int(3.1 * GIB)),
        SweepPoint("kappa", 5_000_000, 760.0, 1_450.0, int(1.9 * GIB)),
    ],
    source="sweep-2026-11-28.json",
)
"""Kappa's replay sooner on small histories, Lambda's recompute on large ones."""


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[ComparisonRun, Path, Path]:
    """The synthetic run, its report and its JSON written once for the module (a render
    draws eleven figures: about a second)."""
    run = synthetic_run()
    page, data = write_report(run, tmp_path_factory.mktemp("report") / "out")
    return run, page, data


def section_html(page: str, fig_id: str) -> str:
    """The HTML of one figure's section."""
    start = page.index(f'id="{fig_id}"')
    end = page.find("<section", start)
    return page[start : end if end != -1 else len(page)]


def _collect_errors(page: Any, errors: list[str]) -> None:
    """Console errors and uncaught exceptions of `page`, each with where it came from.

    The browser's own probe for /favicon.ico, made when it shows a document that declares no
    icon (the JSON beside the page), is not the page's: the page declares an empty icon.
    """

    def on_console(message: Any) -> None:
        where = str(message.location.get("url", ""))
        if message.type == "error" and not where.endswith("/favicon.ico"):
            errors.append(f"{message.text} ({where})")

    page.on("console", on_console)
    page.on("pageerror", lambda e: errors.append(str(e)))


def test_the_report_shows_every_figure_in_a_browser_without_a_request(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    _, page_path, _ = written
    url = page_path.as_uri()
    requests: list[str] = []
    errors: list[str] = []
    with chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        page.on("request", lambda r: requests.append(r.url))
        _collect_errors(page, errors)
        page.goto(url, wait_until="load")
        for fig_id in FIGURE_IDS:
            section = page.locator(f"#{fig_id}")
            assert section.is_visible(), fig_id
            assert section.locator("img").count() == 1, fig_id
            assert section.locator("aside.how").is_visible(), fig_id
        broken = page.evaluate(
            "[...document.images].filter(i => !i.complete || i.naturalWidth < 200).length"
        )
        assert broken == 0
        assert page.get_by_role("link", name=JSON_FILE).get_attribute("href") == JSON_FILE
    # The page itself, and nothing else (images are inline data, never fetched).
    assert [r for r in requests if not r.startswith("data:")] == [url]
    assert errors == []


def test_the_full_report_has_every_part_and_no_url_but_its_json(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    page = written[1].read_text()
    for fig_id in FIGURE_IDS:
        section = section_html(page, fig_id)
        assert "How to read this" in section and NOT_MEASURED not in section, fig_id
    without_images = re.sub(r'src="data:image/png;base64,[A-Za-z0-9+/=]+"', 'src=""', page)
    assert not re.search(r"https?:|//[a-z]", without_images)  # nothing to fetch, nothing linked
    # The one link is the JSON; the icon is empty and inline, so a browser asks for none.
    assert set(re.findall(r'href="([^"#][^"]*)"', page)) == {JSON_FILE, "data:,"}
    assert '<link rel="icon" href="data:,">' in page
    # Numbers a reader looks for are in the tables, not only in pixels.
    reprocessing = section_html(page, "fig-reprocessing")
    assert "batch recompute" in reprocessing and "replay" in reprocessing and "3, 4" in reprocessing
    assert "Lambda&#x27;s master dataset kept them." in section_html(page, "fig-compaction")
    assert "18000" in page and "2026-11-24T15:30:00Z" in page


def test_a_run_that_measured_nothing_says_so_for_every_figure() -> None:
    run = ComparisonRun(created_at="2026-11-24T16:00:00Z", workload={"seed": 1})
    page = render(run)
    for fig_id in FIGURE_IDS:
        assert NOT_MEASURED in section_html(page, fig_id), fig_id
    assert "<img" not in page


def test_figures_without_their_data_say_so_while_the_others_draw() -> None:
    full = synthetic_run()
    run = ComparisonRun(
        created_at=full.created_at,
        workload=full.workload,
        samples=full.samples,
        freshness=[Freshness("lambda", [], None, None), *full.freshness[1:]],
        late=full.late,
        code=full.code,
    )
    page = render(run)
    drawn = {"fig-error", "fig-freshness", "fig-late", "fig-code"}
    for fig_id in FIGURE_IDS:
        section = section_html(page, fig_id)
        assert ("<img" in section) == (fig_id in drawn), fig_id
        assert (NOT_MEASURED in section) == (fig_id not in drawn), fig_id


def test_text_from_the_run_is_escaped() -> None:
    run = ComparisonRun(
        created_at="<em>now</em>",
        workload={"<b>note</b>": "<i>x</i>"},
        scenarios=[ScenarioSpan("late", "<u>late</u>", 0, 1, ["<s>note</s>"])],
        compaction=Compaction(10, 4, {"kappa": 1}, "<script>alert('x')</script> & more"),
    )
    page = render(run)
    for raw in ("<script>", "<b>", "<i>", "<em>", "<u>", "<s>"):
        assert raw not in page, raw
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt; &amp; more" in page


def test_the_json_beside_the_report_reads_back_equal(
    written: tuple[ComparisonRun, Path, Path], tmp_path: Path
) -> None:
    run, page, data = written
    assert (page.name, data.name) == (REPORT_FILE, JSON_FILE) and page.parent == data.parent
    assert ComparisonRun.read(data) == run
    empty = ComparisonRun(created_at="2026-11-24T16:00:00Z", workload={})
    assert ComparisonRun.read(empty.write(tmp_path / "empty.json")) == empty


@pytest.mark.parametrize("fig_id", FIGURE_IDS)
def test_each_figure_has_its_anchor_in_the_contents(fig_id: str) -> None:
    page = render(ComparisonRun(created_at="2026-11-24T16:00:00Z", workload={}))
    assert f'<a href="#{fig_id}">' in page


def _how(page: str, fig_id: str) -> str:
    """The "How to read this" of one figure, as text."""
    found = re.search(
        r'<aside class="how"><h3>How to read this</h3><p>(.*?)</p>',
        section_html(page, fig_id),
        re.S,
    )
    assert found is not None, fig_id
    return html.unescape(re.sub(r"<[^>]+>", "", found[1]))


def test_error_figures_are_per_scenario_and_leave_the_warm_up_out() -> None:
    def reads(scenario: str, t0: float, share: float) -> list[Sample]:
        return [
            Sample(t0 + t, scenario, architecture, view, 100, 100, round(share * 100), 1)
            for t in (0.0, 2.0)
            for architecture in ("lambda", "kappa")
            for view in VIEWS
        ]

    run = ComparisonRun(
        created_at="2026-11-24T16:00:00Z",
        workload={},
        scenarios=[
            ScenarioSpan("steady", "steady", 10, 20),
            ScenarioSpan("bug-and-fix", "", 20, 30),
        ],
        warmup=[Warmup("lambda", 0.0, 9.0), Warmup("kappa", 0.0, 8.0)],
        samples=[
            *reads(WARM_UP, 5, 0.9),
            *reads("steady", 10, 0.02),
            *reads("bug-and-fix", 20, 0.5),
        ],
    )
    page = render(run)
    how = _how(page, "fig-error")
    assert (
        "steady (events in flight, and those a stream dropped as late): lambda a mean 2.0% off"
        in how
    )
    assert "bug-and-fix (the wrong version, until its fix): lambda a mean 50.0% off" in how
    # Never a figure over scenarios or over the warm-up: (2% + 50%) / 2, or with its 90%.
    for blend in ("26.0%", "47.3%", "mean share off was"):
        assert blend not in how
    assert "warm-up" not in _table_rows(section_html(page, "fig-error"))
    assert "lambda 9.0 s; kappa 8.0 s; kappa answered first, 1.0 s before lambda" in _how(
        page, "fig-warmup"
    )


def _table_rows(section: str) -> str:
    """The rows of a figure's first table."""
    return section[section.index("<tbody>") : section.index("</tbody>")]


def test_the_late_figure_prints_the_truly_late_events_beside_each_drop() -> None:
    full = synthetic_run()
    page = render(full)
    how = _how(page, "fig-late")
    assert "The workload held 410 truly late events" in how
    assert "Dropped in this run: lambda 402, kappa 398; every stream within that bound." in how
    assert "can exceed" not in how  # the old single watermark's excess is no longer explained
    assert "<td>410</td>" in _table_rows(section_html(page, "fig-late"))
    over = replace(
        full, late=[LateData("lambda", 402, 37, 0, 300.0), LateData("kappa", 411, 35, 35, None)]
    )
    assert "more than the bound in kappa" in _how(render(over), "fig-late")


def test_freshness_says_once_how_much_the_demo_compresses_event_time() -> None:
    page = render(synthetic_run())  # 4 hours of event time produced in 720 s
    assert page.count("compresses event time") == 1
    assert "4.0 hours of event time were produced in 720 s" in _how(page, "fig-freshness")
    assert "20 times faster than they happened" in _how(page, "fig-freshness")


def test_the_history_cost_says_where_each_architecture_wins_from_the_sweep() -> None:
    how = _how(render(synthetic_run()), "fig-history-cost")
    assert "sweep of 2026-11-28 (2 CPUs, 23.4 GiB, a shared VM)" in how
    assert "Kappa's replay was faster at 10k and 100k events" in how
    assert "Lambda's batch recompute was faster at 1M and 5M events" in how
    assert "The lines cross between 100k and 1M events" in how
    assert "almost all of the time is start-up" in how
    assert "Kappa pays less to start, Lambda less per event: so Kappa wins small histories" in how
    assert "lambda 62.0 s (logic-change), kappa 118 s (logic-change); lambda was sooner" in how
    # The same sweep with the architectures' times swapped reads the other way round.
    swapped = replace(
        SWEEP,
        points=[
            replace(p, architecture="kappa" if p.architecture == "lambda" else "lambda")
            for p in SWEEP.points
        ],
    )
    how = _how(render(replace(synthetic_run(), sweep=swapped)), "fig-history-cost")
    assert "Lambda's batch recompute was faster at 10k and 100k events" in how
    assert "Lambda pays less to start, Kappa less per event: so Lambda wins small histories" in how


def test_without_a_sweep_the_history_cost_shows_the_run_alone_and_says_so() -> None:
    page = render(replace(synthetic_run(), sweep=None))
    section = section_html(page, "fig-history-cost")
    assert section.count("<img") == 1
    assert "No sweep over history sizes exists yet" in _how(page, "fig-history-cost")
    assert "sweep 2026" not in section
    alone = replace(synthetic_run(), sweep=None, reprocessing=[])
    assert NOT_MEASURED in section_html(render(alone), "fig-history-cost")


def test_a_sweep_alone_draws_with_a_word_on_the_missing_run_points() -> None:
    page = render(replace(synthetic_run(), reprocessing=[]))
    assert "This run reprocessed nothing" in _how(page, "fig-history-cost")
    assert section_html(page, "fig-history-cost").count("<img") == 1


def test_the_weight_text_follows_the_chart() -> None:
    full = synthetic_run()
    assert "both requests less CPU and memory" in _how(render(full), "fig-weight")
    heavy = [
        replace(w, cpu_requests_millicores=5000) if w.mode == "both" else w
        for w in full.chart_weight
    ]
    assert "both requests not less CPU and memory" in _how(
        render(replace(full, chart_weight=heavy)), "fig-weight"
    )


def test_the_history_cost_draws_no_conclusion_its_points_do_not_bear_out() -> None:
    points = [
        SweepPoint("lambda", 10_000, 10.0),
        SweepPoint("kappa", 10_000, 12.0),
        SweepPoint("lambda", 100_000, 30.0),  # Kappa faster here, against the two-point costs
        SweepPoint("kappa", 100_000, 20.0),
        SweepPoint("lambda", 1_000_000, 40.0),
        SweepPoint("kappa", 1_000_000, 90.0),
    ]
    run = replace(synthetic_run(), sweep=replace(SWEEP, points=points))
    how = _how(render(run), "fig-history-cost")
    assert "Lambda is cheaper on both counts." in how
    assert "wins at every size" not in how
    assert "The lines cross between 10k and 100k events, between 100k and 1M events." in how
    lambda_only = replace(run, sweep=replace(SWEEP, points=points[4:5]))
    assert "no history size measured for both architectures" in _how(
        render(lambda_only), "fig-history-cost"
    )


# --- issue 42: the two new views, and both profile joins after compaction ----------------------


def test_the_compaction_figure_shows_both_joins_lambda_exact_kappa_off_in_the_as_of_join_only(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    page = written[1].read_text()
    section = section_html(page, "fig-compaction")
    assert section.count("<img") == 1
    rows = _table_rows(section)
    assert (
        "<td>revenue_by_segment</td><td>as-of join (stream-table)</td><td>0</td><td>14</td>" in rows
    )
    assert "<td>segment_totals</td><td>table-table join</td><td>0</td><td>0</td>" in rows
    how = _how(page, "fig-compaction")
    # Why each join fares as it does, then the run's numbers, then what they say.
    assert "an as-of (stream-table) join" in how and "needs the history compaction removes" in how
    assert "a table-table join" in how
    assert "needs only the latest record, the one compaction keeps" in how
    assert "the log kept 400 of 1,830 profile records" in how
    assert (
        "rows differing: revenue_by_segment lambda 0, kappa 14; segment_totals lambda 0, kappa 0."
        in how
    )
    assert "Lambda rebuilt both joins exactly, from the full history its master dataset kept" in how
    assert (
        "Kappa lost 14 rows of the as-of join and none of the table-table join: compaction "
        "removed the history the first needs and kept the record the second needs" in how
    )
    assert "not measured" not in how


def test_the_segment_move_says_how_fast_each_showed_it_and_what_each_join_kept(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    page = written[1].read_text()
    rows = _table_rows(section_html(page, "fig-segment-move"))
    assert "<td>lambda</td><td>1.8 s</td><td>912,345 ¢</td><td>0 ¢</td>" in rows
    assert "<td>kappa</td><td>1.2 s</td><td>912,345 ¢</td><td>0 ¢</td>" in rows
    how = _how(page, "fig-segment-move")
    assert "20 users moved to a new segment, moved-1790000000, in one transaction" in how
    assert "change data capture (Debezium on Kafka Connect)" in how
    assert "lambda 1.8 s, kappa 1.2 s." in how
    assert "so kappa showing it first is their micro-batches' timing" in how
    assert "each architecture served exactly what the oracle moves" in how
    assert "lambda 912,345 ¢, kappa 912,345 ¢." in how
    assert "the orders placed before the change stay in the old segments" in how
    assert "holds no revenue there in either architecture" in how


def test_a_segment_move_not_seen_in_time_or_not_exact_says_so() -> None:
    move = replace(
        SEGMENT_MOVE,
        through="topic",
        visible_s={"lambda": 2.5, "kappa": None},
        served_moved_cents={"lambda": 912_345, "kappa": 0},
        as_of_new_segment_cents={"lambda": 1_200, "kappa": 0},
    )
    how = _how(render(replace(synthetic_run(), segment_move=move)), "fig-segment-move")
    assert "one batch produced into profiles (no Kafka Connect runs here)" in how
    assert "Kappa did not show it within the scenario's timeout." in how
    assert "lambda 912,345 of 912,345 ¢, kappa 0 of 912,345 ¢." in how
    assert "Kappa was off when the scenario read it." in how
    assert "the new segment holds only orders placed after the change: lambda 1,200 ¢" in how


def test_several_moves_give_the_median_and_the_99th_percentile() -> None:
    each: dict[str, list[float | None]] = {"lambda": [1.0, 2.0, 4.0], "kappa": [1.5, 1.5, 3.5]}
    move = replace(SEGMENT_MOVE, visible_s={"lambda": 2.0, "kappa": 1.5}, each_visible_s=each)
    assert move.percentiles("lambda") == (2.0, pytest.approx(3.96))
    page = render(replace(synthetic_run(), segment_move=move))
    rows = _table_rows(section_html(page, "fig-segment-move"))
    assert "<td>lambda</td><td>2.0 s</td><td>4.0 s</td><td>912,345 ¢</td>" in rows
    how = _how(page, "fig-segment-move")
    assert "20 users moved to a new segment, 3 times one after another" in how
    assert "(the median of the moves; the table gives their 99th percentile too)" in how
    late = replace(move, each_visible_s={"lambda": [1.0, None], "kappa": [1.0, 1.0]})
    assert late.percentiles("lambda") == (None, None)


def test_a_table_table_join_off_after_compaction_is_not_blamed_on_compaction() -> None:
    off = replace(
        COMPACTION,
        rows_differing_by_view={
            **COMPACTION.rows_differing_by_view,
            "segment_totals": {"lambda": 0, "kappa": 3},
        },
    )
    how = _how(render(replace(synthetic_run(), compaction=off)), "fig-compaction")
    assert "segment_totals lambda 0, kappa 3" in how
    assert "Kappa's table-table join is 3 rows off: compaction cannot explain that" in how
    assert "kappa lost" not in how


def test_a_kappa_replay_that_lost_nothing_says_so() -> None:
    exact = replace(
        COMPACTION,
        rows_differing={"lambda": 0, "kappa": 0},
        rows_differing_by_view={
            "revenue_by_segment": {"lambda": 0, "kappa": 0},
            "segment_totals": {"lambda": 0, "kappa": 0},
        },
    )
    how = _how(render(replace(synthetic_run(), compaction=exact)), "fig-compaction")
    assert (
        "Kappa rebuilt both joins exactly: no order of this run was joined with a version "
        "compaction removed" in how
    )


def test_a_run_of_schema_2_reads_back_and_shows_the_as_of_join_alone(tmp_path: Path) -> None:
    data = json.loads(synthetic_run().write(tmp_path / "new.json").read_text())
    data["schema"] = 2
    del data["compaction"]["rows_differing_by_view"]
    for late in data["late"]:
        del late["views_off_before_batch"], late["views_off_after_batch"]
    old = ComparisonRun.from_json(data)
    assert old.schema == 2 and old.late[1].views_off_after_batch == {}
    assert old.compaction is not None and old.compaction.by_view() == {
        "revenue_by_segment": {"lambda": 0, "kappa": 14}
    }
    page = render(old)
    how = _how(page, "fig-compaction")
    assert "rows differing: revenue_by_segment lambda 0, kappa 14." in how
    assert "Kappa lost 14 rows of the as-of join to compaction" in how
    assert "The table-table join was not measured in this run" in how
    assert "segment_totals" not in _table_rows(section_html(page, "fig-compaction"))
    late = section_html(page, "fig-late")
    assert "Rows off per view" not in late and "Per view, after the batch" not in late


def test_the_json_carries_both_joins_and_the_old_field(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    data = json.loads(written[2].read_text())
    assert data["schema"] == 5
    assert data["segment_move"]["expected_moved_cents"] == {"lambda": 912_345, "kappa": 912_345}
    compaction = data["compaction"]
    assert compaction["rows_differing"] == {"lambda": 0, "kappa": 14}  # schema 2's readers
    assert compaction["rows_differing_by_view"] == {
        "revenue_by_segment": {"lambda": 0, "kappa": 14},
        "segment_totals": {"lambda": 0, "kappa": 0},
    }
    kappa = next(x for x in data["late"] if x["architecture"] == "kappa")
    assert kappa["views_off_after_batch"] == LATE_KAPPA


def test_the_report_lists_every_view_the_two_new_ones_included(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    page = written[1].read_text()
    assert len(VIEWS) == 8
    assert {"page_views_hopping", "segment_totals"} <= set(VIEWS)
    # Steady state: every view's line, and a row per view in its table.
    how = _how(page, "fig-error")
    assert "(8 views: " + ", ".join(VIEWS) + ")" in how
    assert "The second table splits the steady state by view, all 8 of them" in how
    error = section_html(page, "fig-error")
    per_view = error[error.index("The steady state, per view") :]
    for view in VIEWS:
        assert f"<td>{view}</td>" in per_view, view
    # Late data: rows off per view before and after the batch, the new views included.
    late = section_html(page, "fig-late")
    per_view = late[late.index("Rows off per view") :]
    assert "<td>page_views_hopping</td><td>20</td><td>0</td><td>20</td><td>20</td>" in per_view
    assert "<td>segment_totals</td><td>2</td><td>0</td><td>2</td><td>2</td>" in per_view
    how = _how(page, "fig-late")
    assert "lambda was exact in all 8 views" in how
    assert "kappa was off in page_views (4 rows), unique_users (1 row), revenue_by_segment" in how
    assert "page_views_hopping (20 rows), segment_totals (2 rows)" in how
    assert "missing from each of the ten overlapping 10-minute windows" in how


def test_the_report_lists_search_conversions_wherever_it_lists_the_views(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    """The eighth view, the pattern view, is in every list of views the report prints: they
    come from the run's samples and late counts (`core.catalog.VIEW_NAMES` in the sampler), in
    the catalogue's order, none from a list of seven."""
    page = written[1].read_text()
    assert VIEWS[-1] == "search_conversions"
    assert ", segment_totals, search_conversions) over everything produced" in _how(
        page, "fig-error"
    )
    error = section_html(page, "fig-error")
    steady = error[error.index("The steady state, per view") :]
    assert re.search(r"<tr><td>segment_totals</td>.*?</tr><tr><td>search_conversions</td>", steady)
    late = section_html(page, "fig-late")
    per_view = late[late.index("Rows off per view") :]
    row = "<tr><td>search_conversions</td><td>0</td><td>0</td><td>0</td><td>0</td></tr>"
    assert row in per_view


def test_every_view_has_a_colour_of_its_own() -> None:
    colours = [colour(view, j) for j, view in enumerate(VIEWS)]
    assert len(set(colours)) == len(VIEWS)


# --- the verdict first, the steady state once caught up, the bug's own sequences ---------------


def test_the_page_opens_with_the_verdict_then_the_contents_then_the_run() -> None:
    page = render(synthetic_run())
    order = ["<h1>", 'href="comparison.json"', 'id="verdict"', "<h2>Verdict</h2>", "<nav>",
             "<h2>Workload</h2>", "<h2>Scenarios</h2>", 'id="fig-error"']  # fmt: skip
    where = [page.index(marker) for marker in order]
    assert where == sorted(where), dict(zip(order, where, strict=True))
    verdict = page[page.index('id="verdict"') : page.index("<nav>")]
    linked = set(re.findall(r'<a href="#([^"]+)">', verdict))
    assert linked and linked <= set(FIGURE_IDS), linked
    assert "fig-freshness" in linked


def _steady_caught_up(at_s: float) -> ComparisonRun:
    run = synthetic_run()
    steady = replace(run.scenarios[0], caught_up_s=at_s)
    return replace(run, scenarios=[steady, *run.scenarios[1:]])


def test_the_steady_state_reads_in_flight_and_once_caught_up_apart() -> None:
    run = _steady_caught_up(126.0)  # the first read after it is at 128 s, still steady
    page = render(run)
    error = section_html(page, "fig-error")
    per_view = error[error.index("The steady state, per view") :]
    assert "<th>lambda: mean share off, events in flight</th>" in per_view
    assert "<th>kappa: rows off once caught up</th>" in per_view
    first_read = {
        arch: {s.view: s.rows_off for s in run.samples if s.t_s == 128 and s.architecture == arch}
        for arch in ("lambda", "kappa")
    }
    assert sum(first_read["lambda"].values()) > 0 == sum(first_read["kappa"].values())
    # page_views: lambda's share in flight, its end (t = 144), then its first read once caught up.
    page_views = re.search(r"<tr><td>page_views</td>((?:<td>[^<]*</td>)+)</tr>", per_view)
    assert page_views is not None
    cells = re.findall(r"<td>([^<]*)</td>", page_views[1])
    assert cells[2] == str(first_read["lambda"]["page_views"]) and cells[5] == "0"
    how = _how(page, "fig-error")
    assert "while the events produced were still in flight" in how
    lambda_off = sum(first_read["lambda"].values())
    assert (
        "Both streams had caught up with every line produced at 126 s; at the first answered read "
        f"after it, with nothing in flight, lambda was {lambda_off} rows off, kappa was exact:"
    ) in how
    # A run that did not record when its streams caught up shows neither.
    page = render(synthetic_run())
    assert "once caught up" not in section_html(page, "fig-error")
    assert "events in flight" in section_html(page, "fig-error")


def test_the_bug_and_fix_says_when_each_was_noticed_and_that_both_ran_at_once() -> None:
    full = synthetic_run()
    noticed = [replace(full.wrong_answers[0], noticed_s=12.0), full.wrong_answers[1]]
    page = render(replace(full, wrong_answers=noticed))
    rows = _table_rows(section_html(page, "fig-wrong-answers"))
    assert "<td>100 s</td><td>12.0 s</td><td>70.0 s</td>" in rows  # served wrong, noticed, repair
    assert "<td>70.0 s</td><td>\N{EN DASH}</td><td>55.0 s</td>" in rows
    how = _how(page, "fig-wrong-answers")
    assert "lambda served wrong answers for 100 s (noticed after 12.0 s)" in how
    assert "kappa served wrong answers for 70.0 s (never noticed by a sample)" in how
    assert (
        "Each architecture's bug and fix ran as its own sequence (wrong version, noticed, fixed), "
        "at the same time as the other's, on the same cores" in how
    )
    unnoticed = section_html(render(full), "fig-wrong-answers")
    assert "noticed after" not in unnoticed and "the tick when" not in unnoticed


# --- in a browser, served as a bucket serves it ------------------------------------------------


class _Quiet(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No line per request on the test's output."""


@contextmanager
def _served(folder: Path) -> Iterator[str]:
    """`folder` over HTTP on a free local port, for the length of the block: its base URL."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(_Quiet, directory=str(folder)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/"
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


_LINKS_AND_IMAGES = """() => ({
    images: [...document.images].map(i => [i.closest("section.figure")?.id ?? "",
                                            i.complete ? i.naturalWidth : 0]),
    anchors: [...document.querySelectorAll('a[href^="#"]')].map(
        a => [a.getAttribute("href"), !!document.getElementById(a.hash.slice(1))]),
    others: [...document.querySelectorAll('a[href]:not([href^="#"])')].map(a => a.href),
})"""


def test_every_picture_draws_and_every_link_leads_somewhere_in_a_browser(
    written: tuple[ComparisonRun, Path, Path],
) -> None:
    run, page_path, _ = written
    # From disk (file://): every link that is not an anchor names a file beside the page.
    html_ = page_path.read_text()
    beside = {h for h in re.findall(r'<a href="([^"#][^"]*)"', html_)}
    assert beside == {JSON_FILE} and all((page_path.parent / h).is_file() for h in beside)
    errors: list[str] = []
    with _served(page_path.parent) as base, chromium() as browser:
        page = browser.new_page(viewport={"width": 1400, "height": 900})
        _collect_errors(page, errors)
        page.goto(base + page_path.name, wait_until="load")
        found: dict[str, Any] = page.evaluate(_LINKS_AND_IMAGES)
        drawn = {fig_id: width for fig_id, width in found["images"]}
        assert sorted(drawn) == sorted(FIGURE_IDS) and len(found["images"]) == len(FIGURE_IDS)
        assert all(width > 0 for width in drawn.values()), drawn
        # Each anchor (the contents, the verdict's questions) points at a section of the page.
        targets = {href for href, _ in found["anchors"]}
        assert {f"#{fig_id}" for fig_id in FIGURE_IDS} <= targets
        assert [href for href, resolves in found["anchors"] if not resolves] == []
        # The one other link is the JSON beside the page, the run's numbers as written.
        assert found["others"] == [base + JSON_FILE]
        response = page.request.get(found["others"][0])
        assert response.status == 200
        assert ComparisonRun.from_json(response.json()) == run
        page.get_by_role("link", name=JSON_FILE).click()  # a reader following it gets it too
        page.wait_for_url(base + JSON_FILE)
    assert errors == []
