"""Profile changes into the log the way this deployment writes them: through the application's
user table and change data capture (`cdc_enabled`), else produced straight into the topic
(where no Kafka Connect runs: the chart, until it runs one)."""

from __future__ import annotations

from pathlib import Path

from core.cdc.arrival import profiles_end, wait_captured
from core.cdc.table import apply_all, read_changes
from core.kafka_io import produce_file
from core.settings import Settings


def publish_profiles(settings: Settings, path: Path, rate: float | None = None) -> str:
    """The changes of `path` (profile lines), in the topic when it returns; how they went."""
    if not settings.cdc_enabled:
        produce_file(settings, path, settings.profiles_topic)
        return f"produced into '{settings.profiles_topic}'"
    changes, where = read_changes(path)
    since = profiles_end(settings)
    apply_all(settings, changes, where, rate)
    waited = wait_captured(settings, since, changes)
    return (
        f"{len(changes):,} changes applied to {settings.app_db}.profiles, captured into "
        f"'{settings.profiles_topic}' {waited:.1f}s after the last commit"
    )
