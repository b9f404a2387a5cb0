"""The notifications' series: read from the notifier at scrape time, never a URL in them."""

from __future__ import annotations

from daemon.core.journal import Journal
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue
from daemon.core.tasks import TaskRegistry
from daemon.notify.notifier import Notifier
from daemon.observe.metrics import Metrics
from daemon.taskfile import parse_tasks_toml
from tests.unit.tasks_toml import tasks_toml

WEBHOOK = {"url": "http://127.0.0.1:9/hook?token=s3cr3t"}
TASKS = tasks_toml({"a": {"command": "true", "notify": {"max_silence": "1h", "webhook": WEBHOOK}}})


def test_the_series_say_what_was_sent_dropped_and_who_is_silent() -> None:
    notifier = Notifier(TaskRegistry(parse_tasks_toml(TASKS)), Journal(), ChildSupervisor())
    notifier.record.kinds["webhook"]["sent"] = 4
    notifier.record.kinds["ping"]["failed"] = 2
    notifier.outbox.dropped = 3
    notifier.silence.silent["a"] = 0.0
    text = Metrics(RunQueue(1), notify=notifier).exposition().decode()
    assert 'runbroker_notifications_total{kind="webhook",result="sent"} 4.0' in text
    assert 'runbroker_notifications_total{kind="ping",result="failed"} 2.0' in text
    assert "runbroker_notifications_dropped_total 3.0" in text
    assert "runbroker_notifications_pending 0.0" in text
    assert 'runbroker_task_silent_seconds{task="a"}' in text
    assert "s3cr3t" not in text


def test_without_notifications_the_series_are_at_zero() -> None:
    notifier = Notifier(TaskRegistry(), Journal(), ChildSupervisor())
    text = Metrics(RunQueue(1), notify=notifier).exposition().decode()
    assert 'runbroker_notifications_total{kind="command",result="sent"} 0.0' in text
    assert "runbroker_task_silent_seconds{" not in text
