"""The cost sweep over history sizes that `make bench` commits: `docs/bench/sweep-<date>.json`.

Lambda's batch recompute and Kappa's replay from offset 0, timed over histories of about 1e4
to 5e6 events on one machine; the report draws the latest sweep beside the run's own
reprocessing ("cost as the history grows").
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Final

from comparison.errors import ComparisonError
from comparison.figures import Sweep, read_sweep

BENCH_DIR: Final = Path(__file__).resolve().parent.parent / "docs" / "bench"
SWEEP_FILES: Final = "sweep-*.json"


def latest_sweep(folder: Path = BENCH_DIR) -> Sweep | None:
    """The latest sweep in `folder` (file names carry the date, so the last in name order),
    or None when there is none yet."""
    files = sorted(folder.glob(SWEEP_FILES))
    if not files:
        return None
    path = files[-1]
    try:
        return read_sweep(json.loads(path.read_text()), path.name)
    except ValueError as exc:  # not JSON, or not a sweep (pydantic's error names the field)
        raise ComparisonError(f"{path} is not a sweep: {' '.join(str(exc).split())}") from exc
