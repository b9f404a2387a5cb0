"""Job rows the runner found it could not run as written, reported for an hour.

Such a row fails (or is disabled) on its own while every other job goes on. It is logged once
and listed in ``status`` and the health warnings until it runs or has not been seen for
``UNUSABLE_REPORT_S``.
"""

from __future__ import annotations

import time

from daemon.log.logs import get_logger
from daemon.pg.health import LOGGER_NAME
from daemon.pg.store.base import DueJob

UNUSABLE_REPORT_S = 3600.0  # a job row found unusable is reported this long after last seen

log = get_logger(LOGGER_NAME)


class UnusableJobs:
    def __init__(self) -> None:
        # job id -> (name, why, when last seen): rows that could not be run as written
        self.jobs: dict[int, tuple[str, str, float]] = {}

    def found(self, job: DueJob, why: str) -> None:
        if job.id not in self.jobs:
            log.warning("job.unusable", job=job.name, error=why)
        self.jobs[job.id] = (job.name, why, time.monotonic())

    def fixed(self, job_id: int) -> None:
        """The job ran as written: no longer reported."""
        self.jobs.pop(job_id, None)

    def now(self) -> dict[int, tuple[str, str]]:
        """By job id: (name, why), for the rows seen within the report window."""
        cutoff = time.monotonic() - UNUSABLE_REPORT_S
        for job_id in [j for j, (_n, _w, seen) in self.jobs.items() if seen < cutoff]:
            del self.jobs[job_id]
        return {job_id: (name, why) for job_id, (name, why, _seen) in self.jobs.items()}
