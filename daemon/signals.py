"""SIGTERM, SIGINT and SIGHUP in the running daemon. As PID 1 a signal without a handler is
dropped, so all three are handled: SIGTERM and SIGINT by counting (the first asks for the
drain, a second forces the exit), SIGHUP by asking for a reload of the tasks file.
"""

from __future__ import annotations

import asyncio
import signal


class Signals:
    """Signal handlers only count and set events; the app acts on them."""

    def __init__(self) -> None:
        self.stop = asyncio.Event()
        self.force = asyncio.Event()
        self.reload = asyncio.Event()  # SIGHUP: the reloader clears it when it reloads
        self.count = 0

    def received(self) -> None:
        self.count += 1
        self.stop.set()
        if self.count >= 2:
            self.force.set()

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, self.received)
        loop.add_signal_handler(signal.SIGHUP, self.reload.set)
