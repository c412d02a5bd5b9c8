"""Lambda merged vs Kappa vs the oracle, on one view's windows both architectures have closed.

``reconcile`` returns one row per (key, window) where the three do not all agree, with the
values each side holds and a cause per disagreeing architecture:

- ``late data dropped by the stream path``: the side equals the oracle computed without the
  events that side's watermark dropped (``without_late``; e.g.
  ``core.oracle.compute_views(values, profiles, keep=lambda e: e.event_id not in late_ids)``
  with the ids of the stream's ``late`` audit table);
- ``profile history lost to compaction`` (``revenue_by_segment`` only): the side's revenue of
  the window, summed over segments, equals the oracle's (or the late-free oracle's, when both
  apply) but is split between segments differently: the orders were joined to other profile
  versions, which is what a replay of the compacted ``profiles`` topic does. Not for
  ``segment_totals``: it joins each user with their last profile record, the one compaction
  keeps, so a replay rebuilds it exactly;
- ``unexplained``: anything else. The ``reconciliation`` suite expects none.

Cross-view rules (``CROSS_VIEW_RULES``, ``cross_view``) hold between two views of one side,
on every side alike: ``search_conversions.clicked == search_ctr.clicks`` per query and window
(CONTRACT section 3 counts ``clicked`` "as ``search_ctr``"). Both views take the same events and
drop the same late ones, so no cause explains a break: each is ``unexplained``, in the same
table and suite as the disagreements above.

A view of the current state (``segment_totals``: no window, so none ever closes) is compared
row by row on its keys, but only when the caller knows both sides have read every event and
profile record the oracle was computed from (``unsettled`` is None); otherwise no row of it is
compared, and ``notes`` says so and why. Hopping windows are compared like any window, once
closed (they overlap: a late event may explain ten of them).

Plain pandas: views are small. Values are compared exactly, ``ctr`` within 1e-9.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import pandas as pd

from core.catalog import SESSION_GAP_MS, VIEWS, ViewSpec
from core.comparison import Keyed, Values, same_values
from core.settings import Architecture
from core.times import instant_ms, iso
from quality.prepare import Rows, as_pandas, epoch_ms
from quality.suites import (  # the table's shape is the reconciliation suite's
    CAUSES,
    COLUMNS,
    COMPACTION,
    LATE_AND_COMPACTION,
    LATE_DATA,
    UNEXPLAINED,
)

ARCHITECTURES: Final = (Architecture.LAMBDA, Architecture.KAPPA)


def _keyed(spec: ViewSpec, rows: Rows, closed_before_ms: int) -> Keyed:
    """A side's rows of the closed windows, keyed as `core.comparison.keyed` keys them (with
    epoch-ms times: the sides come as frames, strings or datetimes). A view of the current
    state: every row, keyed on its keys alone."""
    df = as_pandas(rows)
    if df.empty:
        return {}
    missing = [c for c in spec.columns if c not in df.columns]
    if missing:
        raise ValueError(f"{spec.name} rows lack column(s) {', '.join(missing)}")
    fields = df[list(spec.keys) + list(spec.values)].itertuples(index=False)
    if spec.current_state:
        return {tuple(row)[: len(spec.keys)]: tuple(row)[len(spec.keys) :] for row in fields}
    start, end = spec.time_fields
    starts, ends = epoch_ms(df[start]), epoch_ms(df[end])
    # A session is closed once no event can still extend it (a later event within the gap).
    horizon = ends + SESSION_GAP_MS + 1 if spec.window_ms is None else ends
    out: Keyed = {}
    for i, row in enumerate(fields):
        if pd.isna(starts.iloc[i]) or horizon.iloc[i] > closed_before_ms:
            continue
        keys, values = tuple(row)[: len(spec.keys)], tuple(row)[len(spec.keys) :]
        out[(*keys, int(starts.iloc[i]))] = (int(ends.iloc[i]), *values)
    return out


def _window_totals(rows: Keyed) -> dict[int, int]:
    """revenue_by_segment: revenue per window start, over all segments."""
    totals: dict[int, int] = {}
    for (_segment, start), (_end, revenue) in rows.items():
        totals[start] = totals.get(start, 0) + int(revenue)
    return totals


def _cause(
    spec: ViewSpec,
    key: tuple[Any, ...],
    side: Keyed,
    oracle: Keyed,
    late_free: Keyed | None,
) -> str:
    """Why ``side`` differs from the oracle at ``key`` (it is known to differ)."""
    if late_free is not None and same_values(side.get(key), late_free.get(key)):
        return LATE_DATA
    if spec.name == "revenue_by_segment":
        start = key[-1]
        total = _window_totals(side).get(start, 0)
        if total == _window_totals(oracle).get(start, 0):
            return COMPACTION
        if late_free is not None and total == _window_totals(late_free).get(start, 0):
            return LATE_AND_COMPACTION
    return UNEXPLAINED


def _show(spec: ViewSpec, values: Values | None) -> str:
    if values is None:
        return "-"
    shown = values[-len(spec.values) :]  # after the window's end, if the view has one
    return ", ".join(f"{name}={value}" for name, value in zip(spec.values, shown, strict=True))


NOT_COMPARED: Final = "not_compared"
"""A table's ``attrs`` key: the views it leaves out, each with the reason (for ``notes``)."""


def _not_compared(view: str, reason: str) -> pd.DataFrame:
    table = pd.DataFrame(columns=list(COLUMNS))
    table.attrs[NOT_COMPARED] = [f"{view} not compared: {reason}"]
    return table


def reconcile(
    view: str,
    lambda_rows: Rows,
    kappa_rows: Rows,
    oracle_rows: Rows,
    *,
    closed_before: datetime | int | str,
    without_late: Mapping[str, Rows] | None = None,
    unsettled: str | None = None,
) -> pd.DataFrame:
    """The disagreements of one view between Lambda (merged), Kappa and the oracle.

    Rows are dicts or frames with the view's columns (``core.catalog``); times may be ISO
    strings or datetimes. Only windows ending at or before ``closed_before`` (a session: whose
    end plus the session gap is before it) are compared: pass the earlier of the two
    architectures' watermarks. ``without_late`` maps ``"lambda"``/``"kappa"`` to the oracle's
    rows without the events that architecture dropped as late (absent: no late attribution).
    ``unsettled`` says why the sides may not have read every record the oracle counts (None:
    they have); a view of the current state is then not compared (nothing of it is final).
    Returns a frame with ``COLUMNS``, sorted by key and window (``window_start`` and
    ``window_end`` None for the current state).
    """
    spec = VIEWS[view]
    if spec.current_state and unsettled is not None:
        return _not_compared(view, unsettled)
    cutoff = instant_ms(closed_before)
    sides = {
        "lambda": _keyed(spec, lambda_rows, cutoff),
        "kappa": _keyed(spec, kappa_rows, cutoff),
    }
    oracle = _keyed(spec, oracle_rows, cutoff)
    late_free = {
        arch: _keyed(spec, rows, cutoff)
        for arch, rows in (without_late or {}).items()
        if arch in ARCHITECTURES
    }
    records = []
    for key in sorted(set(oracle).union(*sides.values())):
        expected = oracle.get(key)
        causes = {
            arch: ""
            if same_values(rows.get(key), expected)
            else _cause(spec, key, rows, oracle, late_free.get(arch))
            for arch, rows in sides.items()
        }
        if not any(causes.values()):
            continue
        found = [c for c in causes.values() if c]
        cause = UNEXPLAINED if UNEXPLAINED in found else "; ".join(dict.fromkeys(found))
        if cause not in CAUSES:  # lambda late + kappa compaction and the like
            cause = LATE_AND_COMPACTION
        shown = {name: _show(spec, rows.get(key)) for name, rows in sides.items()}
        shown["oracle"] = _show(spec, expected)
        if spec.current_state:
            key_values, start, end, where = key, None, None, "(current state)"
        else:
            known = expected or sides["lambda"].get(key) or sides["kappa"].get(key)
            assert known is not None
            key_values, start, end = key[:-1], iso(key[-1]), iso(known[0])
            where = f"[{start}, {end})"
        key_text = " ".join(f"{k}={v}" for k, v in zip(spec.keys, key_values, strict=True))
        label = (
            f"{view} {key_text} {where}: lambda {shown['lambda']}; "
            f"kappa {shown['kappa']}; oracle {shown['oracle']}"
        ).replace("  ", " ")
        records.append(
            {
                "view": view,
                "key": key_text,
                "window_start": start,
                "window_end": end,
                **shown,
                "lambda_cause": causes["lambda"],
                "kappa_cause": causes["kappa"],
                "cause": cause,
                "window": label,
            }
        )
    return pd.DataFrame(records, columns=list(COLUMNS))


# --- rules across views ---------------------------------------------------------------------


@dataclass(frozen=True)
class SameValue:
    """``left.left_column == right.right_column`` on every key and window of two views keyed
    alike (a row one view has and the other lacks breaks it too)."""

    left: str
    left_column: str
    right: str
    right_column: str

    @property
    def name(self) -> str:
        return f"{self.left}.{self.left_column} = {self.right}.{self.right_column}"


CROSS_VIEW_RULES: Final = (SameValue("search_conversions", "clicked", "search_ctr", "clicks"),)
"""The rules ``cross_view`` checks (CONTRACT section 3: a pattern's first two steps are
``search_ctr``'s searches and clicks)."""

SIDES: Final = ("lambda", "kappa", "oracle")


def _column(view: str, rows: Rows, column: str, closed_before_ms: int) -> dict[Any, Any]:
    """One value column of a windowed view's closed rows: (keys..., start) -> (end, value)."""
    spec = VIEWS[view]
    assert spec.time_fields, f"{view}: a cross-view rule compares windows"
    at = 1 + spec.values.index(column)  # after the window's end
    return {
        key: (values[0], values[at]) for key, values in _keyed(spec, rows, closed_before_ms).items()
    }


def cross_view(
    views: Mapping[str, Mapping[str, Rows]],
    *,
    closed_before: datetime | int | str,
    rules: tuple[SameValue, ...] = CROSS_VIEW_RULES,
) -> pd.DataFrame:
    """The closed windows where a side breaks a cross-view rule: ``views`` maps ``"lambda"``,
    ``"kappa"`` and ``"oracle"`` to that side's rows by view (a side left out is not checked).
    One row per rule, key and window, in the reconciliation's ``COLUMNS``: each side's two
    values, ``unexplained`` for each side that breaks the rule."""
    cutoff = instant_ms(closed_before)
    records = []
    for rule in rules:
        left_spec = VIEWS[rule.left]
        pairs = {
            side: (
                _column(rule.left, views[side][rule.left], rule.left_column, cutoff),
                _column(rule.right, views[side][rule.right], rule.right_column, cutoff),
            )
            for side in SIDES
            if side in views
        }
        keys = set().union(*(set(a) | set(b) for a, b in pairs.values()))
        for key in sorted(keys):
            shown, broken = {}, {}
            for side in SIDES:
                if side not in pairs:
                    shown[side], broken[side] = "-", False
                    continue
                left, right = (values.get(key) for values in pairs[side])
                broken[side] = left is None or right is None or left[1] != right[1]
                shown[side] = (
                    f"{rule.left_column}={'-' if left is None else left[1]}, "
                    f"{rule.right_column}={'-' if right is None else right[1]}"
                )
            if not any(broken.values()):
                continue
            end = next(
                values[key][0] for a, b in pairs.values() for values in (a, b) if key in values
            )
            key_values, start = key[:-1], iso(key[-1])
            key_text = " ".join(f"{k}={v}" for k, v in zip(left_spec.keys, key_values, strict=True))
            where = f"[{start}, {iso(end)})"
            label = "; ".join(f"{side} {shown[side]}" for side in SIDES)
            records.append(
                {
                    "view": rule.name,
                    "key": key_text,
                    "window_start": start,
                    "window_end": iso(end),
                    "lambda": shown["lambda"],
                    "kappa": shown["kappa"],
                    "oracle": shown["oracle"],
                    "lambda_cause": UNEXPLAINED if broken["lambda"] else "",
                    "kappa_cause": UNEXPLAINED if broken["kappa"] else "",
                    "cause": UNEXPLAINED,
                    "window": f"{rule.name} {key_text} {where}: {label}",
                }
            )
    return pd.DataFrame(records, columns=list(COLUMNS))


def combine(tables: list[pd.DataFrame]) -> pd.DataFrame:
    """Several views' disagreements as one table, for one ``reconciliation`` validation (the
    views left out, in its ``attrs``)."""
    frames = [t for t in tables if not t.empty]
    combined = (
        pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=list(COLUMNS))
    )
    left_out = [line for t in tables for line in t.attrs.get(NOT_COMPARED, [])]
    combined.attrs = {NOT_COMPARED: left_out} if left_out else {}
    return combined


def notes(table: pd.DataFrame) -> list[str]:
    """Markdown lines for Data Docs: each disagreement and its cause, then each view left
    out and why."""
    left_out = [f"- {line}" for line in table.attrs.get(NOT_COMPARED, [])]
    if table.empty:
        compared = " of the views compared" if left_out else ""
        return [f"Lambda, Kappa and the oracle agree on every closed window{compared}.", *left_out]
    lines = [f"- {row.window} -> **{row.cause}**" for row in table.itertuples(index=False)]
    return [*lines, *left_out]
