"""The running daemon's signal handlers (``signal_plan`` says what each signal does).

Handlers only count and set events, because they run between any two bytecodes of the
daemon's thread. ``report_signals`` and the app act on them.
"""

from __future__ import annotations

import asyncio
import collections
import signal
from collections.abc import Callable, Mapping
from typing import Any

from daemon.broker.signal_plan import IGNORED_SIGNALS, RELOAD_SIGNAL, STATUS_SIGNAL, STOP_SIGNALS
from daemon.log.logs import get_logger

log = get_logger("runbroker.signals")

NOTED_MAX = 64  # signals noted but not logged yet: in a flood beyond this the oldest go unlogged


class Signals:
    """The counts and events the signal handlers set, for the app to act on."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.force = asyncio.Event()
        self.reload = asyncio.Event()  # SIGHUP: the reloader clears it when it reloads
        self.status = asyncio.Event()  # SIGUSR1: report_signals clears it when it logs
        self.noted: collections.deque[int] = collections.deque(maxlen=NOTED_MAX)
        self.noted_event = asyncio.Event()
        self.count = 0
        self.stop_signal: int | None = None  # the first stop signal, for the log

    def received(self, signum: int = signal.SIGTERM) -> None:
        self.count += 1
        if self.stop_signal is None:
            self.stop_signal = signum
        self.stop.set()
        if self.count >= 2:
            self.force.set()

    def note(self, signum: int) -> None:
        self.noted.append(signum)
        self.noted_event.set()

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in STOP_SIGNALS:
            loop.add_signal_handler(signum, self.received, signum)
        loop.add_signal_handler(RELOAD_SIGNAL, self.reload.set)
        loop.add_signal_handler(STATUS_SIGNAL, self.status.set)
        for signum in IGNORED_SIGNALS:
            loop.add_signal_handler(signum, self.note, signum)


def signal_name(signum: int | None) -> str | None:
    return None if signum is None else signal.Signals(signum).name


async def report_signals(signals: Signals, status: Callable[[], Mapping[str, Any]]) -> None:
    """Log what SIGUSR1 and the ignored signals asked for, until cancelled."""

    async def statuses() -> None:
        while True:
            await signals.status.wait()
            signals.status.clear()
            log.info("broker.status", signal="SIGUSR1", status=status())

    async def noted() -> None:
        while True:
            await signals.noted_event.wait()
            signals.noted_event.clear()
            while signals.noted:
                log.info("signal.ignored", signal=signal_name(signals.noted.popleft()))

    async with asyncio.TaskGroup() as group:
        group.create_task(statuses())
        group.create_task(noted())
