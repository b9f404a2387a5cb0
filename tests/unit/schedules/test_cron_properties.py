"""Wall-time schedules across offset changes as properties: fixed-time schedules keep the DST
rule (daemon/schedules/cron.py), wildcard crons run the first matching minute on the clock
(daemon/schedules/wallclock.py), near every offset change of the zones."""

from __future__ import annotations

from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.schedules import parse_schedule
from tests.unit.schedules.zones import (
    BERLIN,
    NEW_YORK,
    OFFSET_CHANGES,
    ZONES,
    FixedSpec,
    WildSpec,
    fixed_specs,
    utc,
    wall_instant,
    wildcard_specs,
    zone_and_instant,
)


def test_offset_changes_were_found_for_dst_zones() -> None:
    assert utc(2026, 3, 29, 1) in OFFSET_CHANGES[BERLIN]
    assert utc(2026, 11, 1, 6) in OFFSET_CHANGES[NEW_YORK]
    assert len(OFFSET_CHANGES["Australia/Lord_Howe"]) == 14
    assert OFFSET_CHANGES["UTC"] == []


def expected_fixed(spec: FixedSpec, zone: ZoneInfo, t: datetime) -> datetime:
    first_day = t.astimezone(zone).date() - timedelta(days=1)
    candidates = [
        wall_instant(first_day + timedelta(days=n), hour, minute, zone)
        for n in range(10)
        if spec.weekdays is None or (first_day + timedelta(days=n)).weekday() in spec.weekdays
        for hour in spec.hours
        for minute in spec.minutes
    ]
    return min(c for c in candidates if c > t)


@settings(max_examples=300, deadline=None)
@given(data=st.data(), zone_and_t=zone_and_instant(ZONES))
def test_fixed_time_schedules_match_the_dst_rule(
    data: st.DataObject, zone_and_t: tuple[str, datetime]
) -> None:
    zone_name, t = zone_and_t
    zone = ZoneInfo(zone_name)
    spec = data.draw(fixed_specs(near=t.astimezone(zone)))
    found = parse_schedule(spec.spec, zone_name).next_after(t)
    assert found is not None
    assert found > t
    assert found.utcoffset() == timedelta(0)
    assert found == expected_fixed(spec, zone, t)
    local = found.astimezone(zone)
    just_after_gap = (found - timedelta(seconds=1)).astimezone(
        zone
    ).utcoffset() != local.utcoffset()
    if not just_after_gap:
        assert local.hour in spec.hours
        assert local.minute in spec.minutes
        assert spec.weekdays is None or local.weekday() in spec.weekdays


def matches(spec: WildSpec, wall: datetime) -> bool:
    return (
        wall.hour in spec.hours
        and wall.minute in spec.minutes
        and (spec.weekdays is None or wall.weekday() in spec.weekdays)
    )


@settings(max_examples=150, deadline=None)
@given(spec=wildcard_specs(), zone_and_t=zone_and_instant(ZONES))
def test_wildcard_cron_is_the_first_matching_minute_on_the_clock(
    spec: WildSpec, zone_and_t: tuple[str, datetime]
) -> None:
    zone_name, t = zone_and_t
    zone = ZoneInfo(zone_name)
    found = parse_schedule(spec.spec, zone_name).next_after(t)
    assert found is not None
    assert found > t
    # Debian cron's wildcard jobs: a wall time the clock skipped does not run.
    assert matches(spec, found.astimezone(zone))
    # and no earlier minute on the clock matched
    probe = t.replace(second=0, microsecond=0) + timedelta(minutes=1)
    while probe < found:
        assert not matches(spec, probe.astimezone(zone)), probe
        probe += timedelta(minutes=1)
