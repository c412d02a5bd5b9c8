"""`make bench`: measured rates, printed (not tests; nothing here asserts a speed).

Today: workload generation and `lk produce` into the local stack (brought up if needed).
Later issues add the batch recompute, the speed layer's freshness and the Kappa replay.
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from core import workload
from core.kafka_io import produce_file
from core.settings import get_settings
from infra.stack import stack as local_stack


def main(events: int = 1_000_000) -> None:
    settings = get_settings()
    started = time.monotonic()
    timings = local_stack.up(settings, progress=lambda _: None)
    steps = ", ".join(f"{name} {seconds:.1f}s" for name, seconds in timings.items())
    print(f"stack up: {time.monotonic() - started:.1f}s ({steps})")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "events.jsonl"
        started = time.monotonic()
        stats = workload.generate(
            workload.WorkloadSpec(seed=1, events=events), out, workload.default_profiles_path(out)
        )
        seconds = time.monotonic() - started
        print(f"generate: {stats.lines:,} lines in {seconds:.1f}s = {stats.lines / seconds:,.0f}/s")
        report = produce_file(settings, out, settings.events_topic)
        print(
            f"produce:  {report.records:,} records in {report.seconds:.1f}s = {report.rate:,.0f}/s"
        )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"bench process peak RSS: {peak_mb:,.0f} MiB")


if __name__ == "__main__":
    main()
