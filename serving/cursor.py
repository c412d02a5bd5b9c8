"""The page cursor of `GET /v1/views/{view}`: opaque to clients, checked when it comes back.

A cursor holds where the previous page ended (its last row's sort values), the alias it was
read from (version and the instant of its last switch) and a digest of the query it belongs
to. It is URL-safe base64 of a small JSON array: nothing secret, and nothing a client should
build; a cursor that does not decode, or belongs to another query, is refused with the reason.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from core.store.reads import Position, ViewFilters
from core.times import to_ms

_FORMAT = 1  # bumped if the layout changes: an older cursor is then refused, never misread


class BadCursorError(ValueError):
    """The cursor does not decode, or was issued for another query."""


@dataclass(frozen=True, slots=True)
class Cursor:
    generation: tuple[int | None, int | None]  # the alias it was read from: version, switch
    after: Position  # the last row it covered
    query: str  # digest of the view, architecture and filters


def query_digest(view: str, architecture: str, filters: ViewFilters) -> str:
    """Names one query (view, architecture, filters), so a cursor cannot wander to another."""
    spelled = json.dumps([view, architecture, filters.keys, filters.start_ms, filters.end_ms])
    return hashlib.blake2b(spelled.encode(), digest_size=8).hexdigest()


def encode(cursor: Cursor) -> str:
    version, switched_at = cursor.generation
    data = [_FORMAT, version, switched_at, cursor.query, list(cursor.after)]
    raw = json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode()
    return base64.urlsafe_b64encode(raw).rstrip(b"=").decode("ascii")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


# A position is a row's sort values as the store returned them: instants a `datetime` holds
# (epoch milliseconds), and text Postgres can hold (UTF-8, no NUL). Anything else was never
# issued, and would fail the read (a 500) rather than be refused.
_MIN_MS = to_ms(datetime.min.replace(tzinfo=UTC))
_MAX_MS = to_ms(datetime.max.replace(tzinfo=UTC))


def _is_sort_value(value: Any, sort_type: type) -> bool:
    if sort_type is int:
        return _is_int(value) and _MIN_MS <= value <= _MAX_MS
    if not isinstance(value, str) or "\x00" in value:
        return False
    try:
        value.encode()
    except UnicodeEncodeError:  # a lone surrogate (`"\ud800"` in the JSON)
        return False
    return True


def _is_position(value: Any, sort_types: tuple[type, ...]) -> bool:
    return (
        isinstance(value, list)
        and len(value) == len(sort_types)
        and all(_is_sort_value(v, t) for v, t in zip(value, sort_types, strict=True))
    )


def decode(text: str, sort_types: tuple[type, ...], query: str) -> Cursor:
    """The cursor `text` for a query whose rows sort by values of `sort_types` (str keys, int
    times), whose digest is `query`."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = json.loads(raw)
    except (binascii.Error, ValueError) as exc:  # UnicodeDecodeError and JSON errors too
        raise BadCursorError("cursor: not a cursor this API issued") from exc
    if not (isinstance(data, list) and len(data) == 5 and data[0] == _FORMAT):
        raise BadCursorError("cursor: not a cursor this API issued")
    _, version, switched_at, digest, after = data
    if isinstance(digest, str) and digest != query:
        raise BadCursorError(
            "cursor: it belongs to another query; pass the same view, architecture and filters "
            "as the request that returned it"
        )
    if not (
        all(v is None or _is_int(v) for v in (version, switched_at))
        and digest == query
        and _is_position(after, sort_types)
    ):
        raise BadCursorError("cursor: not a cursor this API issued")
    return Cursor(generation=(version, switched_at), after=tuple(after), query=digest)
