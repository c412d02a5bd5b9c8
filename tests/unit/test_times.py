from datetime import UTC, datetime

import pytest

from core.times import HOUR_MS, MINUTE_MS, iso, parse_iso, window_start

# 2026-11-01T10:00:00Z, computed independently: 20758 days since the epoch, plus 10 hours.
TEN_OCLOCK = 20_758 * 86_400_000 + 10 * 3_600_000


def test_constants_are_a_minute_and_an_hour_in_ms() -> None:
    assert MINUTE_MS == 60_000
    assert HOUR_MS == 3_600_000


def test_reference_instant_matches_the_standard_library() -> None:
    expected = datetime(2026, 11, 1, 10, tzinfo=UTC).timestamp() * 1000
    assert expected == TEN_OCLOCK


def test_iso_of_a_whole_second_has_no_fraction() -> None:
    assert iso(TEN_OCLOCK) == "2026-11-01T10:00:00Z"


def test_iso_of_a_fraction_has_exactly_three_digits() -> None:
    assert iso(TEN_OCLOCK + 123) == "2026-11-01T10:00:00.123Z"
    assert iso(TEN_OCLOCK + 5) == "2026-11-01T10:00:00.005Z"
    assert iso(TEN_OCLOCK + 90) == "2026-11-01T10:00:00.090Z"


def test_iso_of_the_epoch_and_before() -> None:
    assert iso(0) == "1970-01-01T00:00:00Z"
    assert iso(-1) == "1969-12-31T23:59:59.999Z"


def test_iso_of_the_last_millisecond_of_a_year() -> None:
    new_year_2027 = TEN_OCLOCK + (30 + 31) * 86_400_000 - 10 * 3_600_000
    assert iso(new_year_2027) == "2027-01-01T00:00:00Z"
    assert iso(new_year_2027 - 1) == "2026-12-31T23:59:59.999Z"


def test_parse_iso_accepts_z_and_utc_offset_with_or_without_fraction() -> None:
    assert parse_iso("2026-11-01T10:00:00Z") == TEN_OCLOCK
    assert parse_iso("2026-11-01T10:00:00+00:00") == TEN_OCLOCK
    assert parse_iso("2026-11-01T10:00:00.123Z") == TEN_OCLOCK + 123
    assert parse_iso("2026-11-01T10:00:00.5+00:00") == TEN_OCLOCK + 500
    assert parse_iso("2026-11-01T10:00:00.12Z") == TEN_OCLOCK + 120
    assert parse_iso("2026-11-01T10:00:00.123000Z") == TEN_OCLOCK + 123


def test_parse_iso_inverts_iso() -> None:
    for ms in (0, -1, TEN_OCLOCK, TEN_OCLOCK + 1, TEN_OCLOCK + 999, TEN_OCLOCK + 59_999):
        assert parse_iso(iso(ms)) == ms


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-01T10:00:00",  # no offset: not known to be UTC
        "2026-11-01T10:00:00+01:00",
        "2026-11-01T10:00:00-00:00",
        "2026-11-01 10:00:00Z",
        "2026-11-01",
        "2026-11-01T10:00Z",
        "2026-13-01T10:00:00Z",
        "2026-11-31T10:00:00Z",
        "2026-11-01T10:00:00.1234Z",  # finer than a millisecond
        "2026-11-01T10:00:00.Z",
        "2026-11-01T10:00:00Zjunk",
        "",
    ],
)
def test_parse_iso_rejects_anything_but_a_utc_instant_in_ms(text: str) -> None:
    with pytest.raises(ValueError):
        parse_iso(text)


def test_window_start_floors_to_the_window_and_windows_are_half_open() -> None:
    assert window_start(TEN_OCLOCK + MINUTE_MS, MINUTE_MS) == TEN_OCLOCK + MINUTE_MS
    assert window_start(TEN_OCLOCK + MINUTE_MS - 1, MINUTE_MS) == TEN_OCLOCK
    assert window_start(TEN_OCLOCK + HOUR_MS - 1, HOUR_MS) == TEN_OCLOCK
    assert window_start(TEN_OCLOCK + HOUR_MS, HOUR_MS) == TEN_OCLOCK + HOUR_MS


def test_window_start_floors_before_the_epoch() -> None:
    assert window_start(-1, MINUTE_MS) == -60_000


def test_window_start_rejects_a_non_positive_size() -> None:
    with pytest.raises(ValueError):
        window_start(TEN_OCLOCK, 0)
