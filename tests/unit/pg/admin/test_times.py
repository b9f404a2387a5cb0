"""How ``runbroker jobs`` shows a row's time: never failing, the ends by name, NULL as none."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from daemon.pg.admin.times import FIRST, LAST, duration_ms, json_time, local_time

# and zones written by hand: none such, a directory of the zone database, a name too long for a path
ZONES = ["UTC", "Asia/Tokyo", "America/New_York", "Pacific/Kiritimati", "Etc/GMT+12", "No/Such"]
ZONES += ["Europe", "a" * 300]
# Every time the admin queries can return: the clamp's two ends, and any aware time between.
TIMES = st.one_of(
    st.sampled_from([FIRST, LAST, FIRST + timedelta(hours=3), LAST - timedelta(hours=3)]),
    st.datetimes(timezones=st.just(UTC)),
)


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith("Z") else text)


@given(TIMES, st.sampled_from(ZONES))
def test_a_time_is_shown_in_its_zone_or_in_utc_and_never_fails(value: datetime, tz: str) -> None:
    shown = local_time(value, tz)
    if value in (FIRST, LAST):
        assert shown == ("-infinity" if value == FIRST else "infinity")
        return
    assert _instant(shown.replace(" ", "T")) == value.replace(microsecond=0)


@given(TIMES)
def test_json_is_rfc3339_utc_to_the_millisecond_or_an_end_by_name(value: datetime) -> None:
    shown = json_time(value)
    assert shown is not None
    if value in (FIRST, LAST):
        assert shown == ("-infinity" if value == FIRST else "infinity")
        return
    assert shown.endswith("Z")
    assert _instant(shown) == value.replace(microsecond=value.microsecond // 1000 * 1000)


@given(TIMES, TIMES)
def test_a_duration_needs_two_known_times(started: datetime, finished: datetime) -> None:
    shown = duration_ms(started, finished)
    if {started, finished} & {FIRST, LAST}:
        assert shown is None
    else:
        assert shown == round((finished - started).total_seconds() * 1000)


@pytest.mark.parametrize("tz", ZONES)
def test_null_is_none(tz: str) -> None:
    assert (local_time(None, tz), json_time(None)) == ("-", None)
    assert duration_ms(None, LAST - timedelta(days=1)) is None
    assert duration_ms(FIRST + timedelta(days=1), None) is None


def test_a_time_near_an_end_its_zone_cannot_show_is_shown_in_utc() -> None:
    late = datetime(9999, 12, 31, 20, 0, tzinfo=UTC)
    early = datetime(1, 1, 1, 2, 0, tzinfo=UTC)
    assert local_time(late, "Asia/Tokyo") == "9999-12-31 20:00:00Z"
    assert local_time(early, "America/New_York") == "0001-01-01 02:00:00Z"
    assert local_time(early, "Asia/Tokyo") == "0001-01-01 11:18:59+09:18:59"  # its mean time
