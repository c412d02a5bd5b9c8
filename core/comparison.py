"""How far a served answer is from an expected one (the oracle's), view by view.

Rows are matched on their key fields and window (or session) start, or on their key fields alone
in a view of the current state (no time fields, ``segment_totals``): a row the oracle has and
the answer lacks is ``missing``, the reverse is ``extra``, a matched row whose end or values
differ is ``differing``. ``ctr`` is compared within 1e-9, every other value exactly. The same
measure serves `lk demo` and the comparison of the two architectures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from core.catalog import VIEWS, ViewSpec

Row = Mapping[str, Any]
Values = tuple[Any, ...]
Keyed = dict[tuple[Any, ...], Values]
"""A view's rows matched on their key: (key fields..., start) -> (end, value fields...); in a
view without time fields, (key fields...) -> (value fields...)."""

TOLERANCE = 1e-9
"""Relative and absolute tolerance on float values (``ctr``); every other value is exact."""


@dataclass(frozen=True, slots=True)
class ViewDistance:
    view: str
    served: int
    expected: int
    missing: int
    extra: int
    differing: int

    @property
    def exact(self) -> bool:
        return self.missing == self.extra == self.differing == 0

    @property
    def off(self) -> int:
        """Rows that are not as expected, whatever the way."""
        return self.missing + self.extra + self.differing

    def describe(self) -> str:
        if self.exact:
            return "exact"
        parts = [
            f"{n} {what}"
            for n, what in (
                (self.missing, "missing"),
                (self.extra, "extra"),
                (self.differing, "differing"),
            )
            if n
        ]
        return f"{self.off} off ({', '.join(parts)})"


def keyed(spec: ViewSpec, rows: Iterable[Row]) -> Keyed:
    if not spec.time_fields:  # the current state: one row per key
        return {
            tuple(row[k] for k in spec.keys): tuple(row[v] for v in spec.values) for row in rows
        }
    start, end = spec.time_fields
    return {
        (*(row[k] for k in spec.keys), row[start]): (row[end], *(row[v] for v in spec.values))
        for row in rows
    }


def same_values(a: Values | None, b: Values | None) -> bool:
    """Whether two matched rows agree (None: no row; two absent rows agree)."""
    if a is None or b is None:
        return a is b
    return len(a) == len(b) and all(
        math.isclose(float(x), float(y), rel_tol=TOLERANCE, abs_tol=TOLERANCE)
        if isinstance(x, float) or isinstance(y, float)
        else x == y
        for x, y in zip(a, b, strict=True)
    )


def view_distance(view: str, served: Iterable[Row], expected: Iterable[Row]) -> ViewDistance:
    """The distance of ``served`` rows of ``view`` from the ``expected`` rows."""
    spec = VIEWS[view]
    got, want = keyed(spec, served), keyed(spec, expected)
    both = got.keys() & want.keys()
    return ViewDistance(
        view=view,
        served=len(got),
        expected=len(want),
        missing=len(want.keys() - got.keys()),
        extra=len(got.keys() - want.keys()),
        differing=sum(1 for key in both if not same_values(got[key], want[key])),
    )
