"""What each logic version changes, as a filter on valid events before the views.

The views themselves stay the one shared logic; a logic version only decides which events they
see, so every path (batch, speed, Kappa) applies a version the same way.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from core.catalog import UNTRUSTED_CLOCK_MS, check_logic_version

LogicFilter = Callable[[DataFrame], DataFrame]


def _trusted_clocks(events: DataFrame) -> DataFrame:
    return events.where(F.abs(F.col("received_ts") - F.col("sent_ts")) < UNTRUSTED_CLOCK_MS)


def _untrusted_clocks(events: DataFrame) -> DataFrame:
    # The bug of logic version `bug`: version 2's comparison reversed.
    return events.where(F.abs(F.col("received_ts") - F.col("sent_ts")) >= UNTRUSTED_CLOCK_MS)


_FILTERS: dict[str, LogicFilter | None] = {
    "1": None,
    "2": _trusted_clocks,
    "bug": _untrusted_clocks,
}


def logic_filter(logic_version: str) -> LogicFilter | None:
    """The filter of `logic_version` on valid events; None when it keeps them all."""
    return _FILTERS[check_logic_version(logic_version)]
