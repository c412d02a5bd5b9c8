"""Small helpers for integration tests: fresh topics, the env a subprocess `lk` needs.

A namespace of a test's own (topics, buckets, database) comes from `tests.isolation`, which the
benchmarks share; it is re-exported here for the tests that import it from this module.
"""

from __future__ import annotations

import uuid

from core.settings import Settings
from tests.isolation import fresh_topic_named, isolated_settings, settings_env

__all__ = ["fresh_topic", "fresh_topic_named", "isolated_settings", "settings_env"]


def fresh_topic(
    settings: Settings, prefix: str, partitions: int = 6, config: dict[str, str] | None = None
) -> str:
    """Create a topic no other test uses, so assertions see only this test's records."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    fresh_topic_named(settings, name, partitions, config)
    return name
