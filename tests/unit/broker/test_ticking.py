"""The ticker's plans from the settings and the tasks (daemon/broker/ticking.py): the default
task's interval, off, once, bad, tiny and huge values with their warnings, tasks with a
cadence of their own."""

from __future__ import annotations

import pytest

from daemon.broker.ticking import tick_plans
from daemon.schedules import parse_schedule
from tests.unit.broker.conftest import DEFAULT, MakeSettings
from tests.unit.core.executing import registry_of, sh_task


def test_default_ticks_hourly_by_default(make_settings: MakeSettings) -> None:
    plans, warnings = tick_plans(make_settings(), registry_of(DEFAULT))
    assert warnings == []
    assert [(p.task, p.interval_s, p.fire_on_start, p.once) for p in plans] == [
        ("default", 3600.0, True, False)
    ]


def test_interval_and_fire_on_start_settings(make_settings: MakeSettings) -> None:
    settings = make_settings(INTERVAL="90s", FIRE_ON_START="false")
    plans, _warnings = tick_plans(settings, registry_of(DEFAULT))
    assert [(p.task, p.interval_s, p.fire_on_start) for p in plans] == [("default", 90.0, False)]


@pytest.mark.parametrize("value", ["off", "disabled", "OFF"])
def test_off_leaves_default_to_triggers(make_settings: MakeSettings, value: str) -> None:
    assert tick_plans(make_settings(INTERVAL=value), registry_of(DEFAULT)) == ([], [])


def test_zero_runs_default_once(make_settings: MakeSettings) -> None:
    plans, _warnings = tick_plans(make_settings(INTERVAL="0s"), registry_of(DEFAULT))
    assert [(p.task, p.once) for p in plans] == [("default", True)]


@pytest.mark.parametrize("value", ["-5m", "soon"])
def test_a_bad_interval_falls_back_with_a_warning(make_settings: MakeSettings, value: str) -> None:
    settings = make_settings(INTERVAL=value, DEFAULT_INTERVAL="10m")
    plans, warnings = tick_plans(settings, registry_of(DEFAULT))
    assert [(p.task, p.interval_s) for p in plans] == [("default", 600.0)]
    assert len(warnings) == 1


def test_a_tiny_interval_is_clamped_with_a_warning(make_settings: MakeSettings) -> None:
    plans, warnings = tick_plans(make_settings(INTERVAL="1ms"), registry_of(DEFAULT))
    assert plans[0].interval_s == 0.05
    assert warnings


def test_a_huge_interval_is_clamped_to_the_maximum_with_a_warning(
    make_settings: MakeSettings,
) -> None:
    plans, warnings = tick_plans(make_settings(INTERVAL="200000h"), registry_of(DEFAULT))
    assert [(p.task, p.interval_s) for p in plans] == [("default", 720 * 3600.0)]
    assert warnings == ["RUNBROKER_INTERVAL: interval is above the maximum 720h; using the maximum"]


@pytest.mark.parametrize(
    "value", ["200000h", "7zq3secret", "-987654321ms", "1ns", "123456789012345678901h"]
)
def test_interval_warnings_never_repeat_the_raw_value(
    make_settings: MakeSettings, value: str
) -> None:
    _plans, warnings = tick_plans(make_settings(INTERVAL=value), registry_of(DEFAULT))
    assert warnings
    for warning in warnings:
        assert warning.startswith("RUNBROKER_INTERVAL: ")
        assert value not in warning
        assert value.strip("-").rstrip("hmsn") not in warning


def test_a_task_interval_is_held_to_the_same_bounds(make_settings: MakeSettings) -> None:
    tiny = sh_task("tiny", "true", interval_s=0.000001)
    huge = sh_task("huge", "true", interval_s=10**6 * 3600.0)
    plans, warnings = tick_plans(make_settings(INTERVAL="off"), registry_of(tiny, huge))
    assert {p.task: p.interval_s for p in plans} == {"tiny": 0.05, "huge": 720 * 3600.0}
    assert sorted(warnings) == [
        "tasks.huge: interval is above the maximum 720h; using the maximum",
        "tasks.tiny: interval is below the minimum 50ms; using the minimum",
    ]


def test_tasks_with_their_own_cadence_tick_regardless(make_settings: MakeSettings) -> None:
    own_default = sh_task("default", "true", interval_s=300.0)
    hourly = sh_task("hourly", "true", interval_s=3600.0)
    nightly = sh_task("nightly", "true", schedule=parse_schedule("daily 02:00", "Europe/Berlin"))
    manual = sh_task("manual", "true")
    settings = make_settings(INTERVAL="off", FIRE_ON_START="false")
    plans, warnings = tick_plans(settings, registry_of(own_default, hourly, nightly, manual))
    assert warnings == []
    by_task = {plan.task: plan for plan in plans}
    assert set(by_task) == {"default", "hourly", "nightly"}
    assert by_task["default"].interval_s == 300.0  # its own, not the global one
    assert by_task["hourly"].interval_s == 3600.0
    assert by_task["hourly"].fire_on_start is False
    assert by_task["nightly"].schedule is nightly.schedule
    assert by_task["nightly"].interval_s is None


def test_no_default_task_no_default_plan(make_settings: MakeSettings) -> None:
    assert tick_plans(make_settings(INTERVAL="1m"), registry_of(sh_task("other", "true"))) == (
        [],
        [],
    )
