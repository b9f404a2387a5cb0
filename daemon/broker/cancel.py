"""``runbroker cancel ID``, answered by the daemon.

A queued run is cancelled at once and a running one is asked to stop, so only the run's own
result says that it ended.
"""

from __future__ import annotations

from typing import Any

from daemon.core.executor import CANCEL_ALREADY_REQUESTED, Executor
from daemon.core.runqueue import RunQueue, run_log_fields
from daemon.log.logs import get_logger
from daemon.wire import control_answers as answers

log = get_logger("runbroker.app")  # the broker's own lines


def cancel_run(queue: RunQueue, executor: Executor, run_id: str) -> dict[str, Any]:
    """Cancel the run ``run_id`` and say what became of it (the ``cancel`` op's answer)."""
    queued = queue.cancel_waiting(run_id)
    if queued is not None:
        log.info("run.cancelled", **run_log_fields(queued), state="queued")
        return answers.cancel_answer(run_id, answers.CANCEL_QUEUED)
    running = queue.current
    requested = executor.cancel_current(run_id)
    if requested and running is not None:
        log.info("run.cancelled", **run_log_fields(running), state="running")
        detail = (
            "cancel already requested; the run is still being terminated"
            if requested == CANCEL_ALREADY_REQUESTED
            else "cancel requested; the run is being terminated and is still running"
        )
        return answers.cancel_answer(run_id, answers.CANCEL_RUNNING, detail)
    return answers.cancel_refusal(run_id)
