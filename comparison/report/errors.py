"""The correctness figures: the error against the oracle over time, per scenario and per view
(`fig-error`), and the late events each stream dropped and the batch repaired (`fig-late`)."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.figure import Figure
from matplotlib.transforms import blended_transform_factory

from comparison import verdict
from comparison.figures import WARM_UP, ComparisonRun, LateData, Sample
from comparison.report.common import (
    SPAN_COLOURS,
    WARM_UP_COLOUR,
    Section,
    absent,
    colour,
    in_order,
    new_figure,
    ordered,
    seconds,
    section,
    views,
)


def _version_switches(samples: list[Sample]) -> list[float]:
    """When a version was first served (a Lambda hand-off, a Kappa switch), in time order.
    First sight, not any change: views read a moment apart may straddle a switch."""
    switches: list[float] = []
    seen: set[int] = set()
    for s in sorted(samples, key=lambda s: s.t_s):
        if s.version is None or s.version in seen:
            continue
        if seen:
            switches.append(s.t_s)
        seen.add(s.version)
    return switches


@dataclass(frozen=True, slots=True)
class ScenarioError:
    """One architecture's answers during one scenario, against the oracle: never averaged
    across scenarios, whose errors mean different things (in flight, dropped, a wrong
    version)."""

    scenario: str
    architecture: str
    reads: int
    """Reads of every view at once (one sample time)."""
    exact: int
    """Reads in which every view equalled the oracle."""
    unanswered: int
    mean_share_off: float
    """The share of rows off, over the scenario's answered reads and views."""
    rows_off_at_end: int | None
    """Rows off in every view at the scenario's last answered read."""


def scenario_errors(run: ComparisonRun) -> list[ScenarioError]:
    """Per scenario (in the order played, the warm-up left out) and architecture."""
    played = [s.name for s in run.scenarios]
    named = [s.scenario for s in run.samples if s.scenario != WARM_UP]
    scenarios = list(dict.fromkeys([*played, *named]))
    found = []
    for scenario in scenarios:
        for arch in ordered(s.architecture for s in run.samples):
            reads: dict[float, list[Sample]] = {}
            for s in run.samples:
                if s.scenario == scenario and s.architecture == arch:
                    reads.setdefault(s.t_s, []).append(s)
            if not reads:
                continue
            answered = {t: r for t, r in reads.items() if all(s.status == 200 for s in r)}
            shares = [s.share_off for r in answered.values() for s in r]
            last = answered[max(answered)] if answered else None
            found.append(
                ScenarioError(
                    scenario,
                    arch,
                    len(reads),
                    sum(all(s.rows_off == 0 for s in r) for r in answered.values()),
                    len(reads) - len(answered),
                    statistics.fmean(shares) if shares else 0.0,
                    None if last is None else sum(s.rows_off for s in last),
                )
            )
    return found


@dataclass(frozen=True, slots=True)
class ViewError:
    """One view of one architecture during one scenario, over its answered reads."""

    view: str
    architecture: str
    mean_share_off: float
    """Over every answered read: in the steady state, while events were still in flight."""
    rows_off_at_end: int
    rows_off_caught_up: int | None = None
    """At the first answered read once both streams had caught up with every line produced
    (`ScenarioSpan.caught_up_s`): what the stream left out, nothing in flight. None: the run
    did not record when they caught up, or read nothing after it."""


def caught_up_at(run: ComparisonRun, scenario: str = "steady") -> float | None:
    """When both streams had caught up during `scenario`, if the run recorded it."""
    return next((s.caught_up_s for s in run.scenarios if s.name == scenario), None)


def view_errors(run: ComparisonRun, scenario: str = "steady") -> list[ViewError]:
    """Per view (the catalogue's order) and architecture, over `scenario`'s answered reads."""
    caught_up = caught_up_at(run, scenario)
    found = []
    for view in views(s.view for s in run.samples):
        for arch in ordered(s.architecture for s in run.samples):
            answered = sorted(
                (s for s in run.samples
                 if (s.scenario, s.view, s.architecture, s.status) == (scenario, view, arch, 200)),
                key=lambda s: s.t_s,
            )  # fmt: skip
            if not answered:
                continue
            after = [s for s in answered if caught_up is not None and s.t_s >= caught_up]
            found.append(
                ViewError(
                    view,
                    arch,
                    statistics.fmean(s.share_off for s in answered),
                    answered[-1].rows_off,
                    after[0].rows_off if after else None,
                )
            )
    return found


def _draw_errors(run: ComparisonRun) -> tuple[Figure, list[str]]:
    """One panel per architecture: each view's share off over time, the scenarios as bands."""
    archs = ordered(s.architecture for s in run.samples)
    names = views(s.view for s in run.samples)
    fig = new_figure(1.2 + 2.3 * len(archs))
    axes = fig.subplots(len(archs), 1, sharex=True, squeeze=False)[:, 0]
    warm = [(w.deployed_at_s, w.first_answer_s) for w in run.warmup]
    for row, (ax, arch) in enumerate(zip(axes, archs, strict=True)):
        bands = [(WARM_UP, *_hull(warm), WARM_UP_COLOUR)] if warm else []
        bands += [
            (span.name, span.started_s, span.ended_s, SPAN_COLOURS[i % 6])
            for i, span in enumerate(run.scenarios)
        ]
        for name, started, ended, shade in bands:
            ax.axvspan(started, ended, color=shade, lw=0, zorder=0)
            if row == 0:  # the labels once, above the top panel
                where = blended_transform_factory(ax.transData, ax.transAxes)
                ax.text((started + ended) / 2, 1.02, name, transform=where, ha="center", fontsize=8)
        mine = [s for s in run.samples if s.architecture == arch]
        for j, view in enumerate(names):
            # A read without an answer is NaN: the line breaks there instead of bridging it.
            points = sorted(
                (s.t_s, s.share_off * 100 if s.status == 200 else math.nan)
                for s in mine
                if s.view == view
            )
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, drawstyle="steps-post", lw=1.3, label=view, color=colour(view, j))
        for k, t in enumerate(_version_switches(mine)):
            ax.axvline(t, color=colour(arch), ls=":", lw=1.2, label=None if k else "new version")
        gaps = [s.t_s for s in mine if s.status != 200]
        if gaps:
            ax.plot(gaps, [0] * len(gaps), "|", color="#cf222e", ms=12, label="no answer")
        ax.set_ylabel(f"{arch}\n% rows off")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[-1].set_xlabel("seconds since the run started")
    return fig, names


def _hull(spans: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return min(a for a, _ in spans), max(b for _, b in spans)


def error_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-error", "Error over time: share of rows off the oracle, per view"
    if not run.samples:
        return absent(fig_id, title)
    fig, names = _draw_errors(run)
    errors = scenario_errors(run)
    by_scenario: dict[str, list[ScenarioError]] = {}
    for x in errors:
        by_scenario.setdefault(x.scenario, []).append(x)
    per_view = view_errors(run, "steady")
    view_archs = ordered(x.architecture for x in per_view)
    found = {(x.view, x.architecture): x for x in per_view}
    caught_up = caught_up_at(run)
    once_caught_up = {
        arch: sum(x.rows_off_caught_up or 0 for x in mine)
        for arch in view_archs
        if (mine := [x for x in per_view if x.architecture == arch])
        and all(x.rows_off_caught_up is not None for x in mine)
    }
    return section(
        "error.html.j2",
        fig_id,
        title,
        fig,
        errors=errors,
        by_scenario=list(by_scenario.items()),
        views=names,
        warm=bool(run.warmup),
        gaps=sum(x.unanswered for x in errors),
        per_view=[
            (view, [found.get((view, arch)) for arch in view_archs])
            for view in views(x.view for x in per_view)
        ],
        view_archs=view_archs,
        off_at_end=[x for x in per_view if x.rows_off_at_end],
        caught_up_s=caught_up,
        once_caught_up=list(once_caught_up.items()),
    )


def late_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.LATE, "Late data: dropped by the stream path, repaired by the batch"
    if not run.late:
        return absent(fig_id, title)
    late = in_order(run.late)
    truly_late: int | None = run.workload.get("late_events")
    fig = new_figure(3.0)
    dropped, rows = fig.subplots(1, 2)
    # The bound beside the drops: the workload's truly late events, in grey.
    bound = [] if truly_late is None else [("truly late\n(workload)", truly_late, colour("shared"))]
    drawn = [*bound, *((x.architecture, x.late_dropped, colour(x.architecture)) for x in late)]
    bars = dropped.bar([n for n, _, _ in drawn], [v for _, v, _ in drawn],
                       color=[c for _, _, c in drawn])  # fmt: skip
    dropped.bar_label(bars, fmt="{:,.0f}", fontsize=8)
    dropped.margins(y=0.2)
    dropped.set_title("events dropped behind the watermark", fontsize=9)
    width = 0.38
    for i, x in enumerate(late):
        values = (x.rows_off_before_batch, x.rows_off_after_batch)
        pair = rows.bar([i - width / 2, i + width / 2], values, width, color=colour(x.architecture))
        pair[1].set_hatch("//")
        when = (
            "exact again at " + seconds(x.repaired_at_s)
            if x.repaired_at_s is not None
            else "never repaired"
        )
        rows.annotate(when, (i, max(values)), ha="center", va="bottom", fontsize=8,
                      xytext=(0, 3), textcoords="offset points")  # fmt: skip
    rows.set_xticks(range(len(late)), [x.architecture for x in late])
    rows.set_title("rows off: solid before, hatched after the batch", fontsize=9)
    rows.margins(y=0.2)
    per_view = views(v for x in late for v in (*x.views_off_before_batch, *x.views_off_after_batch))
    after = views(v for x in late for v in x.views_off_after_batch)
    return section(
        "late.html.j2",
        fig_id,
        title,
        fig,
        late=late,
        truly_late=truly_late,
        over=[x for x in late if truly_late is not None and x.late_dropped > truly_late],
        per_view=per_view,
        views_after=after,
        off_after=[(x, _off(x, after)) for x in late if x.views_off_after_batch],
        hopping=[
            x for x in late
            if x.views_off_after_batch.get("page_views_hopping", 0)
            > x.views_off_after_batch.get("page_views", 0) > 0
        ],
    )  # fmt: skip


def _off(x: LateData, in_order_of: Sequence[str]) -> list[tuple[str, int]]:
    """The views `x` still had off after the batch, with their rows, in the catalogue's order."""
    return [(v, n) for v in in_order_of if (n := x.views_off_after_batch.get(v, 0))]
