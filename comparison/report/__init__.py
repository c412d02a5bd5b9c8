"""The comparison's report: one HTML page drawn from a `ComparisonRun`, beside its JSON.

    html = render(run)                        # the page, as a string
    page, data = write_report(run, out_dir)   # out_dir/report.html, out_dir/comparison.json

Every figure is a PNG drawn by matplotlib's Agg renderer (a `Figure` of its own, never
pyplot's global state) and inlined as a data URI, so the page requests nothing: it reads the
same from disk, from a bucket or from a mail attachment. Its one link is to `comparison.json`
in the same folder, the numbers behind every figure.

The page opens with the verdict (`comparison.verdict`: a row per question, linked to its
figure), then the figures' contents, the run's workload and scenarios, and the figures. Each
figure is a `<section>` with a stable id (`fig-error`, `fig-freshness`, ...) and a "How to read
this" paragraph beside it: what the figure shows and what a data engineer should conclude, then
the run's own numbers. A figure whose data the run did not measure (no compaction scenario, no
chart rendered, ...) says so in one line instead.

The modules of this package compute each group of figures' numbers and draw their PNGs; the
words are Jinja templates (`comparison/templates/`), one for the page and one per figure.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

from comparison.figures import ComparisonRun
from comparison.report.code_and_weight import code_figure, weight_figure
from comparison.report.common import Section, environment
from comparison.report.costs import cost_cpu_figure, cost_memory_figure, stored_figure
from comparison.report.errors import (
    ScenarioError,
    ViewError,
    error_figure,
    late_figure,
    scenario_errors,
    view_errors,
)
from comparison.report.freshness import freshness_figure, warmup_figure
from comparison.report.history_cost import OwnPoint, history_cost_figure, own_points
from comparison.report.reprocessing import (
    compaction_figure,
    reprocessing_figure,
    wrong_answers_figure,
)
from comparison.report.segment_move import segment_move_figure
from comparison.verdict import verdict

__all__ = [
    "FIGURES",
    "JSON_FILE",
    "REPORT_FILE",
    "OwnPoint",
    "ScenarioError",
    "Section",
    "ViewError",
    "own_points",
    "render",
    "scenario_errors",
    "view_errors",
    "write_report",
]

REPORT_FILE: Final = "report.html"
JSON_FILE: Final = "comparison.json"

FIGURES: Final = (
    error_figure,
    warmup_figure,
    freshness_figure,
    late_figure,
    reprocessing_figure,
    history_cost_figure,
    wrong_answers_figure,
    segment_move_figure,
    compaction_figure,
    cost_cpu_figure,
    cost_memory_figure,
    stored_figure,
    weight_figure,
    code_figure,
)
"""The report's figures, in reading order: correctness, then freshness, then cost."""

_WORKLOAD_KEYS: Final = (
    ("seed", "seed"),
    ("events", "events"),
    ("rate_per_s", "rate (events/s)"),
    ("duration_s", "duration (s)"),
)
"""The workload's fields a reader looks for first, with their names on the page; any other
follows by its key."""


def _workload(run: ComparisonRun) -> list[tuple[str, Any]]:
    named = dict(_WORKLOAD_KEYS)
    keys = [k for k, _ in _WORKLOAD_KEYS] + sorted(k for k in run.workload if k not in named)
    return [(named.get(k, k), run.workload.get(k)) for k in keys]


def render(run: ComparisonRun) -> str:
    """The report of `run`: one self-contained HTML page (figures inline, no request made)."""
    sections = [figure(run) for figure in FIGURES]
    return (
        environment()
        .get_template("report.html.j2")
        .render(
            created_at=run.created_at,
            json_file=JSON_FILE,
            verdict=verdict(run),
            sections=sections,
            workload=_workload(run),
            scenarios=run.scenarios,
            log_file=run.log_file,
        )
    )


def write_report(run: ComparisonRun, out_dir: Path) -> tuple[Path, Path]:
    """Write `report.html` and `comparison.json` into `out_dir`; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = run.write(out_dir / JSON_FILE)  # first: the page links to it
    page = out_dir / REPORT_FILE
    page.write_text(render(run), encoding="utf-8")
    return page, data
