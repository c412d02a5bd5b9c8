"""What each architecture weighs to operate and to maintain: the objects and requests the Helm
chart deploys per mode (`fig-weight`), and the lines of code shared by both or specific to one
(`fig-code`)."""

from __future__ import annotations

from typing import Final

from matplotlib import colormaps

from comparison import verdict
from comparison.figures import ComparisonRun
from comparison.report.common import (
    GIB,
    Section,
    absent,
    arch_legend,
    colour,
    new_figure,
    ordered,
    section,
)

_KINDS: Final = colormaps["tab20"]
"""A colour per Kubernetes kind (more kinds than the architectures' colours)."""
COUNTED: Final = ("shared", "lambda", "kappa")
"""The parts of the tree the code figure counts; the rest (tests, infra) is tooling."""


def weight_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.WEIGHT, "Operational weight: what the chart deploys per mode"
    if not run.chart_weight:
        return absent(fig_id, title)
    weights = run.chart_weight
    modes = [w.mode for w in weights]
    kinds = sorted(
        {k for w in weights for k in w.by_kind},
        key=lambda k: -sum(w.by_kind.get(k, 0) for w in weights),
    )
    fig = new_figure(3.2)
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
    colours = [colour(m, i) for i, m in enumerate(modes)]
    cpu.bar(modes, [w.cpu_requests_millicores / 1000 for w in weights], color=colours)
    cpu.set_title("CPU requested (cores)", fontsize=9)
    memory.bar(modes, [w.memory_requests_bytes / GIB for w in weights], color=colours)
    memory.set_title("memory requested (GiB)", fontsize=9)
    by_mode = {w.mode: w for w in weights}
    lighter: bool | None = None  # None: the chart lacks a mode to compare `both` with
    if {"lambda", "kappa", "both"} <= by_mode.keys():
        apart = [by_mode["lambda"], by_mode["kappa"]]
        both = by_mode["both"]
        lighter = both.cpu_requests_millicores < sum(
            w.cpu_requests_millicores for w in apart
        ) and both.memory_requests_bytes < sum(w.memory_requests_bytes for w in apart)
    return section("weight.html.j2", fig_id, title, fig, weights=weights, lighter=lighter)


def code_figure(run: ComparisonRun) -> Section:
    fig_id, title = verdict.CODE, "Code: lines shared by both architectures vs specific to one"
    code = run.code
    if code is None:
        return absent(fig_id, title)
    # Tooling rooms (tests, infra) would dwarf the rest: the per-room panel shows what counts.
    counted = {r: i for r, i in code.by_room.items() if i["part"] in COUNTED}
    tooling = [(r, i) for r, i in code.by_room.items() if r not in counted]
    fig = new_figure(0.8 + 0.3 * max(len(counted), 4))
    totals, rooms = fig.subplots(1, 2, width_ratios=(2, 3))
    parts = (("shared", code.shared), ("lambda", code.lambda_only), ("kappa", code.kappa_only))
    bars = totals.bar(
        [p for p, _ in parts], [n for _, n in parts], color=[colour(p) for p, _ in parts]
    )
    totals.bar_label(bars, fmt="{:,.0f}", fontsize=8)
    totals.set_title("lines of Python", fontsize=9)
    totals.margins(y=0.15)
    by_size = sorted(counted.items(), key=lambda kv: (-int(kv[1]["lines"]), kv[0]))
    bars = rooms.barh(
        [room for room, _ in by_size],
        [int(info["lines"]) for _, info in by_size],
        color=[colour(str(info["part"])) for _, info in by_size],
    )
    rooms.bar_label(bars, fmt="{:,.0f}", fontsize=7, padding=2)
    rooms.margins(x=0.12)
    rooms.invert_yaxis()
    rooms.tick_params(axis="y", labelsize=8)
    rooms.set_title("per room", fontsize=9)
    arch_legend(rooms, ordered(str(info["part"]) for _, info in by_size))
    return section("code.html.j2", fig_id, title, fig, code=code, tooling=tooling)
