"""How many database runs a replica should hold: what its one executor can start soon.

Runs it cannot start soon would only wait in its queue while other replicas sit idle, so a
claim takes what it can start within ``HORIZON_S``, judged by how long its recent runs took.
"""

from __future__ import annotations

import math

HORIZON_S = 1.0  # claim what can start within this (a claim's round trip is milliseconds)
UNMEASURED_RUN_S = HORIZON_S  # a run's duration until runs are measured: one to start, one next
SMOOTHING = 0.3  # weight of the newest run in the running average of run durations
MIN_RUN_S = 0.001  # a shorter average counts as this (the window is capped by BATCH_SIZE)


class RunHorizon:
    """The running average of this replica's run durations, and the window it allows."""

    def __init__(self) -> None:
        self.horizon_s = HORIZON_S
        self.average_run_s = UNMEASURED_RUN_S

    def observe(self, duration_s: float) -> None:
        """A run of this replica's database jobs took ``duration_s``."""
        if math.isfinite(duration_s) and duration_s >= 0:
            self.average_run_s += SMOOTHING * (duration_s - self.average_run_s)

    def window(self, cap: int) -> int:
        """How many runs to hold (running, queued, claimed), at most ``cap``.

        One to start now, plus those that would start within the horizon after it."""
        follow = int(self.horizon_s / max(self.average_run_s, MIN_RUN_S))
        return max(1, min(cap, 1 + follow))
