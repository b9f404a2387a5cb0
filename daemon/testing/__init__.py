"""Test your own handlers and schedules without a daemon, a socket or a database.

- ``run_handler`` / ``start_handler``: a handler's run on the daemon's own executor (the same
  ``RunContext``, the task's timeout, crashes and bad outputs as failed results, cancellation),
  returning a ``HandlerResult``.
- ``ManualClock``: aware UTC time that moves only with ``advance`` and ``set``.
- ``simulate_slots``: what the daemon does with each scheduled slot of your tasks file's task
  over virtual time (``start_deadline``, ``on_busy``, triggers, down-times and the catch-up
  of ``misfire``/``catchup_window``), returning a ``SlotSimulation``; ``VirtualTime``: sleepers
  on a ``ManualClock``.
- ``JobBoard``: scheduled jobs (the ``runbroker jobs add`` forms) on a manual clock, over the
  daemon's in-memory job store and its planner: which runs fire, retries with backoff, the
  next occurrence, DST included.

Fixtures for pytest: ``pytest_plugins = ["daemon.testing.fixtures"]`` in a ``conftest.py``.
"""

from daemon.testing.clock import ManualClock
from daemon.testing.handlers import (
    Handler,
    HandlerResult,
    HandlerRun,
    RunContext,
    run_handler,
    start_handler,
)
from daemon.testing.jobs import Firing, JobBoard, Outcome
from daemon.testing.slot_results import (
    SettledSlot,
    SimulatedRun,
    SlotSimulation,
    Trigger,
    TriggerAnswer,
)
from daemon.testing.slot_simulation import simulate_slots
from daemon.testing.virtual_runs import RunStart
from daemon.testing.virtual_time import VirtualTime

__all__ = [
    "Firing",
    "Handler",
    "HandlerResult",
    "HandlerRun",
    "JobBoard",
    "ManualClock",
    "Outcome",
    "RunContext",
    "RunStart",
    "SettledSlot",
    "SimulatedRun",
    "SlotSimulation",
    "Trigger",
    "TriggerAnswer",
    "VirtualTime",
    "run_handler",
    "simulate_slots",
    "start_handler",
]
