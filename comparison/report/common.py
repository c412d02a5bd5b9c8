"""What every figure of the report shares: its colours and reading orders, the PNG it becomes,
and the Jinja environment that writes its section from the run's numbers.

A figure's module computes numbers and draws a matplotlib `Figure`; `section` hands both to
its template (`comparison/templates/<name>.html.j2`), which writes the tables and the "How to
read this" prose with the filters registered here (`seconds`, `rows`, `bytes`, ...).
"""

from __future__ import annotations

import base64
import functools
import html
import io
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Protocol, TypeVar

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup, escape
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Patch

from core.catalog import VIEW_NAMES

ARCH_ORDER: Final = ("lambda", "kappa", "shared")
ARCH_COLOURS: Final = {"lambda": "#1f6feb", "kappa": "#e8590c", "shared": "#8c959f"}
PART_COLOURS: Final = {**ARCH_COLOURS, "tooling": "#d0d7de", "unclassified": "#cf222e"}
WARM_UP_COLOUR: Final = "#e9ecef"
SPAN_COLOURS: Final = ("#fff3bf", "#d3f9d8", "#e5dbff", "#ffe3e3", "#d0ebff", "#f1f3f5")
OTHER_COLOURS: Final = (
    "#2f9e44",
    "#ae3ec9",
    "#1098ad",
    "#f08c00",
    "#495057",
    "#c2255c",
    "#7048e8",
    "#8d5524",
)
"""Colours of what is not an architecture: one per view (eight), per kind of bytes stored."""
MISSING: Final = "\N{EN DASH}"
DPI: Final = 100
WIDTH_IN: Final = 9.0
MIB: Final = 1024 * 1024
GIB: Final = 1024 * MIB


# --- reading orders -----------------------------------------------------------------------------


def ordered(names: Iterable[str]) -> list[str]:
    """Architectures in reading order: Lambda, Kappa, what they share, then any other."""
    rank = {name: i for i, name in enumerate(ARCH_ORDER)}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


def views(names: Iterable[str]) -> list[str]:
    """Views in the catalogue's order (CONTRACT §3), then any other by name."""
    rank = {name: i for i, name in enumerate(VIEW_NAMES)}
    return sorted(set(names), key=lambda n: (rank.get(n, len(rank)), n))


class OfArchitecture(Protocol):
    @property
    def architecture(self) -> str: ...


_T = TypeVar("_T", bound=OfArchitecture)


def by_architecture(items: Iterable[OfArchitecture]) -> list[str]:
    return ordered(x.architecture for x in items)


def in_order(items: Iterable[_T]) -> list[_T]:
    """Items sorted by their architecture, in the reading order of `ordered`."""
    listed = list(items)
    rank = by_architecture(listed)
    return sorted(listed, key=lambda x: rank.index(x.architecture))


def colour(name: str, index: int = 0) -> str:
    """An architecture's (or a part's) own colour; anything else the `index`-th other one."""
    return PART_COLOURS.get(name) or OTHER_COLOURS[index % len(OTHER_COLOURS)]


# --- how numbers read: the templates' filters ----------------------------------------------------


def seconds(value: float | None) -> str:
    if value is None:
        return MISSING
    return (
        f"{value:,.0f} s" if value >= 100 else f"{value:,.2g} s" if value < 1 else f"{value:.1f} s"
    )


def rows(n: int) -> str:
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def size(value: float | None) -> str:
    """Bytes in the largest unit that keeps a whole number in front."""
    if value is None:
        return MISSING
    for unit, of in (("GiB", GIB), ("MiB", MIB), ("KiB", 1024)):
        if value >= of:
            return f"{value / of:,.1f} {unit}"
    return f"{value:,.0f} B"


def events(n: float) -> str:
    """An event count as an axis or a sentence names it: 10k, 1M, 2.5M."""
    if n >= 1e6:
        return f"{n / 1e6:,.3g}M"
    if n >= 1e3:
        return f"{n / 1e3:,.3g}k"
    return f"{n:,.0f}"


def number(value: float | None, digits: int | None = None) -> str:
    """Thousands separated; a float to `digits` places (an int as it is)."""
    if value is None:
        return MISSING
    if digits is None:
        return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"
    return f"{value:,.{digits}f}"


def percent(value: float, digits: int = 1) -> str:
    return f"{value:.{digits}%}"


def machine(described: Mapping[str, object]) -> str:
    parts = []
    if described.get("cpus") is not None:
        parts.append(f"{described['cpus']} CPUs")
    if described.get("memory_gib") is not None:
        parts.append(f"{described['memory_gib']} GiB")
    if described.get("kind"):
        parts.append(str(described["kind"]))
    return ", ".join(parts) or "machine not recorded"


def _prose(text: str) -> Markup:
    """A "How to read this" paragraph as one line: the template's line breaks become single
    spaces, and none is left before a closing mark, so that the templates can wrap their
    sentences freely. Its input is the block's already escaped output."""
    flat = re.sub(r"\s+", " ", str(escape(text))).strip()
    return Markup(re.sub(r"\(\s", "(", re.sub(r"\s([.,;:)])", r"\1", flat)))  # noqa: S704


def _tight(text: str) -> Markup:
    """Markup without the template's line breaks and indentation (a table's cells then read as
    `<td>a</td><td>b</td>`); spaces within a line stay."""
    return Markup(re.sub(r"\s*\n\s*", "", str(escape(text))))  # noqa: S704


def _escaped(value: object) -> object:
    """Every value a template prints, escaped as `html.escape` does (`&#x27;` for a quote, the
    form the report has always had); markup (a section, a macro's output) passes as it is."""
    if hasattr(value, "__html__"):
        return value
    return Markup(html.escape(MISSING if value is None else str(value)))  # noqa: S704


@functools.cache
def environment() -> Environment:
    """The report's templates, autoescaped (the run's text is data, never markup)."""
    env = Environment(
        loader=PackageLoader("comparison", "templates"),
        autoescape=True,
        finalize=_escaped,
        undefined=StrictUndefined,  # a misspelt name fails the render, not the reader
        # A line break after a tag stays: in prose it is the space between two words (`prose`
        # makes it one), in markup `tight` drops it.
        lstrip_blocks=True,
    )
    env.filters.update(
        seconds=seconds,
        rows=rows,
        bytes=size,
        events=events,
        number=number,
        percent=percent,
        machine=machine,
        prose=_prose,
        tight=_tight,
    )
    env.globals["MISSING"] = MISSING
    return env


# --- a figure's section -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Section:
    """One figure of the page: its anchor, its heading and its HTML."""

    fig_id: str
    title: str
    html: Markup


def png(fig: Figure) -> str:
    """The figure as an inline PNG (base64): no file, no URL."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def new_figure(height_in: float) -> Figure:
    return Figure(figsize=(WIDTH_IN, height_in), layout="constrained")


def section(template: str, fig_id: str, title: str, fig: Figure, **numbers: Any) -> Section:
    """A drawn figure's section: `template` writes its tables and its "How to read this" from
    `numbers` beside the PNG of `fig`."""
    page = environment().get_template(template)
    html_ = page.render(fig_id=fig_id, title=title, png=png(fig), **numbers)
    return Section(fig_id, title, Markup(html_))  # noqa: S704


def absent(fig_id: str, title: str) -> Section:
    """A figure whose data the run did not measure: one line instead."""
    html_ = environment().get_template("absent.html.j2").render(fig_id=fig_id, title=title)
    return Section(fig_id, title, Markup(html_))  # noqa: S704


# --- matplotlib helpers -------------------------------------------------------------------------


def arch_legend(ax: Axes, names: Iterable[str]) -> None:
    handles = [Patch(color=colour(n, i), label=n) for i, n in enumerate(names)]
    ax.legend(handles=handles, fontsize=8, loc="best")


def grouped_bars(
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
        ax.bar(xs, heights, width, color=colour(name, i))
    ax.set_xticks(range(len(groups)), groups, fontsize=8)
