"""How soon answers come: deployment → first answer (`fig-warmup`), and produced → visible
through the API (`fig-freshness`), with how much the demo compresses event time."""

from __future__ import annotations

from dataclasses import dataclass

from comparison import verdict
from comparison.figures import ComparisonRun
from comparison.report.common import (
    Section,
    absent,
    colour,
    in_order,
    new_figure,
    seconds,
    section,
)


def warmup_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-warmup", "Warm-up: deployment → first answer"
    if not run.warmup:
        return absent(fig_id, title)
    warm = in_order(run.warmup)
    names = [w.architecture for w in warm]
    fig = new_figure(0.9 + 0.5 * len(warm))
    ax = fig.subplots()
    bars = ax.barh(names, [w.seconds for w in warm], color=[colour(n) for n in names])
    ax.bar_label(bars, labels=[seconds(w.seconds) for w in warm], fontsize=8, padding=3)
    ax.invert_yaxis()
    ax.margins(x=0.15)
    ax.set_xlabel("seconds from starting the processes to the first answer")
    first = min(warm, key=lambda w: w.seconds)
    last = max(warm, key=lambda w: w.seconds)
    return section(
        "warmup.html.j2",
        fig_id,
        title,
        fig,
        warm=warm,
        first=first,
        last=last,
        apart=len(warm) > 1 and last.seconds > first.seconds,
    )


@dataclass(frozen=True, slots=True)
class Compression:
    """How much faster than it happened the run produced its workload's event time."""

    event_time_span_s: float
    produced_in_s: float
    watermark_delay_s: float

    @property
    def times_faster(self) -> float:
        return self.event_time_span_s / self.produced_in_s

    @property
    def watermark_wall_clock_s(self) -> float:
        """The watermark's delay (event time) in wall-clock time at this run's pace."""
        return self.watermark_delay_s / self.times_faster


def compression(run: ComparisonRun) -> Compression | None:
    span = run.workload.get("event_time_span_s")
    produced_in = run.workload.get("produced_in_s") or run.workload.get("duration_s")
    if not span or not produced_in:
        return None
    delay_s = run.workload.get("watermark_delay_minutes", 0) * 60
    return Compression(span, produced_in, delay_s)


def freshness_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.FRESHNESS, "Freshness: produced → visible through the API"
    measured = in_order(f for f in run.freshness if f.lags_s)
    if not measured:
        return absent(fig_id, title)
    fig = new_figure(1.0 + 1.9 * len(measured))
    axes = fig.subplots(len(measured), 1, sharex=True, squeeze=False)[:, 0]
    for ax, f in zip(axes, measured, strict=True):
        ax.hist(f.lags_s, bins=40, color=colour(f.architecture), alpha=0.8)
        for value, style, name in ((f.p50_s, "--", "p50"), (f.p99_s, ":", "p99")):
            if value is not None:
                ax.axvline(
                    value, color="#24292f", ls=style, lw=1.4, label=f"{name} {seconds(value)}"
                )
        ax.set_ylabel(f"{f.architecture}\nevents")
        ax.legend(fontsize=8, loc="upper right")
    axes[-1].set_xlabel("seconds from produced to visible")
    return section(
        "freshness.html.j2", fig_id, title, fig, measured=measured, compression=compression(run)
    )
