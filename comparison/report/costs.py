"""What each architecture costs to run: CPU-seconds (`fig-cost-cpu`) and peak memory
(`fig-cost-memory`) per component, and the bytes it keeps (`fig-stored`). The sums per
architecture are the verdict's own (`comparison.verdict`), so the two never disagree."""

from __future__ import annotations

from comparison import verdict
from comparison.figures import ComparisonRun
from comparison.report.common import (
    MIB,
    OTHER_COLOURS,
    Section,
    absent,
    arch_legend,
    by_architecture,
    colour,
    new_figure,
    section,
)
from comparison.verdict import (
    cpu_by_architecture,
    memory_by_architecture,
    stored_by_architecture,
)


def _cost_figure(run: ComparisonRun, fig_id: str, title: str, memory: bool) -> Section:
    if not run.cost:
        return absent(fig_id, title)
    archs = by_architecture(run.cost)
    rows = sorted(
        run.cost,
        key=lambda c: (
            archs.index(c.architecture),
            -(c.peak_rss_bytes if memory else c.cpu_seconds),
        ),
    )
    values = [c.peak_rss_bytes / MIB if memory else c.cpu_seconds for c in rows]
    fig = new_figure(0.8 + 0.32 * len(rows))
    ax = fig.subplots()
    labels = [f"{c.component} ({c.architecture})" for c in rows]
    ax.barh(labels, values, color=[colour(c.architecture) for c in rows])
    ax.invert_yaxis()
    ax.set_xlabel("peak RSS (MiB)" if memory else "CPU-seconds over the run")
    arch_legend(ax, archs)
    summed = memory_by_architecture(run) if memory else cpu_by_architecture(run)
    return section(
        "cost_memory.html.j2" if memory else "cost_cpu.html.j2",
        fig_id,
        title,
        fig,
        totals=[(a, summed[a]) for a in archs],
    )


def cost_cpu_figure(run: ComparisonRun) -> Section:
    return _cost_figure(run, verdict.COST_CPU, "Cost: CPU-seconds per component", memory=False)


def cost_memory_figure(run: ComparisonRun) -> Section:
    return _cost_figure(run, verdict.COST_MEMORY, "Cost: peak memory per component", memory=True)


def stored_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.STORED, "Bytes stored per architecture"
    if not run.stored:
        return absent(fig_id, title)
    archs = by_architecture(run.stored)
    whats = list(dict.fromkeys(s.what for s in run.stored))
    fig = new_figure(0.9 + 0.55 * len(archs) + 0.25 * len(whats))
    ax = fig.subplots()
    left = [0.0] * len(archs)
    for i, what in enumerate(whats):
        sizes = [
            sum(s.bytes for s in run.stored if s.architecture == a and s.what == what) / MIB
            for a in archs
        ]
        ax.barh(archs, sizes, left=left, label=what, color=OTHER_COLOURS[i % len(OTHER_COLOURS)])
        left = [x + y for x, y in zip(left, sizes, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("MiB at the end of the run")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    summed = stored_by_architecture(run)
    return section("stored.html.j2", fig_id, title, fig, totals=[(a, summed[a]) for a in archs])
