"""The daemon's signal handlers only count and set events; report_signals logs what SIGUSR1
and the ignored signals asked for; the shutdown's budget arithmetic."""

from __future__ import annotations

import asyncio
import signal

import pytest
from structlog.testing import capture_logs

from daemon.broker.shutdown import grace_cap_s, reserve_s
from daemon.broker.signal_plan import (
    FAULT_SIGNALS,
    HANDLED_SIGNALS,
    IGNORED_SIGNALS,
    RELOAD_SIGNAL,
    STATUS_SIGNAL,
    STOP_SIGNALS,
)
from daemon.broker.signals import Signals, report_signals
from tests.support.eventually import eventually_async


def test_the_plan_covers_every_signal_whose_default_ends_a_process_once() -> None:
    ending = {
        "HUP", "INT", "QUIT", "ILL", "TRAP", "ABRT", "BUS", "FPE", "USR1", "SEGV", "USR2",
        "ALRM", "TERM", "STKFLT", "XCPU", "VTALRM", "PROF", "IO", "PWR", "SYS",
    }  # fmt: skip
    planned = [*STOP_SIGNALS, RELOAD_SIGNAL, STATUS_SIGNAL, *IGNORED_SIGNALS, *FAULT_SIGNALS]
    assert len(planned) == len(set(planned))
    assert {signal.Signals(signum).name.removeprefix("SIG") for signum in planned} == ending
    assert not set(FAULT_SIGNALS) & set(HANDLED_SIGNALS)


async def test_the_first_stop_signal_is_kept_and_a_second_forces() -> None:
    signals = Signals()
    signals.received(signal.SIGQUIT)
    assert signals.stop.is_set()
    assert not signals.force.is_set()
    signals.received(signal.SIGTERM)
    assert signals.force.is_set()
    assert signals.stop_signal == signal.SIGQUIT


async def test_usr1_and_the_ignored_signals_are_logged_by_the_reporter() -> None:
    signals = Signals()
    with capture_logs() as logs:
        reporter = asyncio.create_task(report_signals(signals, lambda: {"pid": 1}))
        signals.note(signal.SIGUSR2)
        signals.note(signal.SIGALRM)
        signals.status.set()
        await eventually_async(lambda: len(logs) >= 3, "the reporter to log all three")
        reporter.cancel()
        with pytest.raises(asyncio.CancelledError):
            await reporter
    assert [(line["event"], line["signal"]) for line in logs] == [
        ("broker.status", "SIGUSR1"),
        ("signal.ignored", "SIGUSR2"),
        ("signal.ignored", "SIGALRM"),
    ]
    assert logs[0]["status"] == {"pid": 1}


@pytest.mark.parametrize(
    ("budget_s", "reserve", "grace_cap"), [(8.0, 0.5, 7.0), (5.0, 0.5, 4.0), (1.0, 0.25, 0.25)]
)
def test_the_budget_keeps_its_end_for_a_stuck_run_and_the_exit(
    budget_s: float, reserve: float, grace_cap: float
) -> None:
    assert reserve_s(budget_s) == reserve
    assert grace_cap_s(budget_s) == grace_cap
