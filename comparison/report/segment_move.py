"""The figure of the segment-move scenario (`fig-segment-move`): a batch of users moved to a
new segment in one transaction of the user table, from the commit to `segment_totals` through
each architecture, and what the as-of join kept."""

from __future__ import annotations

from comparison import verdict
from comparison.figures import AS_OF_JOIN, TABLE_TABLE_JOIN, ComparisonRun
from comparison.report.common import Section, absent, colour, new_figure, ordered, section


def segment_move_figure(run: ComparisonRun) -> Section:
    fig_id = verdict.SEGMENT_MOVE
    title = "A profile changes in the database: commit to visible, and what each join keeps"
    m = run.segment_move
    if m is None:
        return absent(fig_id, title)
    archs = ordered(m.visible_s)
    seen: dict[str, float] = {a: s for a in archs if (s := m.visible_s[a]) is not None}
    fig = new_figure(1.8)
    ax = fig.subplots()
    bars = ax.barh(list(seen), list(seen.values()), color=[colour(a) for a in seen])
    ax.bar_label(bars, fmt="{:,.2f} s", fontsize=8, padding=3)
    ax.invert_yaxis()
    ax.set_xlim(0, max([1.0, *seen.values()]) * 1.35)
    ax.set_xlabel(f"commit → {TABLE_TABLE_JOIN} shows the {m.users} moved users (s)", fontsize=8)
    return section(
        "segment_move.html.j2",
        fig_id,
        title,
        fig,
        m=m,
        moves=max((len(each) for each in m.each_visible_s.values()), default=1),
        archs=archs,
        as_of_join=AS_OF_JOIN,
        table_join=TABLE_TABLE_JOIN,
        late=[a for a in archs if m.visible_s[a] is None],
        faster=_faster(seen),
        kept=[a for a in archs if m.as_of_new_segment_cents.get(a, 0) == 0],
        off=[a for a in archs if m.served_moved_cents.get(a) != m.expected_moved_cents.get(a)],
    )


def _faster(seen: dict[str, float]) -> str | None:
    """The architecture that showed the move first, unless the two are within the verdict's
    tolerance of each other (a run's noise)."""
    if len(seen) < 2:
        return None
    first = min(seen, key=lambda a: seen[a])
    slowest = max(seen.values())
    return None if slowest - seen[first] <= verdict.TOLERANCE * slowest else first
