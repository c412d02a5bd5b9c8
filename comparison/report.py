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
from matplotlib.transforms import blended_transform_factory

from comparison.figures import ComparisonRun, Reprocessing, Sample

REPORT_FILE: Final = "report.html"
JSON_FILE: Final = "comparison.json"

_ARCH_ORDER: Final = ("lambda", "kappa", "shared")
_ARCH_COLOURS: Final = {"lambda": "#1f6feb", "kappa": "#e8590c", "shared": "#8c959f"}
_PART_COLOURS: Final = {**_ARCH_COLOURS, "tooling": "#d0d7de", "unclassified": "#cf222e"}
_SPAN_COLOURS: Final = ("#fff3bf", "#d3f9d8", "#e5dbff", "#ffe3e3", "#d0ebff", "#f1f3f5")
_OTHER_COLOURS: Final = ("#2f9e44", "#ae3ec9", "#1098ad", "#f08c00", "#495057", "#c2255c")
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


def _mean_share_off(samples: list[Sample]) -> float:
    answered = [s.share_off for s in samples if s.status == 200]
    return statistics.fmean(answered) if answered else 0.0


def error_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-error", "Error over time: share of rows off the oracle, per view"
    if not run.samples:
        return _absent(fig_id, title)
    archs = _ordered(s.architecture for s in run.samples)
    views = sorted({s.view for s in run.samples})
    fig = _new_figure(1.2 + 2.3 * len(archs))
    axes = fig.subplots(len(archs), 1, sharex=True, squeeze=False)[:, 0]
    for row, (ax, arch) in enumerate(zip(axes, archs, strict=True)):
        for i, span in enumerate(run.scenarios):
            ax.axvspan(span.started_s, span.ended_s, color=_SPAN_COLOURS[i % 6], lw=0, zorder=0)
            if row == 0:  # the labels once, above the top panel
                where = blended_transform_factory(ax.transData, ax.transAxes)
                middle = (span.started_s + span.ended_s) / 2
                ax.text(middle, 1.02, span.name, transform=where, ha="center", fontsize=8)
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
    means = "; ".join(
        f"{_e(a)} {_mean_share_off([s for s in run.samples if s.architecture == a]):.1%}"
        for a in archs
    )
    how = (
        "Each line is one view's share of rows that differ from the oracle over everything "
        "produced when it was read; shaded bands are the scenarios. Lambda's error falls back "
        "to zero at each batch hand-off (dotted line: a new version), while Kappa's stays at "
        "the events its stream dropped as late until a replay. Red ticks are reads that got "
        f"no answer. In this run, the mean share off was: {means}."
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
        ax.set_ylabel(f"{f.architecture}\nchunks")
        ax.legend(fontsize=8, loc="upper right")
        summary.append(f"{_e(f.architecture)} p50 {_seconds(p50)}, p99 {_seconds(p99)}")
    axes[-1].set_xlabel("seconds from produced to visible")
    how = (
        "Each bar counts chunks of produced events by how long they took to become visible "
        "through the serving API. The dashed line is the median, the dotted one the 99th "
        "percentile: what a dashboard waits for on a bad minute. Both architectures run the same "
        "stream engine on the same log, so a gap between them points at their triggers or at "
        f"Lambda's hand-offs. In this run: {'; '.join(summary)}."
    )
    return _section(fig_id, title, how, _image(fig, title))


def late_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-late", "Late data: dropped by the stream path, repaired by the batch"
    if not run.late:
        return _absent(fig_id, title)
    late = _in_order(run.late)
    names = [x.architecture for x in late]
    fig = _new_figure(3.0)
    dropped, rows = fig.subplots(1, 2)
    dropped.bar(names, [x.late_dropped for x in late], color=[_colour(n) for n in names])
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
            f"rows off {phases[0]}",
            f"rows off {phases[1]}",
            "exact again at",
        ),
        (
            (
                x.architecture,
                f"{x.late_dropped:,}",
                f"{x.rows_off_before_batch:,}",
                f"{x.rows_off_after_batch:,}",
                _seconds(x.repaired_at_s) if x.repaired_at_s is not None else "never",
            )
            for x in late
        ),
    )
    summary = "; ".join(
        f"{_e(x.architecture)} dropped {x.late_dropped:,} events and "
        + (
            f"was exact again at {_seconds(x.repaired_at_s)}"
            if x.repaired_at_s is not None
            else f"stays {x.rows_off_after_batch:,} rows off"
        )
        for x in late
    )
    how = (
        "Left: the events each stream path dropped because they arrived behind its watermark. "
        "Right: the rows off the oracle before and after Lambda's next batch. Lambda's batch "
        "recomputes from the master dataset, which kept every late event, so its rows off fall "
        "to zero at the hand-off; Kappa's stream never reads them again, so its count stays "
        "until a replay with a longer watermark. The count can exceed the events the workload "
        "made late on purpose: a live run produces hours of event time in minutes, so when one "
        "of the log's partitions reaches a micro-batch a second after the others (a busy node), "
        "its events are minutes of event time behind a watermark that has already moved on. "
        f"In this run: {summary}."
    )
    return _section(fig_id, title, how, _image(fig, title) + table)


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
    how = (
        "For each scenario that needs its views recomputed: the time from the start of the job "
        "to the moment readers were switched to its answer, the CPU it used and its peak memory. "
        "Lambda recomputes its batch views from the master dataset; Kappa replays the log into "
        "a new version and moves its alias. The table's last columns are what readers saw "
        "meanwhile: the versions, reads without an answer (gaps) and reads that mixed two "
        f"versions, which an atomic switch keeps at zero (this run: {mixed:,})."
    )
    return _section(fig_id, title, how, _image(fig, title) + table)


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
        "it: the shorter bar is the architecture that recovers faster from a bad deployment."
    )
    return _section(fig_id, title, how, _image(fig, title) + table)


def compaction_figure(run: ComparisonRun) -> Section:
    fig_id, title = (
        "fig-compaction",
        "Compaction: the as-of profile join after `profiles` compacted",
    )
    c = run.compaction
    if c is None:
        return _absent(fig_id, title)
    names = _ordered(c.rows_differing)
    fig = _new_figure(2.6)
    ax = fig.subplots()
    bars = ax.barh(names, [c.rows_differing[n] for n in names], color=[_colour(n) for n in names])
    ax.bar_label(bars, fmt="{:,.0f} rows", fontsize=8, padding=3)
    ax.invert_yaxis()
    ax.margins(x=0.2)
    ax.set_xlabel("revenue_by_segment rows differing from the full-history oracle")
    ax.set_title(
        f"profile records in the log: {c.profile_records_before:,} before compaction, "
        f"{c.profile_records_after:,} after",
        fontsize=9,
    )
    explanation = f'<p class="explanation"><strong>Why:</strong> {_e(c.explanation)}</p>'
    how = (
        "Compaction leaves only each user's latest profile in the log. Lambda's batch joins "
        "orders with the full profile history its master dataset kept; a Kappa replay joins "
        "with what the compacted log still holds, so old orders can move to a user's current "
        "segment. The bars are that difference, reported as it is, never hidden."
    )
    return _section(fig_id, title, how, _image(fig, title) + explanation)


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
        ax.barh(archs, sizes, left=left, label=what, color=_OTHER_COLOURS[i % 6])
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
        "and API, so it weighs less than <code>lambda</code> and <code>kappa</code> together; "
        "the difference between the single modes is what each architecture's own components ask."
    )
    return _section(fig_id, title, how, _image(fig, title) + table)


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
    freshness_figure,
    late_figure,
    reprocessing_figure,
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
