"""Reprocessing's cost as the history grows (`fig-history-cost`): the committed sweep over
history sizes (`docs/bench/sweep-*.json`, `make bench`) beside the run's own points, and where
each architecture wins in it, and why, read from the sweep's points alone."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from dataclasses import dataclass

from matplotlib.ticker import FuncFormatter, NullFormatter

from comparison.figures import ComparisonRun, Sweep, SweepPoint
from comparison.report.common import (
    Section,
    absent,
    by_architecture,
    colour,
    events,
    machine,
    new_figure,
    section,
)

_OWN_REPROCESSING = ("logic-change", "fix", "compaction")
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
    count = run.workload.get("events")
    if not count:
        return []
    points = []
    for arch in by_architecture(run.reprocessing):
        for scenario in _OWN_REPROCESSING:
            found = [
                r for r in run.reprocessing if r.architecture == arch and r.scenario == scenario
            ]
            if found:
                points.append(OwnPoint(arch, int(count), found[0].seconds, scenario))
                break
    return points


@dataclass(frozen=True, slots=True)
class Win:
    """A run of consecutive history sizes at which one architecture was faster."""

    architecture: str
    times: list[tuple[int, float, float]]
    """(events, Lambda's seconds, Kappa's) at each size of the run."""

    @property
    def sizes(self) -> list[int]:
        return [n for n, _, _ in self.times]

    @property
    def ends(self) -> list[tuple[int, float, float]]:
        """The run's first and last size (once if it has one): the spread a sentence quotes."""
        return self.times[:1] if len(self.times) == 1 else [self.times[0], self.times[-1]]


@dataclass(frozen=True, slots=True)
class Costs:
    """Each architecture's start-up (its time at the smallest history) and its cost per million
    further events (the slope to the largest): the first decides small histories, the second
    large ones."""

    smallest: int
    start_lambda: float
    start_kappa: float
    per_million_lambda: float
    per_million_kappa: float
    events_share: float
    """At most how much of the smallest history's time its events cost (the rest: start-up)."""

    @property
    def cheaper_start(self) -> str:
        return "lambda" if self.start_lambda < self.start_kappa else "kappa"

    @property
    def cheaper_events(self) -> str:
        return "lambda" if self.per_million_lambda < self.per_million_kappa else "kappa"


@dataclass(frozen=True, slots=True)
class SweepReading:
    wins: list[Win]
    """Empty: no history size measured for both architectures."""
    costs: Costs | None
    largest: int
    cores: dict[str, float | None]
    """At the largest history: the cores each architecture kept busy on average."""

    @property
    def winners(self) -> list[str]:
        return [w.architecture for w in self.wins]

    @property
    def crossings(self) -> list[tuple[int, int]]:
        """Between which sizes the faster architecture changes."""
        return [(a.sizes[-1], b.sizes[0]) for a, b in itertools.pairwise(self.wins)]


def read_sweep(sweep: Sweep) -> SweepReading:
    times: dict[int, dict[str, float]] = {}
    for p in sweep.points:
        times.setdefault(p.events, {})[p.architecture] = p.seconds
    wins: list[Win] = []
    for n, t in sorted(times.items()):
        if not {"lambda", "kappa"} <= t.keys():
            continue
        faster = min(("lambda", "kappa"), key=lambda a: t[a])
        if not wins or wins[-1].architecture != faster:
            wins.append(Win(faster, []))
        wins[-1].times.append((n, t["lambda"], t["kappa"]))
    largest = max(p.events for p in sweep.points)
    cores = {p.architecture: p.cores for p in sweep.points if p.events == largest}
    return SweepReading(wins, _costs(sweep), largest, cores)


def _costs(sweep: Sweep) -> Costs | None:
    smallest = min(p.events for p in sweep.points)
    cost: dict[str, tuple[float, float]] = {}
    for arch in ("lambda", "kappa"):
        mine = sorted((p.events, p.seconds) for p in sweep.points if p.architecture == arch)
        if len(mine) >= 2 and mine[-1][0] > mine[0][0] and mine[0][0] == smallest:
            (n0, t0), (n1, t1) = mine[0], mine[-1]
            cost[arch] = (t0, (t1 - t0) / (n1 - n0) * 1e6)
    if len(cost) < 2:
        return None
    # The smallest history's own events, at each one's cost per event: how much of its time
    # is start-up.
    share = max(per * smallest / 1e6 / max(start, 1e-9) for start, per in cost.values())
    (start_l, per_l), (start_k, per_k) = cost["lambda"], cost["kappa"]
    return Costs(smallest, start_l, start_k, per_l, per_k, share)


def _decades(values: Sequence[float]) -> tuple[float, float]:
    """Limits of a log axis around `values`, a margin each side, holding a whole decade."""
    positive = [v for v in values if v > 0] or [1.0]
    low, high = min(positive) / 1.6, max(positive) * 1.6
    if math.floor(math.log10(high)) < math.ceil(math.log10(low)):  # no decade tick inside
        low, high = 10 ** math.floor(math.log10(low)), 10 ** math.ceil(math.log10(high))
    return low, high


def history_cost_figure(run: ComparisonRun) -> Section:
    fig_id, title = "fig-history-cost", "Cost as the history grows: reprocessing time vs events"
    own = own_points(run)
    sweep = run.sweep if run.sweep is not None and run.sweep.points else None
    if not own and sweep is None:
        return absent(fig_id, title)
    fig = new_figure(3.6)
    ax = fig.subplots()
    ax.set_xscale("log")
    ax.set_yscale("log")
    if sweep is not None:
        label = f"sweep of {sweep.date} ({machine(sweep.machine)})"
        for i, arch in enumerate(by_architecture(sweep.points)):
            mine = sorted((p.events, p.seconds) for p in sweep.points if p.architecture == arch)
            xs, ys = zip(*mine, strict=True)
            ax.plot(xs, ys, "o-", color=colour(arch, i), lw=1.4, label=f"{arch}, {label}")
    for i, p in enumerate(own):
        ax.plot(
            [p.events], [p.seconds], "*", ms=14, color=colour(p.architecture, i),
            markeredgecolor="#24292f", label=f"{p.architecture}, this run ({p.scenario})",
        )  # fmt: skip
    everything: list[OwnPoint | SweepPoint] = [*own, *(sweep.points if sweep else [])]
    ax.set_xlim(*_decades([p.events for p in everything]))
    ax.set_ylim(*_decades([p.seconds for p in everything]))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: events(v)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g} s"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("events in the history (log scale)")
    ax.set_ylabel("seconds to readers switched (log)")
    ax.grid(True, which="major", lw=0.4, alpha=0.6)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    return section(
        "history_cost.html.j2",
        fig_id,
        title,
        fig,
        sweep=sweep,
        reading=None if sweep is None else read_sweep(sweep),
        own=own,
        ranked=sorted(own, key=lambda p: p.seconds),
        machine={"cpus": run.workload.get("cpus"), "memory_gib": run.workload.get("memory_gib")},
    )
