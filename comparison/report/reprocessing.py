"""Recomputing the views: Lambda's batch recompute against Kappa's replay (`fig-reprocessing`),
how long a wrong version was served and what its repair cost (`fig-wrong-answers`), and both
profile joins after `profiles` was compacted (`fig-compaction`)."""

from __future__ import annotations

from collections.abc import Callable

from comparison import verdict
from comparison.figures import AS_OF_JOIN, TABLE_TABLE_JOIN, ComparisonRun, Reprocessing
from comparison.report.common import (
    MIB,
    MISSING,
    Section,
    absent,
    arch_legend,
    by_architecture,
    colour,
    grouped_bars,
    in_order,
    new_figure,
    ordered,
    seconds,
    section,
)


def reprocessing_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.REPROCESSING, "Reprocessing: Lambda's batch recompute vs Kappa's replay"
    if not run.reprocessing:
        return absent(fig_id, title)
    scenarios = list(dict.fromkeys(r.scenario for r in run.reprocessing))
    archs = by_architecture(run.reprocessing)
    found = {(r.scenario, r.architecture): r for r in run.reprocessing}
    fig = new_figure(3.0)
    measures: tuple[tuple[str, Callable[[Reprocessing], float]], ...] = (
        ("seconds to switch", lambda r: r.seconds),
        ("CPU-seconds", lambda r: r.cpu_seconds),
        ("peak RSS (MiB)", lambda r: r.peak_rss_bytes / MIB),
    )
    for ax, (label, measure) in zip(fig.subplots(1, 3), measures, strict=True):
        grouped_bars(ax, scenarios, archs, {key: measure(r) for key, r in found.items()})
        ax.set_title(label, fontsize=9)
    arch_legend(fig.axes[0], archs)
    return section(
        "reprocessing.html.j2",
        fig_id,
        title,
        fig,
        reprocessing=run.reprocessing,
        mixed=sum(r.readers.mixed for r in run.reprocessing),
        gaps=sum(r.readers.gaps for r in run.reprocessing),
        # Per scenario, its reprocessings in reading order and ranked by time to switch.
        by_scenario=[
            (scenario, mine, sorted(mine, key=lambda r: r.seconds))
            for scenario in scenarios
            if (mine := in_order(r for r in run.reprocessing if r.scenario == scenario))
        ],
    )


def wrong_answers_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.WRONG_ANSWERS, "Bug and fix: how long wrong answers were served"
    if not run.wrong_answers:
        return absent(fig_id, title)
    wrong = in_order(run.wrong_answers)
    fig = new_figure(0.9 + 0.6 * len(wrong) + 1.2)
    timeline, cost = fig.subplots(1, 2, width_ratios=(3, 2))
    for i, w in enumerate(wrong):
        timeline.broken_barh(
            [(w.wrong_from_s, w.seconds_wrong)], (i - 0.3, 0.6), color=colour(w.architecture)
        )
        timeline.annotate(
            f"{seconds(w.seconds_wrong)} wrong",
            (w.wrong_until_s, i),
            xytext=(4, 0),
            textcoords="offset points",
            va="center",
            fontsize=8,
        )
        if w.noticed_s is not None:  # the first sample that saw it off
            noticed = w.wrong_from_s + w.noticed_s
            timeline.plot([noticed], [i], "|", color="#24292f", ms=16, mew=2,
                          label="noticed" if i == 0 else None)  # fmt: skip
    if any(w.noticed_s is not None for w in wrong):
        timeline.legend(fontsize=7, loc="lower right")
    timeline.set_yticks(range(len(wrong)), [w.architecture for w in wrong])
    timeline.invert_yaxis()  # Lambda on top, as in every other figure
    timeline.set_xlabel("seconds since the run started")
    timeline.margins(x=0.25)
    names = [w.architecture for w in wrong]
    repair = {("repair seconds", w.architecture): w.repair_seconds for w in wrong}
    repair |= {("repair CPU-seconds", w.architecture): w.repair_cpu_seconds for w in wrong}
    grouped_bars(cost, ["repair seconds", "repair CPU-seconds"], names, repair)
    arch_legend(cost, names)
    return section(
        "wrong_answers.html.j2",
        fig_id,
        title,
        fig,
        wrong=wrong,
        noticed=any(w.noticed_s is not None for w in wrong),
        ranked=sorted(wrong, key=lambda w: w.seconds_wrong),
    )


JOIN_KINDS = {
    AS_OF_JOIN: "as-of join (stream-table): needs every profile version",
    TABLE_TABLE_JOIN: "table-table join: needs the current profile only",
}
"""What each profile join needs from the log: a panel's title, a table's column."""


def compaction_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.COMPACTION, "Compaction: both profile joins after `profiles` compacted"
    c = run.compaction
    if c is None:
        return absent(fig_id, title)
    joins = c.by_view()
    fig = new_figure(2.8)
    # One scale for both panels: a join's zero reads as zero beside the other's rows.
    axes = fig.subplots(1, len(joins), sharex=True, sharey=True, squeeze=False)[0]
    for ax, (view, differing) in zip(axes, joins.items(), strict=True):
        names = ordered(differing)
        bars = ax.barh(names, [differing[n] for n in names], color=[colour(n) for n in names])
        ax.bar_label(bars, fmt="{:,.0f} rows", fontsize=8, padding=3)
        ax.set_title(f"{view}\n{JOIN_KINDS.get(view, 'a profile join')}", fontsize=9)
        ax.set_xlabel("rows differing from the full-history oracle", fontsize=8)
    axes[0].invert_yaxis()  # shared: once puts Lambda on top in every panel
    axes[0].set_xlim(0, max([1, *(n for d in joins.values() for n in d.values())]) * 1.35)
    fig.suptitle(
        f"profile records in the log: {c.profile_records_before:,} before compaction, "
        f"{c.profile_records_after:,} after",
        fontsize=9,
    )
    as_of, table = joins.get(AS_OF_JOIN, {}), joins.get(TABLE_TABLE_JOIN)
    return section(
        "compaction.html.j2",
        fig_id,
        title,
        fig,
        c=c,
        archs=ordered(a for differing in joins.values() for a in differing),
        joins=[
            (view, JOIN_KINDS.get(view, MISSING).split(":")[0], d, ordered(d))
            for view, d in joins.items()
        ],
        # Per architecture: rows off in the as-of join and in the table-table join (None: not
        # measured), which together say whether compaction explains them.
        verdicts=[
            (arch, as_of.get(arch), None if table is None else table.get(arch))
            for arch in ordered([*as_of, *(table or {})])
        ],
        table_measured=table is not None,
    )
