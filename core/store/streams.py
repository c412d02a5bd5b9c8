"""Names of the streams that write to the serving store.

Writers (speed layer, Kappa job) and the reader (serving) take these names from here.
"""

from __future__ import annotations

LAMBDA_SPEED = "lambda-speed"
"""The Lambda speed layer's real-time rows and progress."""

BATCH_PARTIALS_PREFIX = "lambda-batch-v"
"""Batch version N keeps, as the state of stream `lambda-batch-vN`, its partials of the views
of the current state: the speed layer merges them into its own at the hand-off to N."""


def batch_partials_stream(version: int) -> str:
    return f"{BATCH_PARTIALS_PREFIX}{version}"


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
