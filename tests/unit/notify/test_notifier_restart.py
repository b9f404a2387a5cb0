"""Whether a task's last run failed outlives a restart when the daemon has a state directory:
the first success after it is a ``recovery``, not a plain ``success``."""

from __future__ import annotations

from pathlib import Path

from daemon.core.journal import Journal
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue, RunRequest, RunResult
from daemon.core.tasks import TaskRegistry
from daemon.core.ticker.slot_state import SlotState
from daemon.notify.notifier import Notifier
from daemon.taskfile import parse_tasks_toml

TASKS = """
[tasks.backup]
command = ["/app/backup.sh"]
[tasks.backup.notify.webhook]
url = "http://127.0.0.1:9/hook"
on = ["failure", "recovery"]
"""


async def _life(directory: Path, ok: bool, tasks: str = TASKS) -> tuple[str, ...] | None:
    """One life of the daemon over the state in ``directory``: one run of ``backup`` ending
    ``ok`` or not, and the events of the notice it made (None: none)."""
    state = SlotState(directory)
    state.open()
    notifier = Notifier(TaskRegistry(parse_tasks_toml(tasks)), Journal(), ChildSupervisor())
    notifier.keep_failing_in(state)
    queue = RunQueue(1)
    run = queue.submit(RunRequest(task="backup"))
    assert await queue.take() is run
    run.mark_started()
    run.finish(RunResult(ok=ok, reason="" if ok else "exit 1"))
    notifier.run_finished(run)
    state.close()
    lanes = notifier.outbox.ready()
    assert len(lanes) <= 1  # the one webhook of the task
    notice = notifier.outbox.take(lanes[0]) if lanes else None
    return None if notice is None else notice.events


async def test_the_first_success_after_a_restart_that_followed_a_failure_is_a_recovery(
    tmp_path: Path,
) -> None:
    assert await _life(tmp_path, ok=False) == ("failure",)
    assert await _life(tmp_path, ok=True) == ("recovery", "success")
    assert await _life(tmp_path, ok=True) is None  # a plain success: this target hears none


async def test_a_task_gone_from_the_tasks_file_is_forgotten(tmp_path: Path) -> None:
    assert await _life(tmp_path, ok=False) == ("failure",)
    other = TASKS.replace("backup", "report")
    state = SlotState(tmp_path)
    state.open()
    Notifier(TaskRegistry(parse_tasks_toml(other)), Journal(), ChildSupervisor()).keep_failing_in(
        state
    )
    assert state.failing == set()
    state.close()
    assert await _life(tmp_path, ok=True) is None
