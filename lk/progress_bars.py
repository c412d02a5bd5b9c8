"""The bars `lk` draws for long work: fetching and building the stack's artifacts, producing
a workload, replaying the log.

They are drawn only on a terminal (`rich`), and vanish when their work is done; a line then
says what was done, so a log or a pipe gets the same facts without the redrawing.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import click
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    ProgressColumn,
    SpinnerColumn,
    Task,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)
from rich.text import Text

from core.store.streams import kappa_stream

if TYPE_CHECKING:
    from kappa.reprocess import ReplayPosition

Echo = Callable[[str], None]


def on_terminal() -> bool:
    return sys.stdout.isatty()


class RateColumn(ProgressColumn):
    """Units per second over the last seconds (rich's own speed column counts bytes)."""

    def __init__(self, unit: str) -> None:
        super().__init__()
        self.unit = unit

    def render(self, task: Task) -> Text:
        speed = task.finished_speed or task.speed
        return Text(f"{speed:,.0f} {self.unit}/s" if speed else f"- {self.unit}/s")


class BuildBars:
    """A `BuildProgress` (infra.stack.artifacts): one bar per fetch or build, counting its
    files or packages, with the last one named; the total is unknown until it is done."""

    def __init__(self, echo: Echo = click.echo, terminal: bool | None = None) -> None:
        self.echo = echo
        self.terminal = on_terminal() if terminal is None else terminal
        self.bar: Progress | None = None

    def started(self, build: str, unit: str) -> None:
        self.build, self.unit, self.done, self.began = build, unit, 0, time.monotonic()
        self.echo(f"  {build} ...")
        self.bar = Progress(
            SpinnerColumn(), TextColumn(f"  {build}"), BarColumn(),
            TextColumn(f"{{task.completed:,.0f}} {unit}"), TimeElapsedColumn(),
            TextColumn("[dim]{task.fields[item]}"),
            transient=True, disable=not self.terminal,
        )  # fmt: skip
        self.task = self.bar.add_task(build, total=None, item="")
        self.bar.start()

    def advanced(self, item: str) -> None:
        self.done += 1
        if self.bar is not None:
            self.bar.update(self.task, advance=1, item=item[-60:])

    def finished(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
        seconds = time.monotonic() - self.began
        self.echo(f"  {self.build}: {self.done:,} {self.unit} in {seconds:.0f}s")


Update = Callable[[int, int | None], None]


def produce_bar(total: int | None, terminal: bool | None = None) -> tuple[Progress, Update]:
    """A bar for producing `total` lines, None if unknown (lines done, rate, time left), and
    its update."""
    bar = Progress(
        TextColumn("  producing"), BarColumn(), MofNCompleteColumn(), TextColumn("lines"),
        RateColumn("lines"), TimeRemainingColumn(),
        transient=True, disable=not (on_terminal() if terminal is None else terminal),
    )  # fmt: skip
    task = bar.add_task("produce", total=total)

    def update(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    return bar, update


class ReplayBars:
    """One bar per replay round of a Kappa reprocess, fed its `ReplayPosition`s: offsets read
    of those to read, micro-batches, records/s, time left."""

    def __init__(self, terminal: bool | None = None) -> None:
        self.bar = Progress(
            TextColumn("  {task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("offsets, {task.fields[micro_batches]} micro-batches"),
            RateColumn("records"), TimeRemainingColumn(),
            transient=True, disable=not (on_terminal() if terminal is None else terminal),
        )  # fmt: skip
        self.rounds: dict[int, TaskID] = {}

    def __call__(self, at: ReplayPosition) -> None:
        if at.round not in self.rounds:
            name = f"replaying into {kappa_stream(at.version)}, round {at.round}"
            self.rounds[at.round] = self.bar.add_task(name, total=at.to_read, micro_batches=0)
        self.bar.update(self.rounds[at.round], completed=at.read, micro_batches=at.micro_batches)
