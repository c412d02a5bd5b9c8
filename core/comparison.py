"""How far a served answer is from an expected one (the oracle's), view by view.

Rows are matched on their key fields and window (or session) start: a row the oracle has and
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
_REL_TOL = 1e-9


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


def _keyed(spec: ViewSpec, rows: Iterable[Row]) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    start, end = spec.time_fields
    return {
        (*(row[k] for k in spec.keys), row[start]): (row[end], *(row[v] for v in spec.values))
        for row in rows
    }


def _same(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return len(a) == len(b) and all(
        math.isclose(x, y, rel_tol=_REL_TOL, abs_tol=_REL_TOL)
        if isinstance(x, float) or isinstance(y, float)
        else x == y
        for x, y in zip(a, b, strict=True)
    )


def view_distance(view: str, served: Iterable[Row], expected: Iterable[Row]) -> ViewDistance:
    """The distance of ``served`` rows of ``view`` from the ``expected`` rows."""
    spec = VIEWS[view]
    got, want = _keyed(spec, served), _keyed(spec, expected)
    both = got.keys() & want.keys()
    return ViewDistance(
        view=view,
        served=len(got),
        expected=len(want),
        missing=len(want.keys() - got.keys()),
        extra=len(got.keys() - want.keys()),
        differing=sum(1 for key in both if not _same(got[key], want[key])),
    )
