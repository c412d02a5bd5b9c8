"""The comparison's report: one HTML page drawn from a `ComparisonRun`, beside its JSON.

    html = render(run)                        # the page, as a string
    page, data = write_report(run, out_dir)   # out_dir/report.html, out_dir/comparison.json

Every figure is a PNG drawn by matplotlib's Agg renderer (a `Figure` of its own, never
pyplot's global state) and inlined as a data URI, so the page requests nothing: it reads the
same from disk, from a bucket or from a mail attachment. Its one link is to `comparison.json`
in the same folder, the numbers behind every figure.

Each figure is a `<section>` with a stable id (`fig-error`, `fig-freshness`, ...) and a "How to
read this" paragraph beside it: what the figure shows and what a data engineer should conclude,
then the run's own numbers. A figure whose data the run did not measure (no compaction
scenario, no chart rendered, ...) says so in one line instead.
"""

from __future__ import annotations

import base64
import html
import io
import itertools
import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Protocol, TypeVar

from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import FuncFormatter, NullFormatter
from matplotlib.transforms import blended_transform_factory

from comparison.figures import (
    AS_OF_JOIN,
    TABLE_TABLE_JOIN,
    WARM_UP,
    ChartWeight,
    Compaction,
    ComparisonRun,
    LateData,
    Reprocessing,
    Sample,
    Sweep,
    SweepPoint,
    WrongAnswers,
)
from core.catalog import VIEW_NAMES

REPORT_FILE: Final = "report.html"
JSON_FILE: Final = "comparison.json"

_ARCH_ORDER: Final = ("lambda", "kappa", "shared")
_ARCH_COLOURS: Final = {"lambda": "#1f6feb", "kappa": "#e8590c", "shared": "#8c959f"}
_PART_COLOURS: Final = {**_ARCH_COLOURS, "tooling": "#d0d7de", "unclassified": "#cf222e"}
_WARM_UP_COLOUR: Final = "#e9ecef"
_SPAN_COLOURS: Final = ("#fff3bf", "#d3f9d8", "#e5dbff", "#ffe3e3", "#d0ebff", "#f1f3f5")
_OTHER_COLOURS: Final = (
    "#2f9e44",
    "#ae3ec9",
    "#1098ad",
    "#f08c00",
    "#495057",
    "#c2255c",
    "#7048e8",
    "#8d5524",
)
"""Colours of what is not an architecture: one per view (seven), per kind of bytes stored."""
_T = TypeVar("_T", bound="_OfArchitecture")
_MISSING: Final = "\N{EN DASH}"
_KINDS: Final = colormaps["tab20"]
_DPI: Final = 100
_WIDTH_IN: Final = 9.0
_MIB: Final = 1024 * 1024
_GIB: Final = 1024 * _MIB


# --- small helpers ------------------------------------------------------------------------------


def _e(text: object) -> str:
    return html.escape(str(text))


def _ordered(names: Iterable[str]) -> list[str]:
    """Architectures in reading order: Lambda, Kappa, what they share, then any other."""
    rank = {name: i for i, name in enumerate(_ARCH_ORDER)}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


def _views(names: Iterable[str]) -> list[str]:
    """Views in the catalogue's order (CONTRACT §3), then any other by name."""
    rank = {name: i for i, name in enumerate(VIEW_NAMES)}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


class _OfArchitecture(Protocol):
    @property
    def architecture(self) -> str: ...


def _by_architecture(items: Iterable[_OfArchitecture]) -> list[str]:
    return _ordered(x.architecture for x in items)


def _in_order(items: Iterable[_T]) -> list[_T]:
    """Items sorted by their architecture, in the reading order of `_ordered`."""
    listed = list(items)
    rank = _by_architecture(listed)
    return sorted(listed, key=lambda x: rank.index(x.architecture))


def _colour(name: str, index: int = 0) -> str:
    return _PART_COLOURS.get(name) or _OTHER_COLOURS[index % len(_OTHER_COLOURS)]


def _seconds(value: float | None) -> str:
    if value is None:
        return _MISSING
    return (
        f"{value:,.0f} s" if value >= 100 else f"{value:,.2g} s" if value < 1 else f"{value:.1f} s"
    )


def _capitalised(sentence: str) -> str:
    return sentence[:1].upper() + sentence[1:]


def _rows(n: int) -> str:
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def _bytes(value: float) -> str:
    for unit, size in (("GiB", _GIB), ("MiB", _MIB), ("KiB", 1024)):
        if value >= size:
            return f"{value / size:,.1f} {unit}"
    return f"{value:,.0f} B"


def _png(fig: Figure) -> str:
    """The figure as an inline PNG (base64): no file, no URL."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=_DPI, metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def _image(fig: Figure, alt: str) -> str:
    return f'<img alt="{_e(alt)}" src="data:image/png;base64,{_png(fig)}">'


def _new_figure(height_in: float) -> Figure:
    return Figure(figsize=(_WIDTH_IN, height_in), layout="constrained")


def _table(headers: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


@dataclass(frozen=True, slots=True)
class Section:
    """One figure of the page: its anchor, its heading and its HTML."""

    fig_id: str
    title: str
    html: str


def _section(fig_id: str, title: str, how: str, body: str) -> Section:
    """A figure (`body`: its image, tables) with its "How to read this" beside it. `how` is
    HTML: callers escape what comes from the run."""
    return Section(
        fig_id,
        title,
        f'<section class="figure" id="{_e(fig_id)}"><h2>{_e(title)}</h2>'
        f'<div class="pair"><div class="plot">{body}</div>'
        f'<aside class="how"><h3>How to read this</h3><p>{how}</p></aside></div></section>',
    )


def _absent(fig_id: str, title: str) -> Section:
    return Section(
        fig_id,
        title,
        f'<section class="figure absent" id="{_e(fig_id)}"><h2>{_e(title)}</h2>'
        '<p class="absent">Not measured in this run.</p></section>',
    )


def _arch_legend(ax: Axes, names: Iterable[str]) -> None:
    handles = [Patch(color=_colour(n, i), label=n) for i, n in enumerate(names)]
    ax.legend(handles=handles, fontsize=8, loc="best")


def _grouped_bars(
    ax: Axes,
    groups: Sequence[str],
    series: Sequence[str],
    values: Mapping[tuple[str, str], float],
) -> None:
    """Bars per group (x), one per series side by side, coloured per series (architecture);
    `values[group, series]`, a missing pair drawn as no bar."""
    width = 0.8 / max(len(series), 1)
    for i, name in enumerate(series):
        xs = [g + (i - (len(series) - 1) / 2) * width for g in range(len(groups))]
        heights = [values.get((group, name), 0.0) for group in groups]
        ax.bar(xs, heights, width, color=_colour(name, i))
    ax.set_xticks(range(len(groups)), groups, fontsize=8)


# --- figures ------------------------------------------------------------------------------------


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
        for arch in _ordered(s.architecture for s in run.samples):
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
    rows_off_at_end: int


def view_errors(run: ComparisonRun, scenario: str = "steady") -> list[ViewError]:
    """Per view (the catalogue's order) and architecture, over `scenario`'s answered reads."""
    found = []
    for view in _views(s.view for s in run.samples):
        for arch in _ordered(s.architecture for s in run.samples):
            answered = sorted(
                (s for s in run.samples
                 if (s.scenario, s.view, s.architecture, s.status) == (scenario, view, arch, 200)),
                key=lambda s: s.t_s,
            )  # fmt: skip
            if answered:
                share = statistics.fmean(s.share_off for s in answered)
                found.append(ViewError(view, arch, share, answered[-1].rows_off))
    return found


def _view_table(errors: Sequence[ViewError]) -> str:
    archs = _ordered(x.architecture for x in errors)
    found = {(x.view, x.architecture): x for x in errors}
    headers = ["view"]
    for arch in archs:
        headers += [f"{arch}: mean share off", f"{arch}: rows off at its end"]
    rows = []
    for view in _views(x.view for x in errors):
        row = [view]
        for arch in archs:
            x = found.get((view, arch))
            row += (
                [_MISSING, _MISSING]
                if x is None
                else [f"{x.mean_share_off:.1%}", f"{x.rows_off_at_end:,}"]
            )
        rows.append(row)
    return "<h3>The steady state, per view</h3>" + _table(headers, rows)


_SCENARIO_CAUSES: Final = {
    "steady": "events in flight, and those a stream dropped as late",
    "late": "before and after Lambda's batch",
    "logic-change": "the old logic, until each architecture's switch",
    "bug-and-fix": "the wrong version, until its fix",
    "compaction": "the profile joins after compaction",
}
"""What drives each scenario's error, named beside its figures."""


def _error_how(
    errors: list[ScenarioError], run: ComparisonRun, per_view: Sequence[ViewError] = ()
) -> str:
    by_scenario: dict[str, list[ScenarioError]] = {}
    for x in errors:
        by_scenario.setdefault(x.scenario, []).append(x)
    sentences = []
    for scenario, xs in by_scenario.items():
        cause = _SCENARIO_CAUSES.get(scenario)
        figures = ", ".join(
            f"{_e(x.architecture)} a mean {x.mean_share_off:.1%} off and "
            + (f"{x.rows_off_at_end:,} rows off at its end" if x.rows_off_at_end is not None
               else "no answer at its end")
            for x in xs
        )  # fmt: skip
        sentences.append(
            f"<em>{_e(scenario)}</em>" + (f" ({_e(cause)})" if cause else "") + f": {figures}."
        )
    gaps = sum(x.unanswered for x in errors)
    warm = (
        "the grey band is the warm-up (deployment → first answer, its own figure below), "
        "left out of every number here; "
        if run.warmup
        else ""
    )
    views = _views(s.view for s in run.samples)
    steady = ""
    if per_view:
        off = [x for x in per_view if x.rows_off_at_end]
        steady = (
            f" The second table splits the steady state by view, all {len(views)} of them; at "
            "its end "
            + (
                ", ".join(f"{_e(x.architecture)}'s {_e(x.view)} was {x.rows_off_at_end:,} rows off"
                          for x in off)
                if off else "every view of every architecture was exact"
            )
            + "."
        )  # fmt: skip
    return (
        f"Each line is one view's share of rows that differ from the oracle ({len(views)} views: "
        f"{_e(', '.join(views))}) over everything "
        f"produced when it was read; {warm}the coloured bands are the scenarios, and a dotted "
        "line is a new version first served (a Lambda hand-off, a Kappa switch). The figures "
        "are per scenario, never averaged across them: the error means something different in "
        "each. In this run: "
        + " ".join(sentences)
        + " "
        + (f"{gaps:,} reads got no answer (red ticks)." if gaps else "Every read got an answer.")
        + steady
    )


def error_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-error", "Error over time: share of rows off the oracle, per view"
    if not run.samples:
        return _absent(fig_id, title)
    archs = _ordered(s.architecture for s in run.samples)
    views = _views(s.view for s in run.samples)
    fig = _new_figure(1.2 + 2.3 * len(archs))
    axes = fig.subplots(len(archs), 1, sharex=True, squeeze=False)[:, 0]
    warm = [(w.deployed_at_s, w.first_answer_s) for w in run.warmup]
    for row, (ax, arch) in enumerate(zip(axes, archs, strict=True)):
        bands = [(WARM_UP, *_hull(warm), _WARM_UP_COLOUR)] if warm else []
        bands += [
            (span.name, span.started_s, span.ended_s, _SPAN_COLOURS[i % 6])
            for i, span in enumerate(run.scenarios)
        ]
        for name, started, ended, colour in bands:
            ax.axvspan(started, ended, color=colour, lw=0, zorder=0)
            if row == 0:  # the labels once, above the top panel
                where = blended_transform_factory(ax.transData, ax.transAxes)
                middle = (started + ended) / 2
                ax.text(middle, 1.02, name, transform=where, ha="center", fontsize=8)
        mine = [s for s in run.samples if s.architecture == arch]
        for j, view in enumerate(views):
            # A read without an answer is NaN: the line breaks there instead of bridging it.
            points = sorted(
                (s.t_s, s.share_off * 100 if s.status == 200 else math.nan)
                for s in mine
                if s.view == view
            )
            xs, ys = zip(*points, strict=True)
            ax.plot(xs, ys, drawstyle="steps-post", lw=1.3, label=view, color=_colour(view, j))
        for k, t in enumerate(_version_switches(mine)):
            ax.axvline(t, color=_colour(arch), ls=":", lw=1.2, label=None if k else "new version")
        gaps = [s.t_s for s in mine if s.status != 200]
        if gaps:
            ax.plot(gaps, [0] * len(gaps), "|", color="#cf222e", ms=12, label="no answer")
        ax.set_ylabel(f"{arch}\n% rows off")
        ax.set_ylim(bottom=0)
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    axes[-1].set_xlabel("seconds since the run started")
    errors = scenario_errors(run)
    table = _table(
        ("scenario", "architecture", "reads", "exact in every view", "no answer",
         "mean share off", "rows off at its end"),
        (
            (
                x.scenario, x.architecture, f"{x.reads:,}", f"{x.exact:,}", f"{x.unanswered:,}",
                f"{x.mean_share_off:.1%}",
                _MISSING if x.rows_off_at_end is None else f"{x.rows_off_at_end:,}",
            )
            for x in errors
        ),
    )  # fmt: skip
    per_view = view_errors(run, "steady")
    body = _image(fig, title) + table + (_view_table(per_view) if per_view else "")
    return _section(fig_id, title, _error_how(errors, run, per_view), body)


def _hull(spans: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return min(a for a, _ in spans), max(b for _, b in spans)


def warmup_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-warmup", "Warm-up: deployment → first answer"
    if not run.warmup:
        return _absent(fig_id, title)
    warm = _in_order(run.warmup)
    names = [w.architecture for w in warm]
    fig = _new_figure(0.9 + 0.5 * len(warm))
    ax = fig.subplots()
    bars = ax.barh(names, [w.seconds for w in warm], color=[_colour(n) for n in names])
    ax.bar_label(bars, labels=[_seconds(w.seconds) for w in warm], fontsize=8, padding=3)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    ax.set_xlabel("seconds from starting the processes to the first answer")
    each = "; ".join(f"{_e(w.architecture)} {_seconds(w.seconds)}" for w in warm)
    first = min(warm, key=lambda w: w.seconds)
    last = max(warm, key=lambda w: w.seconds)
    order = (
        f"{_e(first.architecture)} answered first, {_seconds(last.seconds - first.seconds)} "
        f"before {_e(last.architecture)}"
        if len(warm) > 1 and last.seconds > first.seconds
        else "they answered together"
    )
    how = (
        "From starting an architecture's processes (its stream's Python driver and Spark's JVM, "
        "Lambda's archiver beside it) to its stream's first committed micro-batch, when the API "
        "first has a view version of it to answer from: the time to deploy, paid again at "
        "every restart. Every other figure of the steady state starts after it, so it weighs "
        f"on none of them. In this run: {each}; {order}."
    )
    return _section(fig_id, title, how, _image(fig, title))


def freshness_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-freshness", "Freshness: produced → visible through the API"
    measured = [f for f in run.freshness if f.lags_s]
    if not measured:
        return _absent(fig_id, title)
    measured = _in_order(measured)
    fig = _new_figure(1.0 + 1.9 * len(measured))
    axes = fig.subplots(len(measured), 1, sharex=True, squeeze=False)[:, 0]
    summary = []
    for ax, f in zip(axes, measured, strict=True):
        p50, p99 = f.p50_s, f.p99_s
        ax.hist(f.lags_s, bins=40, color=_colour(f.architecture), alpha=0.8)
        for value, style, name in ((p50, "--", "p50"), (p99, ":", "p99")):
            if value is not None:
                ax.axvline(
                    value, color="#24292f", ls=style, lw=1.4, label=f"{name} {_seconds(value)}"
                )
        ax.set_ylabel(f"{f.architecture}\nevents")
        ax.legend(fontsize=8, loc="upper right")
        summary.append(
            f"{_e(f.architecture)} p50 {_seconds(p50)}, p99 {_seconds(p99)} over "
            f"{len(f.lags_s):,} events"
        )
    axes[-1].set_xlabel("seconds from produced to visible")
    how = (
        "Each bar counts produced events by how long they took from their hand-over to the "
        "producer to being visible through the serving API (the streams' committed offsets, "
        "polled every half second). The dashed line is the median, the dotted one the 99th "
        "percentile: what a dashboard waits for on a bad minute. Both architectures run the same "
        "stream engine on the same log, so a gap between them points at their triggers or at "
        f"Lambda's hand-offs. In this run: {'; '.join(summary)}. {_compression(run)}"
    )
    return _section(fig_id, title, how, _image(fig, title))


def _compression(run: ComparisonRun) -> str:
    """How much faster than it happened the run produced its workload's event time."""
    span = run.workload.get("event_time_span_s")
    produced_in = run.workload.get("produced_in_s") or run.workload.get("duration_s")
    if not span or not produced_in:
        return ""
    return (
        f"The demo compresses event time: the workload's {span / 3600:,.1f} hours of event time "
        f"were produced in {produced_in:,.0f} s of wall-clock time, {span / produced_in:,.0f} "
        "times faster than they happened. Freshness is wall-clock time; the watermark's delay "
        "is event time, so here it passes in "
        + _seconds(run.workload.get("watermark_delay_minutes", 0) * 60 * produced_in / span)
        + " of wall-clock time."
    )


def late_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-late", "Late data: dropped by the stream path, repaired by the batch"
    if not run.late:
        return _absent(fig_id, title)
    late = _in_order(run.late)
    names = [x.architecture for x in late]
    truly_late: int | None = run.workload.get("late_events")
    fig = _new_figure(3.0)
    dropped, rows = fig.subplots(1, 2)
    # The bound beside the drops: the workload's truly late events, in grey.
    bound = (
        [] if truly_late is None else [("truly late\n(workload)", truly_late, _colour("shared"))]
    )
    drawn = [*bound, *((x.architecture, x.late_dropped, _colour(x.architecture)) for x in late)]
    bars = dropped.bar([n for n, _, _ in drawn], [v for _, v, _ in drawn],
                       color=[c for _, _, c in drawn])  # fmt: skip
    dropped.bar_label(bars, fmt="{:,.0f}", fontsize=8)
    dropped.margins(y=0.2)
    dropped.set_title("events dropped behind the watermark", fontsize=9)
    phases = ("before the batch", "after the batch")
    width = 0.38
    for i, x in enumerate(late):
        values = (x.rows_off_before_batch, x.rows_off_after_batch)
        bars = rows.bar(
            [i - width / 2, i + width / 2], values, width, color=_colour(x.architecture)
        )
        bars[1].set_hatch("//")
        when = (
            "exact again at " + _seconds(x.repaired_at_s)
            if x.repaired_at_s is not None
            else "never repaired"
        )
        rows.annotate(
            when,
            (i, max(values)),
            ha="center",
            va="bottom",
            fontsize=8,
            xytext=(0, 3),
            textcoords="offset points",
        )
    rows.set_xticks(range(len(late)), names)
    rows.set_title("rows off: solid before, hatched after the batch", fontsize=9)
    rows.margins(y=0.2)
    table = _table(
        (
            "architecture",
            "events dropped as late",
            "truly late in the workload",
            f"rows off {phases[0]}",
            f"rows off {phases[1]}",
            "exact again at",
        ),
        (
            (
                x.architecture,
                f"{x.late_dropped:,}",
                _MISSING if truly_late is None else f"{truly_late:,}",
                f"{x.rows_off_before_batch:,}",
                f"{x.rows_off_after_batch:,}",
                _seconds(x.repaired_at_s) if x.repaired_at_s is not None else "never",
            )
            for x in late
        ),
    )
    body = _image(fig, title) + table + _late_views_table(late)
    return _section(fig_id, title, _late_how(late, truly_late), body)


def _late_views_table(late: Sequence[LateData]) -> str:
    """Rows off per view, before and after the batch (a run of schema 2 has none)."""
    views = _views(v for x in late for v in (*x.views_off_before_batch, *x.views_off_after_batch))
    if not views:
        return ""
    headers = ["view"]
    for x in late:
        headers += [f"{x.architecture}: before the batch", f"{x.architecture}: after"]
    rows = [
        [view]
        + [
            f"{n:,}" if (n := off.get(view)) is not None else _MISSING
            for x in late
            for off in (x.views_off_before_batch, x.views_off_after_batch)
        ]
        for view in views
    ]
    return "<h3>Rows off per view</h3>" + _table(headers, rows)


def _late_views_how(late: Sequence[LateData]) -> str:
    """Which views each architecture still had off after the batch, in words."""
    views = _views(v for x in late for v in x.views_off_after_batch)
    if not views:
        return ""
    sentences = []
    for x in late:
        off = {v: n for v, n in x.views_off_after_batch.items() if n}
        if x.views_off_after_batch and not off:
            sentences.append(f"{_e(x.architecture)} was exact in all {len(views)} views")
        elif off:
            sentences.append(
                f"{_e(x.architecture)} was off in "
                + ", ".join(f"{_e(v)} ({_rows(off[v])})" for v in _views(off))
            )
    hopping = [
        x for x in late
        if x.views_off_after_batch.get("page_views_hopping", 0)
        > x.views_off_after_batch.get("page_views", 0) > 0
    ]  # fmt: skip
    why = (
        " A page view dropped as late is missing from each of the ten overlapping 10-minute "
        "windows that hold it, so page_views_hopping counts more rows off than page_views "
        "(" + ", ".join(_e(x.architecture) for x in hopping) + ")."
        if hopping
        else ""
    )
    return f" Per view, after the batch: {'; '.join(sentences)}.{why}"


def _late_how(late: Sequence[LateData], truly_late: int | None) -> str:
    drops = ", ".join(f"{_e(x.architecture)} {x.late_dropped:,}" for x in late)
    if truly_late is None:
        bound = f"The streams dropped: {drops} (the workload's truly late count was not recorded)."
    else:
        over = [x for x in late if x.late_dropped > truly_late]
        bound = (
            f"The workload held {truly_late:,} truly late events (the grey bar): valid events "
            "behind their own partition's watermark even when every record is a micro-batch of "
            "its own (CONTRACT §3). A stream reading several records per micro-batch moves its "
            f"clocks less often, so it drops at most those. Dropped in this run: {drops}; "
            + (
                "every stream within that bound."
                if not over
                else "more than the bound in "
                + ", ".join(_e(x.architecture) for x in over)
                + ": that stream's late rule does not follow the contract."
            )
        )
    repairs = []
    for x in late:
        name = _e(x.architecture)
        if x.rows_off_after_batch == 0 and x.repaired_at_s is not None:
            repairs.append(
                f"{name} was exact again at {_seconds(x.repaired_at_s)}"
                + (
                    ": its batch recomputed from the master dataset, which kept every late event"
                    if x.architecture == "lambda"
                    else ""
                )
            )
        elif x.rows_off_after_batch == 0:
            repairs.append(f"{name} was exact after the batch")
        elif x.late_dropped:
            repairs.append(
                f"{name} stayed {x.rows_off_after_batch:,} rows off: its stream never reads its "
                "dropped events again, and only a replay would"
            )
        else:
            repairs.append(f"{name} stayed {x.rows_off_after_batch:,} rows off")
    return (
        "Left: the events each stream path dropped because they arrived behind its watermark. "
        "Right: the rows off the oracle before and after Lambda's next batch, over every view "
        f"(the second table splits them per view). {bound} "
        f"After the batch, {'; '.join(repairs)}.{_late_views_how(late)}"
    )


def reprocessing_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-reprocessing", "Reprocessing: Lambda's batch recompute vs Kappa's replay"
    if not run.reprocessing:
        return _absent(fig_id, title)
    scenarios = list(dict.fromkeys(r.scenario for r in run.reprocessing))
    archs = _by_architecture(run.reprocessing)
    found = {(r.scenario, r.architecture): r for r in run.reprocessing}
    fig = _new_figure(3.0)
    measures: tuple[tuple[str, Callable[[Reprocessing], float]], ...] = (
        ("seconds to switch", lambda r: r.seconds),
        ("CPU-seconds", lambda r: r.cpu_seconds),
        ("peak RSS (MiB)", lambda r: r.peak_rss_bytes / _MIB),
    )
    for ax, (label, measure) in zip(fig.subplots(1, 3), measures, strict=True):
        _grouped_bars(ax, scenarios, archs, {key: measure(r) for key, r in found.items()})
        ax.set_title(label, fontsize=9)
    _arch_legend(fig.axes[0], archs)
    table = _table(
        (
            "scenario",
            "architecture",
            "logic",
            "how",
            "seconds to switch",
            "CPU-seconds",
            "peak RSS",
            "reads",
            "versions seen",
            "gaps",
            "mixed",
        ),
        (
            (
                r.scenario,
                r.architecture,
                r.logic_version,
                r.how,
                _seconds(r.seconds),
                f"{r.cpu_seconds:,.1f}",
                _bytes(r.peak_rss_bytes),
                f"{r.readers.reads:,}",
                ", ".join(str(v) for v in r.readers.versions_seen) or _MISSING,
                f"{r.readers.gaps:,}",
                f"{r.readers.mixed:,}",
            )
            for r in run.reprocessing
        ),
    )
    mixed = sum(r.readers.mixed for r in run.reprocessing)
    gaps = sum(r.readers.gaps for r in run.reprocessing)
    seen = (
        "none in this run: every read was a whole version"
        if mixed == gaps == 0
        else f"this run: {gaps:,} gaps and {mixed:,} mixed reads"
    )
    how = (
        "For each scenario that needs its views recomputed: the time from the start of the job "
        "to the moment readers were switched to its answer, the CPU it used and its peak memory. "
        "Lambda recomputes its batch views from the master dataset; Kappa replays the log into "
        "a new version and moves its alias. The table's last columns are what readers saw "
        "meanwhile: the versions, reads without an answer (gaps) and reads that mixed two "
        f"versions, which an atomic switch keeps at zero ({seen}). "
        + _reprocessing_times(run.reprocessing)
    )
    return _section(fig_id, title, how, _image(fig, title) + table)


_ALONE: Final = {
    "logic-change": "one architecture after the other",
    "bug": "both at once, sharing the machine",
    "fix": "both at once, sharing the machine",
    "compaction": "Kappa alone",
}


def _reprocessing_times(reprocessing: Sequence[Reprocessing]) -> str:
    """Per scenario, which switched readers sooner: the numbers of the table, in words."""
    sentences = []
    for scenario in dict.fromkeys(r.scenario for r in reprocessing):
        mine = _in_order(r for r in reprocessing if r.scenario == scenario)
        times = ", ".join(f"{_e(r.architecture)}'s {_e(r.how)} {_seconds(r.seconds)}" for r in mine)
        how = _ALONE.get(scenario)
        sentence = f"<em>{_e(scenario)}</em>" + (f" ({how})" if how else "") + f": {times}"
        if len(mine) > 1:
            ranked = sorted(mine, key=lambda r: r.seconds)
            if ranked[0].seconds < ranked[1].seconds:
                sentence += f", {_e(ranked[0].architecture)} sooner"
        sentences.append(sentence)
    return "Readers switched after: " + "; ".join(sentences) + "."


_OWN_REPROCESSING: Final = ("logic-change", "fix", "compaction")
"""Where the run's own point per architecture comes from, in order of preference: the logic
change runs each architecture alone; the fix runs both at once; compaction replays Kappa."""


@dataclass(frozen=True, slots=True)
class OwnPoint:
    architecture: str
    events: int
    seconds: float
    scenario: str


def own_points(run: ComparisonRun) -> list[OwnPoint]:
    """The run's own reprocessing time per architecture, at the run's event count."""
    events = run.workload.get("events")
    if not events:
        return []
    points = []
    for arch in _by_architecture(run.reprocessing):
        for scenario in _OWN_REPROCESSING:
            found = [
                r for r in run.reprocessing if r.architecture == arch and r.scenario == scenario
            ]
            if found:
                points.append(OwnPoint(arch, int(events), found[0].seconds, scenario))
                break
    return points


def _machine(machine: Mapping[str, object]) -> str:
    parts = []
    if machine.get("cpus") is not None:
        parts.append(f"{machine['cpus']} CPUs")
    if machine.get("memory_gib") is not None:
        parts.append(f"{machine['memory_gib']} GiB")
    if machine.get("kind"):
        parts.append(str(machine["kind"]))
    return ", ".join(parts) or "machine not recorded"


def _events(n: float) -> str:
    if n >= 1e6:
        return f"{n / 1e6:,.3g}M"
    if n >= 1e3:
        return f"{n / 1e3:,.3g}k"
    return f"{n:,.0f}"


def history_cost_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-history-cost", "Cost as the history grows: reprocessing time vs events"
    own = own_points(run)
    sweep = run.sweep if run.sweep is not None and run.sweep.points else None
    if not own and sweep is None:
        return _absent(fig_id, title)
    fig = _new_figure(3.6)
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    if sweep is not None:
        label = f"sweep of {sweep.date} ({_machine(sweep.machine)})"
        for i, arch in enumerate(_by_architecture(sweep.points)):
            mine = sorted((p.events, p.seconds) for p in sweep.points if p.architecture == arch)
            xs, ys = zip(*mine, strict=True)
            ax.plot(xs, ys, "o-", color=_colour(arch, i), lw=1.4, label=f"{arch}, {label}")
    for i, p in enumerate(own):
        ax.plot(
            [p.events], [p.seconds], "*", ms=14, color=_colour(p.architecture, i),
            markeredgecolor="#24292f", label=f"{p.architecture}, this run ({p.scenario})",
        )  # fmt: skip
    everything: list[OwnPoint | SweepPoint] = [*own, *(sweep.points if sweep else [])]
    ax.set_xlim(*_decades([p.events for p in everything]))
    ax.set_ylim(*_decades([p.seconds for p in everything]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: _events(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} s"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("events in the history (log scale)")
    ax.set_ylabel("seconds to readers switched (log)")
    ax.grid(True, which="major", lw=0.4, alpha=0.6)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    swept = [] if sweep is None else [(sweep.date, p) for p in sweep.points]
    table = _table(
        ("source", "architecture", "events", "seconds", "CPU-seconds", "cores", "peak RSS"),
        [
            *(
                (
                    f"sweep {date}", p.architecture, f"{p.events:,}", _seconds(p.seconds),
                    _MISSING if p.cpu_seconds is None else f"{p.cpu_seconds:,.1f}",
                    _MISSING if p.cores is None else f"{p.cores:.2f}",
                    _MISSING if p.peak_rss_bytes is None else _bytes(p.peak_rss_bytes),
                )
                for date, p in swept
            ),
            *(
                (f"this run ({p.scenario})", p.architecture, f"{p.events:,}", _seconds(p.seconds),
                 _MISSING, _MISSING, _MISSING)
                for p in own
            ),
        ],
    )  # fmt: skip
    how = _history_how(sweep, own, run)
    return _section(fig_id, title, how, _image(fig, title) + table)


def _decades(values: Sequence[float]) -> tuple[float, float]:
    """Limits of a log axis around `values`, a margin each side, holding a whole decade."""
    positive = [v for v in values if v > 0] or [1.0]
    low, high = min(positive) / 1.6, max(positive) * 1.6
    if math.floor(math.log10(high)) < math.ceil(math.log10(low)):  # no decade tick inside
        low, high = 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))
    return low, high


def _history_how(sweep: Sweep | None, own: Sequence[OwnPoint], run: ComparisonRun) -> str:
    what = (
        "The time from the start of a reprocessing to readers switched to its answer, against "
        "the events in the history it reads, both on log scales: Lambda's batch recompute "
        "reads the master dataset's columnar files with Spark; Kappa's replay reads the log "
        "from offset 0 as one micro-batch of its stream job, computed with Spark the same way "
        "(the same view logic, on every task slot), and writes the keyed state its stream goes "
        "on from. Both use every core they are given: the table's cores are each run's "
        "CPU-seconds over its seconds. "
    )
    here = _own_sentence(own, run)
    if sweep is None:
        return (
            what + "No sweep over history sizes exists yet (no sweep-*.json in docs/bench): "
            "the figure shows this run's points only; <code>make bench</code> measures one, "
            f"from about 1e4 to 5e6 events. {here}"
        )
    return what + _sweep_sentences(sweep) + " " + here


def _own_sentence(own: Sequence[OwnPoint], run: ComparisonRun) -> str:
    if not own:
        return "This run reprocessed nothing, so it adds no point of its own."
    machine = _machine(
        {"cpus": run.workload.get("cpus"), "memory_gib": run.workload.get("memory_gib")}
    )
    each = ", ".join(f"{_e(p.architecture)} {_seconds(p.seconds)} ({_e(p.scenario)})" for p in own)
    ranked = sorted(own, key=lambda p: p.seconds)
    sooner = (
        f"; {_e(ranked[0].architecture)} was sooner"
        if len(ranked) > 1 and ranked[0].seconds < ranked[1].seconds
        else ""
    )
    return (
        f"This run's own points (stars), at its {own[0].events:,} events on {_e(machine)}: "
        f"{each}{sooner}."
    )


def _sweep_sentences(sweep: Sweep) -> str:
    """Where each architecture wins in the sweep, and why, from its points alone."""
    times: dict[int, dict[str, float]] = {}
    for p in sweep.points:
        times.setdefault(p.events, {})[p.architecture] = p.seconds
    compared = [(n, t) for n, t in sorted(times.items()) if {"lambda", "kappa"} <= t.keys()]
    label = f"The sweep of {_e(sweep.date)} ({_e(_machine(sweep.machine))}): "
    if not compared:
        return label + "it has no history size measured for both architectures."
    winners = [(n, min(("lambda", "kappa"), key=lambda a: t[a]), t) for n, t in compared]
    runs: list[list[tuple[int, str, dict[str, float]]]] = []
    for w in winners:
        if runs and runs[-1][-1][1] == w[1]:
            runs[-1].append(w)
        else:
            runs.append([w])
    parts = []
    for group in runs:
        arch = group[0][1]
        sizes = " and ".join(", ".join(_events(n) for n, _, _ in group).rsplit(", ", 1))
        how = "batch recompute" if arch == "lambda" else "replay"
        spread = "; ".join(
            f"{_events(n)}: Lambda {_seconds(t['lambda'])}, Kappa {_seconds(t['kappa'])}"
            for n, _, t in (group[0], group[-1])[: 1 if len(group) == 1 else 2]
        )
        parts.append(f"{arch.capitalize()}'s {how} was faster at {sizes} events ({spread})")
    sentence = label + "; ".join(parts) + "."
    if len(runs) > 1:
        crossings = ", ".join(
            f"between {_events(a[-1][0])} and {_events(b[0][0])} events"
            for a, b in itertools.pairwise(runs)
        )
        sentence += f" The lines cross {crossings}."
    return sentence + " " + _why(sweep, [group[0][1] for group in runs]) + _cores(sweep)


def _cores(sweep: Sweep) -> str:
    """How many cores each architecture kept busy at the largest history both measured: a
    reprocessing that leaves cores idle measures its implementation, not its architecture."""
    largest = max(p.events for p in sweep.points)
    cores = {p.architecture: p.cores for p in sweep.points if p.events == largest}
    if cores.get("lambda") is None or cores.get("kappa") is None:
        return ""
    cpus = sweep.machine.get("cpus")
    of = f" of {cpus}" if cpus else ""
    return (
        f" At {_events(largest)} events Lambda kept {cores['lambda']:.1f} cores busy on "
        f"average and Kappa {cores['kappa']:.1f}{of}."
    )


def _why(sweep: Sweep, winners: Sequence[str]) -> str:
    """Each architecture's start-up (its time at the smallest history) and its cost per
    million further events (the slope to the largest): the first decides small histories,
    the second large ones. `winners`: the faster architecture by history size, each run of
    sizes once; a conclusion is drawn only where the measured winners bear it out."""
    cost: dict[str, tuple[float, float]] = {}
    smallest = min(p.events for p in sweep.points)
    for arch in ("lambda", "kappa"):
        mine = sorted((p.events, p.seconds) for p in sweep.points if p.architecture == arch)
        if len(mine) >= 2 and mine[-1][0] > mine[0][0] and mine[0][0] == smallest:
            (n0, t0), (n1, t1) = mine[0], mine[-1]
            cost[arch] = (t0, (t1 - t0) / (n1 - n0) * 1e6)
    if len(cost) < 2:
        return ""
    (start_l, per_l), (start_k, per_k) = cost["lambda"], cost["kappa"]
    # The smallest history's own events, at each one's cost per event: how much of its time
    # is start-up.
    events_share = max(per * smallest / 1e6 / max(start, 1e-9) for start, per in cost.values())
    start = (
        "almost all of the time is start-up"
        if events_share < 0.25
        else f"the time is mostly start-up, its events at most {events_share:.0%} of it"
        if events_share < 0.5
        else "the time is start-up and events alike"
    )
    each = (
        f"Why: at the smallest history ({_events(smallest)} events), {start} (Lambda "
        f"{_seconds(start_l)}, Kappa {_seconds(start_k)}); each further million events added "
        f"{_seconds(per_l)} to Lambda's and {_seconds(per_k)} to Kappa's. "
    )
    cheaper_start = "lambda" if start_l < start_k else "kappa"
    cheaper_events = "lambda" if per_l < per_k else "kappa"
    if cheaper_start == cheaper_events:
        return each + (
            f"{cheaper_start.capitalize()} is cheaper on both counts"
            + (", so it wins at every size." if list(winners) == [cheaper_start] else ".")
        )
    bears_out = list(winners) == [cheaper_start, cheaper_events]
    return each + (
        f"{cheaper_start.capitalize()} pays less to start, {cheaper_events.capitalize()} less "
        "per event"
        + (
            f": so {cheaper_start.capitalize()} wins small histories, and "
            f"{cheaper_events.capitalize()} wins once the history is large enough for its "
            "cheaper events to outweigh the other's cheaper start."
            if bears_out
            else "."
        )
    )


def wrong_answers_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-wrong-answers", "Bug and fix: how long wrong answers were served"
    if not run.wrong_answers:
        return _absent(fig_id, title)
    wrong = _in_order(run.wrong_answers)
    fig = _new_figure(0.9 + 0.6 * len(wrong) + 1.2)
    timeline, cost = fig.subplots(1, 2, width_ratios=(3, 2))
    for i, w in enumerate(wrong):
        colour = _colour(w.architecture)
        timeline.broken_barh([(w.wrong_from_s, w.seconds_wrong)], (i - 0.3, 0.6), color=colour)
        timeline.annotate(
            f"{_seconds(w.seconds_wrong)} wrong",
            (w.wrong_until_s, i),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
    timeline.set_yticks(range(len(wrong)), [w.architecture for w in wrong])
    timeline.invert_yaxis()  # Lambda on top, as in every other figure
    timeline.set_xlabel("seconds since the run started")
    timeline.margins(x=0.25)
    names = [w.architecture for w in wrong]
    repair = {("repair seconds", w.architecture): w.repair_seconds for w in wrong}
    repair |= {("repair CPU-seconds", w.architecture): w.repair_cpu_seconds for w in wrong}
    _grouped_bars(cost, ["repair seconds", "repair CPU-seconds"], names, repair)
    _arch_legend(cost, names)
    table = _table(
        (
            "architecture",
            "wrong logic",
            "wrong from",
            "until",
            "served wrong",
            "repair",
            "repair CPU",
        ),
        (
            (
                w.architecture,
                w.wrong_logic_version,
                _seconds(w.wrong_from_s),
                _seconds(w.wrong_until_s),
                _seconds(w.seconds_wrong),
                _seconds(w.repair_seconds),
                f"{w.repair_cpu_seconds:,.1f} CPU-s",
            )
            for w in wrong
        ),
    )
    how = (
        "A deliberately wrong logic version was deployed, noticed and fixed. Left: the time each "
        "architecture served its wrong answers; right: what its repair cost. Lambda repairs by "
        "recomputing its batch views with the fixed logic, Kappa by replaying the whole log with "
        f"it: the shorter bar is the architecture that recovers faster. {_wrong_summary(wrong)}"
    )
    return _section(fig_id, title, how, _image(fig, title) + table)


def _wrong_summary(wrong: Sequence[WrongAnswers]) -> str:
    each = "; ".join(
        f"{_e(w.architecture)} served wrong answers for {_seconds(w.seconds_wrong)}, its repair "
        f"took {_seconds(w.repair_seconds)}"
        for w in wrong
    )
    ranked = sorted(wrong, key=lambda w: w.seconds_wrong)
    sooner = (
        f": {_e(ranked[0].architecture)} recovered sooner"
        if len(ranked) > 1 and ranked[0].seconds_wrong < ranked[1].seconds_wrong
        else ""
    )
    return f"In this run, {each}{sooner}."


_JOIN_KINDS: Final = {
    AS_OF_JOIN: "as-of join (stream-table): needs every profile version",
    TABLE_TABLE_JOIN: "table-table join: needs the current profile only",
}


def compaction_figure(run: ComparisonRun) -> Section:
    fig_id, title = (
        "fig-compaction",
        "Compaction: both profile joins after `profiles` compacted",
    )
    c = run.compaction
    if c is None:
        return _absent(fig_id, title)
    joins = c.by_view()
    fig = _new_figure(2.8)
    # One scale for both panels: a join's zero reads as zero beside the other's rows.
    axes = fig.subplots(1, len(joins), sharex=True, sharey=True, squeeze=False)[0]
    for ax, (view, differing) in zip(axes, joins.items(), strict=True):
        names = _ordered(differing)
        bars = ax.barh(names, [differing[n] for n in names], color=[_colour(n) for n in names])
        ax.bar_label(bars, fmt="{:,.0f} rows", fontsize=8, padding=3)
        ax.set_title(f"{view}\n{_JOIN_KINDS.get(view, 'a profile join')}", fontsize=9)
        ax.set_xlabel("rows differing from the full-history oracle", fontsize=8)
    axes[0].invert_yaxis()  # shared: once puts Lambda on top in every panel
    axes[0].set_xlim(0, max([1, *(n for d in joins.values() for n in d.values())]) * 1.35)
    fig.suptitle(
        f"profile records in the log: {c.profile_records_before:,} before compaction, "
        f"{c.profile_records_after:,} after",
        fontsize=9,
    )
    archs = _ordered(a for differing in joins.values() for a in differing)
    table = _table(
        ("view", "join", *(f"{a}: rows differing" for a in archs)),
        (
            (view, _JOIN_KINDS.get(view, _MISSING).split(":")[0],
             *(f"{d[a]:,}" if a in d else _MISSING for a in archs))
            for view, d in joins.items()
        ),
    )  # fmt: skip
    explanation = f'<p class="explanation"><strong>Why:</strong> {_e(c.explanation)}</p>'
    return _section(fig_id, title, _compaction_how(c), _image(fig, title) + table + explanation)


def _compaction_how(c: Compaction) -> str:
    joins = c.by_view()
    as_of, table = joins.get(AS_OF_JOIN, {}), joins.get(TABLE_TABLE_JOIN)
    counts = "; ".join(
        f"{_e(view)} " + ", ".join(f"{_e(a)} {d[a]:,}" for a in _ordered(d))
        for view, d in joins.items()
    )
    verdicts = []
    for arch in _ordered([*as_of, *(table or {})]):
        lost, current = as_of.get(arch), None if table is None else table.get(arch)
        name = _e(arch)
        if current:
            verdicts.append(
                f"{name}'s table-table join is {_rows(current)} off: compaction cannot explain "
                "that, since it keeps the current record that join reads; the join itself is wrong"
            )
        elif lost and current == 0:
            verdicts.append(
                f"{name} lost {_rows(lost)} of the as-of join and none of the table-table join: "
                "compaction removed the history the first needs and kept the record the second "
                "needs"
            )
        elif lost:
            verdicts.append(f"{name} lost {_rows(lost)} of the as-of join to compaction")
        elif lost == 0 and current == 0:
            verdicts.append(
                f"{name} rebuilt both joins exactly"
                + (
                    ", from the full history its master dataset kept"
                    if arch == "lambda"
                    else ": no order of this run was joined with a version compaction removed"
                    if arch == "kappa"
                    else ""
                )
            )
        elif lost == 0:
            verdicts.append(f"{name}'s as-of join was exact")
    unmeasured = (
        " The table-table join was not measured in this run (it predates segment_totals)."
        if table is None
        else ""
    )
    return (
        "Compaction leaves only each user's latest profile record in the log, and the two views "
        "that join with profiles need different things from it. <code>revenue_by_segment</code> is "
        "an as-of (stream-table) join: each order takes the segment its user had at the order's "
        "event time, which needs the history compaction removes. Lambda's batch joins with the "
        "full history its master dataset kept; a Kappa replay joins with what the compacted log "
        "still holds, so old orders can move to their user's current segment. "
        "<code>segment_totals</code> is a table-table join: each user counts in their current "
        "segment, which needs only the latest record, the one compaction keeps, so a replay "
        "rebuilds it exactly. The bars are the rows that differ from the oracle over the full "
        "profile history, reported as they are, never hidden. In this run the log kept "
        f"{c.profile_records_after:,} of {c.profile_records_before:,} profile records; rows "
        f"differing: {counts}. " + " ".join(_capitalised(v) + "." for v in verdicts) + unmeasured
    )


def _cost_figure(run: ComparisonRun, fig_id: str, title: str, memory: bool) -> Section:
    if not run.cost:
        return _absent(fig_id, title)
    archs = _by_architecture(run.cost)
    rows = sorted(
        run.cost,
        key=lambda c: (
            archs.index(c.architecture),
            -(c.peak_rss_bytes if memory else c.cpu_seconds),
        ),
    )
    values = [c.peak_rss_bytes / _MIB if memory else c.cpu_seconds for c in rows]
    fig = _new_figure(0.8 + 0.32 * len(rows))
    ax = fig.subplots()
    labels = [f"{c.component} ({c.architecture})" for c in rows]
    ax.barh(labels, values, color=[_colour(c.architecture) for c in rows])
    ax.invert_yaxis()
    ax.set_xlabel("peak RSS (MiB)" if memory else "CPU-seconds over the run")
    _arch_legend(ax, archs)
    totals = "; ".join(
        f"{_e(a)} "
        + (
            _bytes(sum(c.peak_rss_bytes for c in run.cost if c.architecture == a))
            if memory
            else f"{sum(c.cpu_seconds for c in run.cost if c.architecture == a):,.1f} CPU-s"
        )
        for a in archs
    )
    if memory:
        how = (
            "The peak resident memory of each component's processes, coloured by the "
            "architecture it belongs to (grey: shared by both). Peaks need not happen at the "
            "same time, but each component needs its peak when it runs on its own pod: that is "
            f"what to request. Sums in this run: {totals}."
        )
    else:
        how = (
            "The CPU time each component's processes used over the whole run, measured from the "
            "operating system, coloured by the architecture it belongs to (grey: the log, the "
            "store and the API both share). What one architecture costs beyond the shared base "
            f"is the sum of its own colour. Sums in this run: {totals}."
        )
    return _section(fig_id, title, how, _image(fig, title))


def cost_cpu_figure(run: ComparisonRun) -> Section:
    return _cost_figure(run, "fig-cost-cpu", "Cost: CPU-seconds per component", memory=False)


def cost_memory_figure(run: ComparisonRun) -> Section:
    return _cost_figure(run, "fig-cost-memory", "Cost: peak memory per component", memory=True)


def stored_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-stored", "Bytes stored per architecture"
    if not run.stored:
        return _absent(fig_id, title)
    archs = _by_architecture(run.stored)
    whats = list(dict.fromkeys(s.what for s in run.stored))
    fig = _new_figure(0.9 + 0.55 * len(archs) + 0.25 * len(whats))
    ax = fig.subplots()
    left = [0.0] * len(archs)
    for i, what in enumerate(whats):
        sizes = [
            sum(s.bytes for s in run.stored if s.architecture == a and s.what == what) / _MIB
            for a in archs
        ]
        ax.barh(archs, sizes, left=left, label=what, color=_OTHER_COLOURS[i % len(_OTHER_COLOURS)])
        left = [x + y for x, y in zip(left, sizes, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("MiB at the end of the run")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    totals = "; ".join(
        f"{_e(a)} {_bytes(sum(s.bytes for s in run.stored if s.architecture == a))}" for a in archs
    )
    how = (
        "What each architecture keeps, stacked by where. Lambda keeps a master dataset of every "
        "record and its batch views beside the log; Kappa keeps the log itself, retained long "
        "enough to replay, and its view versions. The log's retention is the lever: Kappa's "
        f"storage grows with it, Lambda's with the master dataset. Totals: {totals}."
    )
    return _section(fig_id, title, how, _image(fig, title))


def weight_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-weight", "Operational weight: what the chart deploys per mode"
    if not run.chart_weight:
        return _absent(fig_id, title)
    weights = run.chart_weight
    modes = [w.mode for w in weights]
    kinds = sorted(
        {k for w in weights for k in w.by_kind},
        key=lambda k: -sum(w.by_kind.get(k, 0) for w in weights),
    )
    fig = _new_figure(3.2)
    objects, cpu, memory = fig.subplots(1, 3, width_ratios=(3, 2, 2))
    bottom = [0] * len(modes)
    for i, kind in enumerate(kinds):
        counts = [w.by_kind.get(kind, 0) for w in weights]
        objects.bar(
            modes, counts, bottom=bottom, label=kind, color=_KINDS(i % 20), edgecolor="white"
        )
        bottom = [b + c for b, c in zip(bottom, counts, strict=True)]
    objects.set_title("Kubernetes objects, by kind", fontsize=9)
    objects.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    colours = [_colour(m, i) for i, m in enumerate(modes)]
    cpu.bar(modes, [w.cpu_requests_millicores / 1000 for w in weights], color=colours)
    cpu.set_title("CPU requested (cores)", fontsize=9)
    memory.bar(modes, [w.memory_requests_bytes / _GIB for w in weights], color=colours)
    memory.set_title("memory requested (GiB)", fontsize=9)
    table = _table(
        ("mode", "objects", "CPU requested", "memory requested", "by kind"),
        (
            (
                w.mode,
                w.objects,
                f"{w.cpu_requests_millicores / 1000:,.2f} cores",
                _bytes(w.memory_requests_bytes),
                ", ".join(f"{k} {n}" for k, n in sorted(w.by_kind.items())),
            )
            for w in weights
        ),
    )
    how = (
        "What the Helm chart renders with its default values for each mode: objects by kind, "
        "and the CPU and memory its pods request from the scheduler (replicas counted, a Job "
        "as one running pod). <code>both</code> runs the two architectures on one log, store "
        "and API; the difference between the single modes is what each architecture's own "
        f"components ask. {_weight_summary(weights)}"
    )
    return _section(fig_id, title, how, _image(fig, title) + table)


def _weight_summary(weights: Sequence[ChartWeight]) -> str:
    by_mode = {w.mode: w for w in weights}
    each = "; ".join(
        f"<code>{_e(w.mode)}</code> {w.objects} objects, "
        f"{w.cpu_requests_millicores / 1000:,.2f} cores, {_bytes(w.memory_requests_bytes)}"
        for w in weights
    )
    if not {"lambda", "kappa", "both"} <= by_mode.keys():
        return f"In this chart: {each}."
    single = [by_mode["lambda"], by_mode["kappa"]]
    both = by_mode["both"]
    lighter = both.cpu_requests_millicores < sum(
        w.cpu_requests_millicores for w in single
    ) and both.memory_requests_bytes < sum(w.memory_requests_bytes for w in single)
    return (
        f"In this chart: {each}; <code>both</code> requests "
        + ("less" if lighter else "not less")
        + " CPU and memory than <code>lambda</code> and <code>kappa</code> deployed apart."
    )


def code_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-code", "Code: lines shared by both architectures vs specific to one"
    code = run.code
    if code is None:
        return _absent(fig_id, title)
    # Tooling rooms (tests, infra) would dwarf the rest: the per-room panel shows what counts.
    counted = {r: i for r, i in code.by_room.items() if i["part"] in ("shared", "lambda", "kappa")}
    tooling = {r: i for r, i in code.by_room.items() if r not in counted}
    fig = _new_figure(0.8 + 0.3 * max(len(counted), 4))
    totals, rooms = fig.subplots(1, 2, width_ratios=(2, 3))
    parts = (("shared", code.shared), ("lambda", code.lambda_only), ("kappa", code.kappa_only))
    bars = totals.bar(
        [p for p, _ in parts], [n for _, n in parts], color=[_colour(p) for p, _ in parts]
    )
    totals.bar_label(bars, fmt="{:,.0f}", fontsize=8)
    totals.set_title("lines of Python", fontsize=9)
    totals.margins(y=0.15)
    ordered = sorted(counted.items(), key=lambda kv: (-int(kv[1]["lines"]), kv[0]))
    bars = rooms.barh(
        [room for room, _ in ordered],
        [int(info["lines"]) for _, info in ordered],
        color=[_colour(str(info["part"])) for _, info in ordered],
    )
    rooms.bar_label(bars, fmt="{:,.0f}", fontsize=7, padding=2)
    rooms.margins(x=0.12)
    rooms.invert_yaxis()
    rooms.tick_params(axis="y", labelsize=8)
    rooms.set_title("per room", fontsize=9)
    shown = list(dict.fromkeys(str(info["part"]) for _, info in ordered))
    _arch_legend(rooms, _ordered(shown))
    not_counted = (
        ", ".join(f"{_e(r)} {int(i['lines']):,} ({_e(i['part'])})" for r, i in tooling.items())
        or "nothing"
    )
    how = (
        "Lines of Python in the tree, without blank lines, comments or docstrings. Shared code "
        "is written once and serves both architectures: the view logic, the stream engine, the "
        "store, the API. Lambda-only code is its archiver, batch layer and speed layer with their "
        "hand-off; Kappa-only code is its job and its replay. In this run: "
        f"{code.shared:,} shared, {code.lambda_only:,} Lambda-only, {code.kappa_only:,} "
        f"Kappa-only; not counted: {not_counted}."
    )
    return _section(fig_id, title, how, _image(fig, title))


FIGURES: Final = (
    error_figure,
    warmup_figure,
    freshness_figure,
    late_figure,
    reprocessing_figure,
    history_cost_figure,
    wrong_answers_figure,
    compaction_figure,
    cost_cpu_figure,
    cost_memory_figure,
    stored_figure,
    weight_figure,
    code_figure,
)
"""The report's figures, in reading order: correctness, then freshness, then cost."""


# --- the page -----------------------------------------------------------------------------------

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 78rem; color: #1f2328;
       padding: 0 1rem; }
h1 { margin-bottom: .2rem; } h2 { margin-top: 2.2rem; font-size: 1.2rem; }
table { border-collapse: collapse; margin: .8rem 0; font-size: .85rem; }
th, td { border: 1px solid #d0d7de; padding: .25rem .5rem; text-align: left; vertical-align: top; }
th { background: #f6f8fa; }
.pair { display: flex; gap: 1.5rem; align-items: flex-start; }
.plot { flex: 1 1 auto; min-width: 0; }
.plot img { max-width: 100%; height: auto; display: block; }
.how { flex: 0 0 19rem; background: #f6f8fa; border-left: 3px solid #1f6feb; padding: .2rem 1rem;
       font-size: .9rem; line-height: 1.4; }
.how h3 { font-size: .95rem; margin: .6rem 0 .3rem; }
.absent { color: #57606a; font-style: italic; }
.explanation { background: #fff8c5; border: 1px solid #d4a72c; padding: .5rem .8rem; }
dl.workload { display: grid; grid-template-columns: max-content auto; gap: .15rem 1rem; }
dl.workload dt { font-weight: 600; } dl.workload dd { margin: 0; }
nav ol { columns: 2; font-size: .9rem; }
"""

_WORKLOAD_KEYS: Final = (
    ("seed", "seed"),
    ("events", "events"),
    ("rate_per_s", "rate (events/s)"),
    ("duration_s", "duration (s)"),
)


def _workload(run: ComparisonRun) -> str:
    named = dict(_WORKLOAD_KEYS)
    keys = [k for k, _ in _WORKLOAD_KEYS] + sorted(k for k in run.workload if k not in named)
    items = "".join(
        f"<dt>{_e(named.get(k, k))}</dt><dd>{_e(run.workload.get(k, _MISSING))}</dd>" for k in keys
    )
    return f'<dl class="workload">{items}</dl>'


def _scenarios(run: ComparisonRun) -> str:
    if not run.scenarios:
        return '<p class="absent">No scenario spans recorded.</p>'
    return _table(
        ("scenario", "what", "from", "to", "notes"),
        (
            (s.name, s.title, _seconds(s.started_s), _seconds(s.ended_s), " · ".join(s.notes))
            for s in run.scenarios
        ),
    )


def _contents(sections: Sequence[Section]) -> str:
    items = "".join(f'<li><a href="#{_e(s.fig_id)}">{_e(s.title)}</a></li>' for s in sections)
    return f"<nav><h2>Figures</h2><ol>{items}</ol></nav>"


def render(run: ComparisonRun) -> str:
    """The report of `run`: one self-contained HTML page (figures inline, no request made)."""
    sections = [figure(run) for figure in FIGURES]
    log = f"<p>Log of the run: <code>{_e(run.log_file)}</code></p>" if run.log_file else ""
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        # No icon: a browser would ask the server for /favicon.ico (MinIO answers 403).
        '<link rel="icon" href="data:,">'
        "<title>Lambda vs Kappa: side-by-side comparison</title>"
        f"<style>{_STYLE}</style></head><body>"
        "<header><h1>Lambda vs Kappa: side-by-side comparison</h1>"
        f"<p>Run of {_e(run.created_at)}. Every number below is in "
        f'<a href="{JSON_FILE}">{JSON_FILE}</a>, next to this page.</p>'
        f"<h2>Workload</h2>{_workload(run)}<h2>Scenarios</h2>{_scenarios(run)}{log}</header>"
        f"{_contents(sections)}<main>{''.join(s.html for s in sections)}</main></body></html>"
    )


def write_report(run: ComparisonRun, out_dir: Path) -> tuple[Path, Path]:
    """Write `report.html` and `comparison.json` into `out_dir`; returns both paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    data = run.write(out_dir / JSON_FILE)  # first: the page links to it
    page = out_dir / REPORT_FILE
    page.write_text(render(run), encoding="utf-8")
    return page, data
