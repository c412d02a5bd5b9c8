import json
from typing import Any

import pytest

from core.events import (
    EVENT_TYPES,
    REASON_CODES,
    Event,
    ProfileChange,
    Rejected,
    parse_event,
    parse_profile_line,
    profile_from_record,
    reason_code,
)

TIMES = {"device_ts": 1_000, "sent_ts": 2_000, "received_ts": 5_000}


def page_view(**changes: Any) -> dict[str, Any]:
    return (
        {"event_id": "e1", "type": "page_view", "user_id": "u1", "page": "/home"} | TIMES | changes
    )


def search(**changes: Any) -> dict[str, Any]:
    return {"event_id": "s1", "type": "search", "user_id": "u1", "query": "shoes"} | TIMES | changes


def click(**changes: Any) -> dict[str, Any]:
    base = {"event_id": "c1", "type": "click", "user_id": "u1", "page": "/p", "search_id": "s1"}
    return base | TIMES | changes


def order(**changes: Any) -> dict[str, Any]:
    return (
        {"event_id": "o1", "type": "order", "user_id": "u1", "amount_cents": 1999} | TIMES | changes
    )


def without(record: dict[str, Any], name: str) -> dict[str, Any]:
    return {k: v for k, v in record.items() if k != name}


def encoded(record: Any) -> bytes:
    return json.dumps(record).encode("utf-8")


def reason_of(value: bytes | str | None) -> str:
    result = parse_event(value)
    assert isinstance(result, Rejected), f"expected a rejection, got {result!r}"
    return result.reason


# --- valid events -----------------------------------------------------------------------------


def test_valid_page_view_parses_with_only_its_fields() -> None:
    assert parse_event(encoded(page_view())) == Event(
        event_id="e1",
        type="page_view",
        user_id="u1",
        device_ts=1_000,
        sent_ts=2_000,
        received_ts=5_000,
        page="/home",
    )


def test_valid_search_click_and_order_parse() -> None:
    assert parse_event(encoded(search())) == Event(
        "s1", "search", "u1", 1_000, 2_000, 5_000, query="shoes"
    )
    assert parse_event(encoded(click())) == Event(
        "c1", "click", "u1", 1_000, 2_000, 5_000, page="/p", search_id="s1"
    )
    assert parse_event(encoded(order())) == Event(
        "o1", "order", "u1", 1_000, 2_000, 5_000, amount_cents=1999
    )


def test_every_contract_type_is_known() -> None:
    assert EVENT_TYPES == ("page_view", "search", "click", "order")


def test_a_str_value_parses_like_its_bytes() -> None:
    assert parse_event(json.dumps(page_view())) == parse_event(encoded(page_view()))


def test_unicode_values_are_kept() -> None:
    result = parse_event(encoded(search(query="chaussures été")))
    assert isinstance(result, Event)
    assert result.query == "chaussures été"


def test_zero_amount_and_device_equal_to_sent_are_valid() -> None:
    assert isinstance(parse_event(encoded(order(amount_cents=0))), Event)
    assert isinstance(parse_event(encoded(page_view(device_ts=2_000, sent_ts=2_000))), Event)


def test_extra_fields_and_fields_of_other_types_are_ignored() -> None:
    result = parse_event(encoded(page_view(amount_cents="junk", query=7, colour="blue")))
    assert isinstance(result, Event)
    assert result.amount_cents is None
    assert result.query is None


# --- event time -------------------------------------------------------------------------------


def test_event_ts_adds_the_transit_time_to_the_device_time() -> None:
    # device 1_000, sent 2_000 (device clock), received 5_000 (server clock): 1_000 + 3_000
    result = parse_event(encoded(page_view()))
    assert isinstance(result, Event)
    assert result.event_ts == 4_000


def test_event_ts_corrects_a_device_clock_that_runs_ahead() -> None:
    # The device is 10 s ahead of the server: it says 60_000 at send, the server says 50_200.
    result = parse_event(encoded(page_view(device_ts=59_500, sent_ts=60_000, received_ts=50_200)))
    assert isinstance(result, Event)
    assert result.event_ts == 49_700


# --- invalid records --------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        b"{not json",
        b"",
        b"   ",
        b'{"event_id": "e1",',
        None,
        "{'single': 'quotes'}",
        b'{"device_ts": NaN}',
        b'{"device_ts": Infinity}',
    ],
)
def test_not_json(value: bytes | str | None) -> None:
    assert reason_of(value) == "not_json"


def test_invalid_utf8_is_not_json() -> None:
    value = encoded(page_view(page="PLACEHOLDER")).replace(b"PLACEHOLDER", b"\xff\xfe")
    assert reason_of(value) == "not_json"


def test_utf16_encoded_json_is_not_json() -> None:
    assert reason_of(json.dumps(page_view()).encode("utf-16")) == "not_json"


@pytest.mark.parametrize("value", [b"[1, 2]", b'"page_view"', b"42", b"null", b"true"])
def test_json_that_is_not_an_object(value: bytes) -> None:
    assert reason_of(value) == "not_an_object"


@pytest.mark.parametrize(
    "name", ["event_id", "type", "user_id", "device_ts", "sent_ts", "received_ts"]
)
def test_missing_always_required_field(name: str) -> None:
    assert reason_of(encoded(without(page_view(), name))) == f"missing_field:{name}"


@pytest.mark.parametrize(
    "name", ["event_id", "type", "user_id", "device_ts", "sent_ts", "received_ts"]
)
def test_null_field_counts_as_missing(name: str) -> None:
    assert reason_of(encoded(page_view(**{name: None}))) == f"missing_field:{name}"


@pytest.mark.parametrize("name", ["event_id", "type", "user_id"])
def test_empty_string_counts_as_missing(name: str) -> None:
    assert reason_of(encoded(page_view(**{name: ""}))) == f"missing_field:{name}"


@pytest.mark.parametrize(
    ("name", "value"),
    [
        ("device_ts", True),
        ("device_ts", False),
        ("device_ts", 1000.0),
        ("device_ts", 1000.5),
        ("device_ts", "1000"),
        ("sent_ts", [2000]),
        ("received_ts", {"ms": 5000}),
        ("received_ts", 2**63),
        ("event_id", 1),
        ("type", 1),
        ("user_id", ["u1"]),
        ("user_id", True),
    ],
)
def test_mistyped_always_required_field(name: str, value: object) -> None:
    assert reason_of(encoded(page_view(**{name: value}))) == f"wrong_type:{name}"


def test_float_written_with_an_exponent_is_wrong_type() -> None:
    value = encoded(page_view(device_ts=0)).replace(b'"device_ts": 0', b'"device_ts": 1e3')
    assert reason_of(value) == "wrong_type:device_ts"


def test_largest_64_bit_integer_is_still_an_integer() -> None:
    big = 2**63 - 1
    assert isinstance(parse_event(encoded(page_view(received_ts=big, sent_ts=big))), Event)


@pytest.mark.parametrize("event_type", ["purchase", "PAGE_VIEW", "page-view", " search"])
def test_unknown_type(event_type: str) -> None:
    assert reason_of(encoded(page_view(type=event_type))) == "unknown_type"


@pytest.mark.parametrize(
    ("record", "name"),
    [
        (without(page_view(), "page"), "page"),
        (without(search(), "query"), "query"),
        (without(click(), "page"), "page"),
        (without(click(), "search_id"), "search_id"),
        (without(order(), "amount_cents"), "amount_cents"),
        (order(amount_cents=None), "amount_cents"),
        (search(query=None), "query"),
        (search(query=""), "query"),
        (click(search_id=""), "search_id"),
    ],
)
def test_missing_type_specific_field(record: dict[str, Any], name: str) -> None:
    assert reason_of(encoded(record)) == f"missing_field:{name}"


@pytest.mark.parametrize(
    ("record", "name"),
    [
        (page_view(page=3), "page"),
        (search(query=["shoes"]), "query"),
        (click(search_id=17), "search_id"),
        (order(amount_cents=19.99), "amount_cents"),
        (order(amount_cents=1999.0), "amount_cents"),
        (order(amount_cents="1999"), "amount_cents"),
        (order(amount_cents=True), "amount_cents"),
    ],
)
def test_mistyped_type_specific_field(record: dict[str, Any], name: str) -> None:
    assert reason_of(encoded(record)) == f"wrong_type:{name}"


def test_negative_amount() -> None:
    assert reason_of(encoded(order(amount_cents=-1))) == "negative_amount"


def test_device_after_sent() -> None:
    assert reason_of(encoded(page_view(device_ts=2_001, sent_ts=2_000))) == "device_after_sent"


# --- order of the checks ----------------------------------------------------------------------


def test_always_required_fields_are_checked_in_contract_order() -> None:
    record = without(without(page_view(), "user_id"), "event_id")
    assert reason_of(encoded(record)) == "missing_field:event_id"
    assert reason_of(encoded(page_view(user_id=None, sent_ts="x"))) == "missing_field:user_id"


def test_always_required_fields_come_before_the_type_check() -> None:
    assert reason_of(encoded(page_view(type="nope", received_ts=1.5))) == "wrong_type:received_ts"


def test_type_check_comes_before_type_specific_fields() -> None:
    assert reason_of(encoded(without(page_view(type="nope"), "page"))) == "unknown_type"


def test_type_specific_fields_come_before_amount_and_clock_checks() -> None:
    record = without(click(device_ts=9_999), "search_id")
    assert reason_of(encoded(record)) == "missing_field:search_id"


def test_negative_amount_comes_before_device_after_sent() -> None:
    record = order(amount_cents=-5, device_ts=9_999)
    assert reason_of(encoded(record)) == "negative_amount"


def test_every_reason_starts_with_a_known_code() -> None:
    reasons = {
        reason_of(b"x"),
        reason_of(b"[]"),
        reason_of(encoded(without(page_view(), "page"))),
        reason_of(encoded(page_view(sent_ts=1.0))),
        reason_of(encoded(page_view(type="x"))),
        reason_of(encoded(order(amount_cents=-1))),
        reason_of(encoded(page_view(device_ts=3_000))),
    }
    assert {reason_code(r) for r in reasons} == set(REASON_CODES)
    assert reason_code("missing_field:page") == "missing_field"
    assert reason_code("not_json") == "not_json"


# --- profiles ---------------------------------------------------------------------------------


def test_profile_line_with_a_segment() -> None:
    line = {"user_id": "u1", "segment": "gold", "updated_ts": 100, "note": "ignored"}
    assert parse_profile_line(line) == ProfileChange("u1", "gold", 100)


def test_profile_tombstone_line_has_no_segment() -> None:
    change = parse_profile_line({"user_id": "u1", "tombstone": True, "updated_ts": 200})
    assert change == ProfileChange("u1", None, 200)
    assert change.is_tombstone


def test_profile_line_with_tombstone_false_is_a_version() -> None:
    line = {"user_id": "u1", "tombstone": False, "segment": "gold", "updated_ts": 1}
    assert parse_profile_line(line) == ProfileChange("u1", "gold", 1)


@pytest.mark.parametrize(
    "line",
    [
        {"segment": "gold", "updated_ts": 100},
        {"user_id": "", "segment": "gold", "updated_ts": 100},
        {"user_id": "u1", "updated_ts": 100},
        {"user_id": "u1", "segment": None, "updated_ts": 100},
        {"user_id": "u1", "segment": "gold"},
        {"user_id": "u1", "segment": "gold", "updated_ts": True},
        {"user_id": "u1", "segment": "gold", "updated_ts": 100.0},
        {"user_id": "u1", "tombstone": "yes", "updated_ts": 100},
        {"user_id": "u1", "tombstone": True, "segment": "gold", "updated_ts": 100},
        ["u1", "gold", 100],
    ],
)
def test_invalid_profile_line_raises(line: Any) -> None:
    with pytest.raises(ValueError):
        parse_profile_line(line)


def test_profile_record_read_back_from_kafka() -> None:
    value = b'{"user_id": "u1", "segment": "gold", "updated_ts": 100}'
    assert profile_from_record(b"u1", value, 100) == ProfileChange("u1", "gold", 100)
    assert profile_from_record("u1", value, 100) == ProfileChange("u1", "gold", 100)


def test_profile_record_with_null_value_is_a_tombstone_at_the_record_timestamp() -> None:
    assert profile_from_record(b"u7", None, 777) == ProfileChange("u7", None, 777)


def test_profile_record_takes_the_user_from_the_key_and_time_from_the_value() -> None:
    value = b'{"user_id": "other", "segment": "silver", "updated_ts": 300}'
    assert profile_from_record(b"u2", value, 999) == ProfileChange("u2", "silver", 300)


@pytest.mark.parametrize("value", [b"not json", b"[]", b'{"segment": "gold"}', b"\xff"])
def test_undecodable_profile_record_raises(value: bytes) -> None:
    with pytest.raises(ValueError):
        profile_from_record(b"u1", value, 1)
