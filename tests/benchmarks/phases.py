"""Where a stream micro-batch spends its time, measured from outside the engine.

The bench does not change the stream engine (`stream_engine.engine`). While a measurement runs,
`PhaseTimer` wraps the engine's steps and some of the calls inside them with timers
(class and module attributes, put back on exit):

- the engine's steps: on Spark's side of a micro-batch, its one Spark job (Kafka, the parse,
  the deduplication, the records to Arrow on the driver) and the write to the inbox; in the
  merge thread, the accepted log's appends (Lambda), the merge of the additive views'
  partial aggregates into keyed state, the session merge (both on DuckDB), and the commit
  to the serving store.

A call inside one of the steps counts in that step only (some are also shown on their own: the
DuckDB queries, the state lookups, the partial rows' JSON, the lookup of the users' sessions).
What is left ("other") is Python: the split of the records, the watermark, the logic version.
"""

from __future__ import annotations

import ctypes
import functools
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, ClassVar

from core.store import realtime
from core.store import sessions as stored_sessions
from core.store import state as stream_state
from stream_engine import engine as engine_module
from stream_engine import keyed_merge, state_rows
from stream_engine.accepted_log import AcceptedLog
from stream_engine.engine import StreamEngine
from stream_engine.inbox import Inbox
from stream_engine.keyed_merge import KeyedMerge

_SIDES: dict[str, tuple[Any, str]] = {
    "micro-batch, Spark's side": (StreamEngine, "process_batch"),
    "micro-batch, the merge": (StreamEngine, "_merge"),
}
# Label -> (owner whose attribute is wrapped, attribute).
_STEPS: dict[str, tuple[Any, str]] = {
    "the micro-batch to the driver (Spark: Kafka, parse, dedup, to Arrow)": (
        StreamEngine,
        "_collect",
    ),
    "the micro-batch into the inbox (Arrow IPC on MinIO)": (Inbox, "put"),
    "the stream's progress and claim (Postgres)": (StreamEngine, "_progress"),
    "the checkpoint's offsets log, read back": (engine_module, "batch_offsets"),
    "the lost-records check (Kafka's log start and end)": (engine_module, "lost_records"),
    "the micro-batch out of the inbox (a delete on MinIO)": (Inbox, "remove"),
    "accepted log appends (Lambda, Parquet on MinIO)": (AcceptedLog, "append"),
    "additive views (DuckDB): partial, merge, delta, totals": (KeyedMerge, "_additive"),
    "sessions merge (DuckDB)": (KeyedMerge, "_sessions"),
    "serving store commit (Postgres)": (realtime, "commit_batch"),
}
_CALLS: dict[str, tuple[Any, str]] = {}
# Calls inside the steps worth seeing on their own: counted (in full) under their own label
# too, and not again in "other". They are part of their step's time.
_DETAILS: dict[str, tuple[Any, str]] = {
    "  within merges: DuckDB queries": (keyed_merge, "on_duckdb"),
    "  within merges: keyed state lookups (Postgres)": (stream_state, "load"),
    "  within merges: partial rows to JSON": (state_rows, "rows"),
    "  within sessions merge: the users' sessions (Postgres)": (
        stored_sessions,
        "stream_sessions",
    ),
}
OTHER = "other (Python, lazy plan building)"


class BenchInterrupt(Exception):  # noqa: N818 - it is an interruption, not an error of the code
    """Raised inside a micro-batch's Python code when the bench's time for the step is up."""


OnEnter = Callable[[str], Any]
OnExit = Callable[[str, float, tuple[Any, ...], Any], None]
"""(label, seconds, the call's arguments, what `OnEnter` returned for this call)."""


@contextmanager
def wrapped(
    targets: dict[str, tuple[Any, str]],
    on_exit: OnExit,
    on_enter: OnEnter = lambda label: None,
) -> Iterator[None]:
    """Within the context, each target attribute (label -> (owner, attribute)) is a wrapper that
    times the original: `on_enter(label)` before, `on_exit(...)` after. Put back on exit, as
    it was (a classmethod stays a classmethod)."""
    saved = []
    for label, (owner, name) in targets.items():
        raw = vars(owner).get(name) if isinstance(owner, type) else None
        original = getattr(owner, name)  # bound to the class for a classmethod
        saved.append((owner, name, raw if raw is not None else original))
        setattr(owner, name, _timed(label, original, on_enter, on_exit))
    try:
        yield
    finally:
        for owner, name, original in reversed(saved):
            setattr(owner, name, original)


def _timed(
    label: str, original: Callable[..., Any], on_enter: OnEnter, on_exit: OnExit
) -> Callable[..., Any]:
    @functools.wraps(original)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        token = on_enter(label)
        started = time.monotonic()
        try:
            return original(*args, **kwargs)
        finally:
            on_exit(label, time.monotonic() - started, args, token)

    return wrapper


@dataclass
class BatchTiming:
    batch_id: int
    seconds: float
    phases: dict[str, float] = field(default_factory=dict)
    new_events: int = 0
    late: int = 0
    invalid: int = 0
    keys: dict[str, int] = field(default_factory=dict)
    skipped: bool = False
    completed: bool = False  # False: it failed or was interrupted (no outcome)

    def as_dict(self) -> dict[str, Any]:
        return {
            "batch_id": self.batch_id,
            "seconds": round(self.seconds, 3),
            "new_events": self.new_events,
            "late": self.late,
            "invalid": self.invalid,
            "keys": self.keys,
            "skipped": self.skipped,
            "completed": self.completed,
            "phases_s": {k: round(v, 3) for k, v in self.phases.items()},
        }


class PhaseTimer:
    """Per-micro-batch timings of every `StreamEngine` while `installed()` is open.

    A micro-batch runs in two threads: Spark's side (`process_batch`, the query's thread) and
    the merge (`_merge`, the merge thread), which overlap with the neighbouring batches'. Its
    seconds are the two sides' added up: its work, not the wall time between batches."""

    installed_now: ClassVar[set[PhaseTimer]] = set()

    def __init__(self) -> None:
        self._timings: dict[int, BatchTiming] = {}
        self._lock = threading.Lock()
        self._local = threading.local()  # each thread's wrapped calls in flight and phases
        self._busy_threads: set[int] = set()  # the threads running a side of a micro-batch

    @property
    def batches(self) -> list[BatchTiming]:
        with self._lock:
            return [self._timings[b] for b in sorted(self._timings)]

    @contextmanager
    def installed(self) -> Iterator[PhaseTimer]:
        targets = {**_SIDES, **_STEPS, **_CALLS, **_DETAILS}
        PhaseTimer.installed_now.add(self)
        try:
            with wrapped(targets, self._exit, self._enter):
                yield self
        finally:
            PhaseTimer.installed_now.discard(self)

    @staticmethod
    def interrupt_all() -> bool:
        """`interrupt()` on every timer installed now (the bench's teardown on SIGTERM)."""
        return any([timer.interrupt() for timer in list(PhaseTimer.installed_now)])

    def _stack(self) -> list[str]:
        stack: list[str] | None = getattr(self._local, "stack", None)
        if stack is None:
            stack = self._local.stack = []
        return stack

    def _enter(self, label: str) -> str | None:
        """Push `label`; returns the label of the wrapped call it runs inside, if any."""
        stack = self._stack()
        parent = stack[-1] if stack else None
        stack.append(label)
        if label in _SIDES:
            self._local.phases = {}
            with self._lock:
                self._busy_threads.add(threading.get_ident())
        return parent

    def interrupt(self) -> bool:
        """Raise `BenchInterrupt` in the micro-batches' Python code running now, if any.

        Stopping a query waits for its micro-batch, and a micro-batch busy in Python (the
        session merge can be, for minutes) does not notice Spark's interruption: this makes it
        fail at its next Python instruction instead, so a time budget holds."""
        with self._lock:
            threads = list(self._busy_threads)
        set_async_exc = ctypes.pythonapi.PyThreadState_SetAsyncExc
        hits = [set_async_exc(ctypes.c_ulong(t), ctypes.py_object(BenchInterrupt)) for t in threads]
        return any(hits)

    def _exit(self, label: str, seconds: float, args: tuple[Any, ...], parent: Any) -> None:
        self._stack().pop()
        phases: dict[str, float] = getattr(self._local, "phases", {})
        if label not in _SIDES:
            # What a side calls itself; a call nested in a step is part of that step (a
            # detail is shown on its own as well).
            if parent in _SIDES or label in _DETAILS:
                phases[label] = phases.get(label, 0.0) + seconds
            return
        self._local.phases = {}
        engine, batch_id = args[0], _batch_id(args)
        direct = sum(v for k, v in phases.items() if k not in _DETAILS)
        phases[OTHER] = max(0.0, seconds - direct)
        outcome = next((o for o in reversed(engine.outcomes) if o.batch_id == batch_id), None)
        with self._lock:
            self._busy_threads.discard(threading.get_ident())
            timing = self._timings.setdefault(batch_id, BatchTiming(batch_id, 0.0))
            timing.seconds += seconds
            for phase, spent in phases.items():
                timing.phases[phase] = timing.phases.get(phase, 0.0) + spent
            if outcome is not None:
                timing.new_events, timing.late, timing.invalid = (
                    outcome.new_events,
                    outcome.late,
                    outcome.invalid,
                )
                timing.keys = dict(outcome.keys)
                timing.skipped, timing.completed = outcome.skipped, True

    def summary(self) -> dict[str, Any]:
        """Totals per phase over the micro-batches that did work, largest first, with shares."""
        worked = [b for b in self.batches if not b.skipped]
        total = sum(b.seconds for b in worked)
        per_phase: dict[str, float] = {}
        for batch in worked:
            for phase, seconds in batch.phases.items():
                per_phase[phase] = per_phase.get(phase, 0.0) + seconds
        ranked = sorted(per_phase.items(), key=lambda item: -item[1])
        durations = sorted(b.seconds for b in worked)
        percentiles = (
            {
                f"p{p}": round(durations[min(len(durations) - 1, int(len(durations) * p / 100))], 2)
                for p in (50, 90, 99)
            }
            if durations
            else {}
        )
        return {
            "batch_seconds_percentiles": percentiles,
            "micro_batches": len(worked),
            "not_completed": sum(1 for b in worked if not b.completed),
            "seconds": round(total, 2),
            "batch_seconds_min_median_max": (
                [
                    round(durations[0], 2),
                    round(durations[len(durations) // 2], 2),
                    round(durations[-1], 2),
                ]
                if durations
                else []
            ),
            "phases": [
                {
                    "phase": phase,
                    "seconds": round(seconds, 2),
                    "share": round(seconds / total, 3) if total else 0.0,
                }
                for phase, seconds in ranked
            ],
        }


def _batch_id(args: tuple[Any, ...]) -> int:
    """The batch id of a side's call: ``process_batch(engine, batch, batch_id)`` or
    ``_merge(engine, pending)``."""
    return int(args[2]) if len(args) > 2 else int(args[1].batch_id)


def phase_lines(summary: dict[str, Any], top: int = 8) -> list[str]:
    """The summary as printable lines."""
    cut = summary["not_completed"]
    lines = [
        f"    {summary['micro_batches']} micro-batches"
        + (f" ({cut} stopped before the end)" if cut else "")
        + f", {summary['seconds']:.1f}s in all "
        f"(min/median/max {summary['batch_seconds_min_median_max']} s)"
    ]
    for item in summary["phases"][:top]:
        if item["seconds"] >= 0.05:
            lines.append(f"    {item['share']:6.1%}  {item['seconds']:8.1f}s  {item['phase']}")
    return lines
