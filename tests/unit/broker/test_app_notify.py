"""The broker wires the notifier: status shows it only when a task notifies, a reload gives
it the new tables at once, and a silent task is a health warning, never unhealthy."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from daemon.broker.app import Broker
from daemon.broker.shutdown import NOTIFY_DRAIN_MAX_S, shutdown
from daemon.broker.signals import Signals
from daemon.core.runqueue import RunRequest, RunResult
from daemon.core.ticker.slot_state import SlotState
from daemon.observe.status import health_answer, status_answer
from daemon.settings import load_settings
from daemon.taskfile import build_registry

PLAIN = '[tasks.a]\ncommand = "true"\n'
NOTIFIED = PLAIN + '[tasks.a.notify]\nmax_silence = "1h"\n'


def broker_of(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tasks: str) -> Broker:
    """A broker (not started) of the tasks file ``tasks``, with its socket in ``tmp_path``
    and no default task, in the environment ``clean_env`` left and the test set."""
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    monkeypatch.setenv("RUNBROKER_INTERVAL", "off")
    tasks_file = tmp_path / "tasks.toml"
    tasks_file.write_text(tasks)
    monkeypatch.setenv("RUNBROKER_TASKS_FILE", str(tasks_file))
    settings = load_settings()
    return Broker(settings, build_registry((), settings.tasks_file), Signals())


@pytest.fixture
def broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clean_env: None) -> Broker:
    return broker_of(monkeypatch, tmp_path, PLAIN)


async def test_status_says_nothing_of_notifications_until_a_reload_adds_them(
    broker: Broker,
) -> None:
    assert "notify" not in status_answer(broker)
    assert broker.settings.tasks_file is not None
    broker.settings.tasks_file.write_text(NOTIFIED)
    outcome = await broker.reloader.reload("test")
    assert outcome is not None
    notify = status_answer(broker).get("notify")
    assert notify is not None
    assert notify["tasks"] == 1
    assert notify["silent"] == []


async def test_a_silent_task_is_a_warning_of_a_healthy_daemon(broker: Broker) -> None:
    assert broker.settings.tasks_file is not None
    broker.settings.tasks_file.write_text(NOTIFIED)
    await broker.reloader.reload("test")
    broker.notifier.silence.silent["a"] = 0.0  # as if an hour had passed without a success
    answer = health_answer(broker)
    assert answer["ok"] is True
    assert any("task 'a' has not succeeded" in warning for warning in answer.get("warnings", []))


async def test_a_stop_gives_pending_notifications_at_most_their_share_of_the_budget(
    broker: Broker,
) -> None:
    given: list[float] = []

    async def drain(timeout_s: float) -> None:
        given.append(timeout_s)

    executor_task = asyncio.get_running_loop().create_task(broker.executor.run_forever())
    code = await shutdown(
        broker.settings.shutdown_timeout_s,
        server=broker.server,
        queue=broker.queue,
        executor=broker.executor,
        children=broker.children,
        executor_task=executor_task,
        others=[],
        notify_drain=drain,
    )
    assert code == 0
    assert len(given) == 1
    assert 0 < given[0] <= NOTIFY_DRAIN_MAX_S


def test_the_failing_tasks_come_back_from_the_state_directory_at_start(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, clean_env: None
) -> None:
    """The broker hands the notifier the state it opened: a task that failed in the last life
    is still failing, and its run's end is written down again."""
    state_dir = tmp_path / "state"
    earlier = SlotState(state_dir)
    earlier.open()
    earlier.ended("a", failed=True)
    earlier.close()
    monkeypatch.setenv("RUNBROKER_STATE_DIR", str(state_dir))
    hooked = PLAIN + '[tasks.a.notify.webhook]\nurl = "http://127.0.0.1:9/"\non = ["recovery"]\n'
    broker = broker_of(monkeypatch, tmp_path, hooked)
    broker._open_state()
    assert broker.slot_state is not None
    assert broker.slot_state.failing == {"a"}
    run = broker.queue.submit(RunRequest(task="a"))
    run.mark_started()
    run.finish(RunResult(ok=True))
    broker.notifier.run_finished(run)
    (lane,) = broker.notifier.outbox.ready()  # the task's one webhook
    notice = broker.notifier.outbox.take(lane)
    assert notice is not None
    assert notice.events == ("recovery", "success")
    assert broker.slot_state.failing == set()
    broker.slot_state.close()
