"""Names of the streams that write to the serving store.

Writers (speed layer, Kappa job) and the reader (serving) take these names from here.
"""

from __future__ import annotations

LAMBDA_SPEED = "lambda-speed"
"""The Lambda speed layer's real-time rows and progress."""

KAPPA_PREFIX = "kappa-v"
"""Kappa stream job version N writes stream `kappa-vN`."""


def kappa_stream(version: int) -> str:
    return f"{KAPPA_PREFIX}{version}"


ARCHIVER_PREFIX = "archiver-"
"""The archiver's query of topic `events` (or `profiles`) records its progress as stream
`archiver-events` (`archiver-profiles`): the offsets archived so far, under its checkpoint."""

ARCHIVE_LEASE = "archive-lease"
"""Held by whichever process runs the archiver's queries: one writer of the archive at a time."""


def archiver_stream(name: str) -> str:
    return f"{ARCHIVER_PREFIX}{name}"
