"""The run queue and the run lifecycle: every accepted run gets exactly one result.

Submitters, the executor and the observers import these names from here.
"""

from daemon.core.runqueue.queue import QueueStats, Rejected, RunQueue
from daemon.core.runqueue.records import (
    Event,
    RunRequest,
    RunResult,
    RunState,
    Trigger,
    is_json_output,
    job_context,
)
from daemon.core.runqueue.run import (
    Listener,
    Run,
    Watcher,
    new_run_id,
    output_log_fields,
    run_log_fields,
)

__all__ = [
    "Event",
    "Listener",
    "QueueStats",
    "Rejected",
    "Run",
    "RunQueue",
    "RunRequest",
    "RunResult",
    "RunState",
    "Trigger",
    "Watcher",
    "is_json_output",
    "job_context",
    "new_run_id",
    "output_log_fields",
    "run_log_fields",
]
