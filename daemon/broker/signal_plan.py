"""What each signal does to ``runbroker run``, the same whether it is PID 1 or not, and the
process's signal state set before any slow import.

As PID 1 the kernel drops a signal that has no handler; any other process dies of most of
them. So every signal whose default would end the daemon gets a handler or is blocked:

- stop (a drain, as SIGTERM; a second one forces the exit): SIGTERM, SIGINT; SIGQUIT (a
  request to quit, which a core dump serves nothing in a container); SIGXCPU (the CPU-time
  soft limit: SIGKILL follows at the hard limit, so drain while there is time); SIGPWR (what
  LXC and systemd send a container's init to shut it down);
- SIGHUP: reload the tasks file; SIGUSR1: one ``broker.status`` log line with the status;
- logged (``signal.ignored``) and otherwise ignored: SIGTRAP, SIGABRT, SIGUSR2, SIGALRM,
  SIGSTKFLT, SIGVTALRM, SIGPROF, SIGIO, SIGSYS (an ``abort()`` of the daemon's own still
  ends it: it resets the handler and raises again);
- blocked: SIGSEGV, SIGBUS, SIGILL, SIGFPE. Sent by another process they stay pending and do
  nothing. Raised by the daemon's own code they are a crash: the kernel delivers a fault even
  when blocked, with its default action. A Python handler cannot serve them: it returns to the
  faulting instruction, which faults again forever.

No imports but ``signal``: the command line calls ``prepare_process`` before anything slow.
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
    """The daemon's signal state from its first instruction on: ``on_stop`` counts the stop
    signals that come during start-up; the others are let go until the event loop handles
    them (the tasks are being read anyway); the handled signals are unblocked (a parent's
    mask is inherited across exec: a SIGTERM it blocked would never reach us), the faults
    blocked. Every thread started later inherits the mask; jobs start with an empty one."""
    for signum in STOP_SIGNALS:
        signal.signal(signum, on_stop)
    for signum in (RELOAD_SIGNAL, STATUS_SIGNAL, *IGNORED_SIGNALS):
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, HANDLED_SIGNALS)
    signal.pthread_sigmask(signal.SIG_BLOCK, FAULT_SIGNALS)
