"""The part of a broker that runs jobs: one bounded queue, the jobs' supervisor and the one
executor.

The daemon and ``runbroker once`` both build it here, so a job runs the same way under either.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue

if TYPE_CHECKING:
    from daemon.core.journal import Journal
    from daemon.core.tasks import TaskRegistry
    from daemon.settings import Settings


@dataclass(frozen=True)
class Engine:
    queue: RunQueue
    children: ChildSupervisor
    executor: Executor

    @classmethod
    def for_daemon(
        cls, settings: Settings, tasks: TaskRegistry, journal: Journal, job_dir: str | None
    ) -> Engine:
        """The daemon's engine: a queue of ``RUNBROKER_QUEUE_CAPACITY`` runs, the jobs' lines in the
        log and in ``journal``, commands started in ``job_dir`` (None: the daemon's own
        directory)."""
        queue = RunQueue(settings.queue_capacity)
        children = ChildSupervisor(job_dir=job_dir)
        executor = Executor(
            queue,
            tasks,
            children,
            default_grace_s=settings.grace_s,
            output_log_mode=settings.output_log,
            output_hold_s=settings.output_hold_s,
            journal=journal,
        )
        return cls(queue, children, executor)

    @classmethod
    def for_once(cls, settings: Settings, tasks: TaskRegistry) -> Engine:
        """``runbroker once``'s engine: room for its one run, and its lines the caller's to show.

        No journal keeps them, because no ``logs`` client can ask."""
        queue = RunQueue(capacity=1)
        children = ChildSupervisor()
        executor = Executor(
            queue, tasks, children, default_grace_s=settings.grace_s, output_log_mode=None
        )
        return cls(queue, children, executor)
