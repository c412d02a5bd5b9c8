"""Version tags of answers (`ETag`) and conditional requests (`If-None-Match` -> 304).

An answer is a function of its query and of the store state it is read from
(`core.store.reads.State`): the alias (version, cutoff, last switch) and the progress rows of
the streams its meta names, which every micro-batch commit moves (`updated_at`, in the same
transaction as the rows it writes). A hand-off replaces real-time rows without a micro-batch,
but in the transaction that moves the alias. So the tag, a digest of the query and that
state, changes exactly when the answer can change, and a matching `If-None-Match` can be
answered 304 after reading the state alone, never the rows. For the same reason an answer
encoded once can be sent again, unread, to any request whose tag is the same (`Answers`).
"""

from __future__ import annotations

import hashlib

from cachetools import LRUCache

from core.store.reads import State
from serving.filters import ViewQuery

# Changed with the answers' spelling, so tags issued by an older API no longer match.
_REVISION = "1"

CACHE_CONTROL = "no-cache"
"""A view changes with every micro-batch: clients and caches may keep an answer, but must
revalidate it (a cheap 304) before each use."""


def etag(query: ViewQuery, state: State) -> str:
    """A strong tag: equal tags mean byte-identical answers."""
    # The reprs of frozen dataclasses of plain values: every field, in a fixed order.
    named = (_REVISION, query.digest, query.limit, query.cursor, state)
    return '"' + hashlib.blake2b(repr(named).encode(), digest_size=16).hexdigest() + '"'


def none_match(if_none_match: str | None, tag: str) -> bool:
    """Whether `If-None-Match` names `tag` (RFC 9110 13.1.2: weak comparison, or `*`)."""
    if not if_none_match:
        return False
    for candidate in if_none_match.split(","):
        candidate = candidate.strip()
        if candidate == "*" or candidate.removeprefix("W/") == tag:
            return True
    return False


class Answers:
    """Encoded answers by their tag, in one worker: a query asked again (a dashboard's poll,
    another client's same filter) while the state it was read from holds costs one statement
    and neither rows nor encoding. Equal strong tags mean byte-identical answers, so a body
    found under the current tag is what a read would give now; a body of a state that has
    moved on is never asked for again and ages out (least recently used, bounded in bytes)."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._bodies: LRUCache[str, bytes] = LRUCache(maxsize=max(max_bytes, 1), getsizeof=len)

    def get(self, tag: str) -> bytes | None:
        return self._bodies.get(tag)

    def put(self, tag: str, body: bytes) -> None:
        if len(body) <= self.max_bytes:
            self._bodies[tag] = body
