"""Bench step 1: generate the workload (`lk generate`) and write it to the log (`lk produce`)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from core import workload
from core.kafka_io import produce_file
from core.settings import Settings


def generate_and_produce(settings: Settings, events: int, folder: Path, seed: int = 1) -> dict:
    """Generate `events` lines (and their profiles) into `folder`, produce both topics."""
    out = folder / "events.jsonl"
    profiles = workload.default_profiles_path(out)
    started = time.monotonic()
    spec = workload.WorkloadSpec(
        seed=seed, events=events, watermark_delay_ms=settings.watermark_delay_ms
    )
    stats = workload.generate(spec, out, profiles)
    generate_s = time.monotonic() - started
    print(
        f"  generate: {stats.lines:,} lines in {generate_s:.1f}s = "
        f"{stats.lines / generate_s:,.0f} lines/s "
        f"({stats.valid_events:,} valid, {stats.duplicates:,} duplicates, "
        f"{stats.invalid_total:,} invalid, {stats.late_events:,} late; "
        f"{stats.profile_lines:,} profile records)",
        flush=True,
    )
    produced: dict[str, Any] = {}
    for topic, path in ((settings.events_topic, out), (settings.profiles_topic, profiles)):
        report = produce_file(settings, path, topic)
        name = "events" if topic == settings.events_topic else "profiles"
        produced[name] = {
            "records": report.records,
            "seconds": round(report.seconds, 2),
            "records_per_s": round(report.rate),
        }
        print(
            f"  produce {name}: {report.records:,} records in {report.seconds:.1f}s = "
            f"{report.rate:,.0f} records/s",
            flush=True,
        )
    return {
        "lines": stats.lines,
        "valid_events": stats.valid_events,
        "duplicates": stats.duplicates,
        "invalid": stats.invalid_total,
        "late_events": stats.late_events,
        "users": stats.users,
        "profile_lines": stats.profile_lines,
        "first_event_ts": stats.first_event_ts,
        "last_event_ts": stats.last_event_ts,
        "generate_seconds": round(generate_s, 2),
        "generate_lines_per_s": round(stats.lines / generate_s),
        "produce": produced,
        "file_bytes": out.stat().st_size,
    }
