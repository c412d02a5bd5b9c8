"""The event and profile model of CONTRACT sections 1-2, and the validation of raw records.

``parse_event`` turns one Kafka record value into an ``Event`` or a ``Rejected`` with a stable
reason code. The checks run in this order and the first failure is the reason:

1. the value is UTF-8 JSON (a null value, invalid UTF-8, or anything ``json`` refuses, incl.
   ``NaN``/``Infinity``, is ``not_json``);
2. the document is a JSON object (``not_an_object``);
3. the always-required fields, in the order of ``ALWAYS_REQUIRED``, are each present and typed
   (``missing_field:<name>``, ``wrong_type:<name>``);
4. ``type`` is one of ``EVENT_TYPES`` (``unknown_type``);
5. the fields required by that type, in the order of ``TYPE_REQUIRED[type]``, are present and
   typed (``missing_field:<name>``, ``wrong_type:<name>``);
6. ``amount_cents >= 0`` for an order (``negative_amount``);
7. ``device_ts <= sent_ts`` (``device_after_sent``).

Field rules: a JSON ``null`` or an empty string counts as missing. A string field must be a
non-empty JSON string. An integer field must be a JSON integer within the signed 64-bit range
(what Spark reads as a long): a bool, a float such as ``1.0``, a numeric string or an integer
out of range is ``wrong_type``. Fields not required by the event's type are ignored, whatever
their value; so are unknown fields. With a duplicated key the last value wins (``json``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

EVENT_TYPES: Final = ("page_view", "search", "click", "order")

# Reason codes. A reason is a code, or ``<code>:<field>`` for the two per-field codes.
NOT_JSON: Final = "not_json"
NOT_AN_OBJECT: Final = "not_an_object"
MISSING_FIELD: Final = "missing_field"
WRONG_TYPE: Final = "wrong_type"
UNKNOWN_TYPE: Final = "unknown_type"
NEGATIVE_AMOUNT: Final = "negative_amount"
DEVICE_AFTER_SENT: Final = "device_after_sent"
REASON_CODES: Final = (
    NOT_JSON,
    NOT_AN_OBJECT,
    MISSING_FIELD,
    WRONG_TYPE,
    UNKNOWN_TYPE,
    NEGATIVE_AMOUNT,
    DEVICE_AFTER_SENT,
)


def missing_field(name: str) -> str:
    """Reason for a required field that is absent, null or an empty string."""
    return f"{MISSING_FIELD}:{name}"


def wrong_type(name: str) -> str:
    """Reason for a required field of the wrong JSON type."""
    return f"{WRONG_TYPE}:{name}"


def reason_code(reason: str) -> str:
    """The code of a reason without its field: ``missing_field:page`` -> ``missing_field``."""
    return reason.partition(":")[0]


# Field kinds and the order in which they are checked.
STRING_FIELDS: Final = frozenset({"event_id", "type", "user_id", "page", "query", "search_id"})
INT_FIELDS: Final = frozenset({"device_ts", "sent_ts", "received_ts", "amount_cents"})
ALWAYS_REQUIRED: Final = ("event_id", "type", "user_id", "device_ts", "sent_ts", "received_ts")
TYPE_REQUIRED: Final[dict[str, tuple[str, ...]]] = {
    "page_view": ("page",),
    "search": ("query",),
    "click": ("page", "search_id"),
    "order": ("amount_cents",),
}
INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Event:
    """A valid event. Fields not required by its ``type`` are ``None``."""

    event_id: str
    type: str
    user_id: str
    device_ts: int
    sent_ts: int
    received_ts: int
    page: str | None = None
    query: str | None = None
    search_id: str | None = None
    amount_cents: int | None = None

    @property
    def event_ts(self) -> int:
        """When it happened, on the server clock: the device clock corrected at send time."""
        return self.device_ts + (self.received_ts - self.sent_ts)


@dataclass(frozen=True, slots=True)
class Rejected:
    """An invalid record and why (one of ``REASON_CODES``, maybe with ``:<field>``)."""

    reason: str


def _reject_constant(token: str) -> Any:
    raise ValueError(f"not JSON: {token}")


_JSON = json.JSONDecoder(parse_constant=_reject_constant)
"""Strict JSON: ``NaN``, ``Infinity`` and ``-Infinity`` are refused."""


def _field_problem(obj: dict[str, Any], name: str) -> str | None:
    """The reason ``obj[name]`` is not a valid required field, or ``None`` when it is."""
    value = obj.get(name)
    if value is None or value == "":
        return missing_field(name)
    if name in STRING_FIELDS:
        return None if isinstance(value, str) else wrong_type(name)
    is_int = isinstance(value, int) and not isinstance(value, bool)
    return None if is_int and INT64_MIN <= value <= INT64_MAX else wrong_type(name)


def parse_event(value: bytes | str | None) -> Event | Rejected:
    """Validate one raw record value (see the module docstring for the order of checks)."""
    if value is None:
        return Rejected(NOT_JSON)
    try:
        text = value.decode("utf-8") if isinstance(value, bytes) else value
        obj = _JSON.decode(text)
    except (ValueError, RecursionError):  # incl. UnicodeDecodeError and JSONDecodeError
        return Rejected(NOT_JSON)
    if not isinstance(obj, dict):
        return Rejected(NOT_AN_OBJECT)
    for name in ALWAYS_REQUIRED:
        if problem := _field_problem(obj, name):
            return Rejected(problem)
    event_type = obj["type"]
    if event_type not in EVENT_TYPES:
        return Rejected(UNKNOWN_TYPE)
    for name in TYPE_REQUIRED[event_type]:
        if problem := _field_problem(obj, name):
            return Rejected(problem)
    if event_type == "order" and obj["amount_cents"] < 0:
        return Rejected(NEGATIVE_AMOUNT)
    if obj["device_ts"] > obj["sent_ts"]:
        return Rejected(DEVICE_AFTER_SENT)
    return Event(
        event_id=obj["event_id"],
        type=event_type,
        user_id=obj["user_id"],
        device_ts=obj["device_ts"],
        sent_ts=obj["sent_ts"],
        received_ts=obj["received_ts"],
        # Only the fields of its type; the others are ignored, whatever they hold.
        **{name: obj[name] for name in TYPE_REQUIRED[event_type]},
    )


# --- Profiles -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProfileChange:
    """One version of a user's profile; ``segment is None`` is a tombstone (user deleted)."""

    user_id: str
    segment: str | None
    updated_ts: int

    @property
    def is_tombstone(self) -> bool:
        return self.segment is None


def _profile_user_id(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"profile user_id must be a non-empty string, got {value!r}")
    return value


def _profile_updated_ts(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"profile updated_ts must be an integer (ms), got {value!r}")
    return value


def _profile_segment(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ValueError(f"profile segment must be a non-empty string, got {value!r}")
    return value


def parse_profile_line(obj: dict[str, Any]) -> ProfileChange:
    """A profile line of ``lk produce --topic profiles``, already JSON-decoded.

    ``{"user_id", "segment", "updated_ts"}`` is a version; ``{"user_id", "tombstone": true,
    "updated_ts"}`` is a tombstone (a tombstone line must not carry a segment). Extra fields
    are ignored. Anything else raises ``ValueError``.
    """
    if not isinstance(obj, dict):
        raise ValueError(f"a profile line must be a JSON object, got {type(obj).__name__}")
    user_id = _profile_user_id(obj.get("user_id"))
    updated_ts = _profile_updated_ts(obj.get("updated_ts"))
    tombstone = obj.get("tombstone", False)
    if not isinstance(tombstone, bool):
        raise ValueError(f"profile tombstone must be true or false, got {tombstone!r}")
    if tombstone:
        if obj.get("segment") is not None:
            raise ValueError("a profile tombstone line must not carry a segment")
        return ProfileChange(user_id, None, updated_ts)
    return ProfileChange(user_id, _profile_segment(obj.get("segment")), updated_ts)


def profile_from_record(key: bytes | str, value: bytes | None, timestamp_ms: int) -> ProfileChange:
    """A profile record read back from Kafka.

    The key is the user (it is what compaction keeps). A null value is a tombstone taking
    effect at the record timestamp; otherwise the value's ``segment`` and ``updated_ts`` are
    used (the contract makes the record timestamp equal to ``updated_ts``). An undecodable
    record raises ``ValueError``.
    """
    user_id = _profile_user_id(key.decode("utf-8") if isinstance(key, bytes) else key)
    if value is None:
        return ProfileChange(user_id, None, _profile_updated_ts(timestamp_ms))
    obj = _JSON.decode(value.decode("utf-8"))
    if not isinstance(obj, dict):
        raise ValueError(f"a profile value must be a JSON object, got {type(obj).__name__}")
    return ProfileChange(
        user_id,
        _profile_segment(obj.get("segment")),
        _profile_updated_ts(obj.get("updated_ts")),
    )
