"""What each signal does to ``runbroker run``, set before any slow import.

As PID 1 the kernel drops a signal that has no handler, and any other process dies of most of
them: every signal whose default would end the daemon is handled, ignored with a log line, or
blocked (the faults, which a Python handler cannot serve). No imports but ``signal``: the
command line calls ``prepare_process`` before anything slow.
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGXCPU, signal.SIGPWR)
RELOAD_SIGNAL = signal.SIGHUP
STATUS_SIGNAL = signal.SIGUSR1
IGNORED_SIGNALS = (
    signal.SIGTRAP,
    signal.SIGABRT,
    signal.SIGUSR2,
    signal.SIGALRM,
    signal.SIGSTKFLT,
    signal.SIGVTALRM,
    signal.SIGPROF,
    signal.SIGIO,
    signal.SIGSYS,
)
FAULT_SIGNALS = (signal.SIGSEGV, signal.SIGBUS, signal.SIGILL, signal.SIGFPE)
HANDLED_SIGNALS = (*STOP_SIGNALS, RELOAD_SIGNAL, STATUS_SIGNAL, *IGNORED_SIGNALS)


def prepare_process(on_stop: Callable[[int, FrameType | None], object]) -> None:
    """Set the daemon's signal state from its first instruction on.

    ``on_stop`` counts the stop signals that come during start-up, and the others wait for the
    event loop. The handled signals are unblocked, because a parent's mask is inherited across
    exec and a SIGTERM it blocked would never reach the daemon. The faults are blocked."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, on_stop)
    for signum in (RELOAD_SIGNAL, STATUS_SIGNAL, *IGNORED_SIGNALS):
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
    signal.pthread_sigmask(signal.SIG_BLOCK, FAULT_SIGNALS)
