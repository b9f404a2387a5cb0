"""Reloading the tasks file (daemon/broker/reload/reloader.py): all or nothing, a refused file
leaving the old tasks, what status, health and the metrics say."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from daemon.broker.app import Broker
from daemon.broker.signals import Signals
from daemon.core.tasks import Task, TaskRegistry
from daemon.face.status_text import reload_summary, render_status
from daemon.observe.status import health_answer, status_answer
from daemon.pg.fence import LeaseFence, lead_s
from daemon.settings import load_settings
from daemon.wire.codec import decode_request
from daemon.wire.protocol import ReloadRequest
from tests.unit.broker.reload.conftest import NEW_TASKS, TASKS, MakeBroker, replace_file


async def test_a_reload_swaps_the_tasks_and_the_ticker_plans(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    executor_registry = broker.executor.tasks
    replace_file(tasks_file, NEW_TASKS)
    answer = await broker.reloader.answer()
    assert answer == {
        "event": "reload",
        "ok": True,
        "reason": "",
        "added": ["fresh"],
        "removed": ["gone"],
        "changed": ["edit"],
        "unchanged": ["keep"],
    }
    assert sorted(broker.tasks.names()) == ["edit", "fresh", "keep"]
    assert executor_registry is broker.tasks
    assert broker.server.tasks is broker.tasks
    assert sorted(plan.task for plan in broker.ticker.plans) == ["edit", "fresh"]
    status = status_answer(broker)["reload"]
    assert status["last_ok"] is True
    assert status["last_changes"] == {"added": 1, "removed": 1, "changed": 1, "unchanged": 1}
    assert "last reload" in render_status(status_answer(broker))


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ("[tasks.keep\ncommand = ['true']\n", "line 1"),
        ("[tasks.keep]\ncommand = ['true']\ninterval = 'soon'\n", "tasks.keep: interval"),
        ("[tasks.keep]\nhandler = 'no.such.module:run'\n", "cannot import 'no.such.module'"),
        ("", "no tasks"),
    ],
)
async def test_a_bad_file_is_refused_and_the_old_tasks_stay(
    make_broker: MakeBroker,
    tasks_file: Path,
    text: str,
    named: str,
    logs: list[Any],
) -> None:
    broker = make_broker()
    before = dict(broker.tasks.tasks)
    plans = list(broker.ticker.plans)
    replace_file(tasks_file, text)
    answer = await broker.reloader.answer()
    assert answer["ok"] is False
    assert named in answer["reason"]
    assert str(tasks_file) in answer["reason"]
    assert broker.tasks.tasks == before
    assert broker.ticker.plans == plans
    refused = [line for line in logs if line["event"] == "tasks.reload_refused"]
    assert len(refused) == 1
    assert named in refused[0]["error"]
    status = status_answer(broker)["reload"]
    assert status["last_ok"] is False
    assert status["last_error"] is not None
    assert named in status["last_error"]
    health = health_answer(broker)
    assert health["ok"] is True  # degraded, not dead: the old tasks still run
    assert any("last reload of the tasks file failed" in w for w in health["warnings"])
    assert "FAILED" in render_status(status_answer(broker))
    replace_file(tasks_file, TASKS)
    assert (await broker.reloader.answer())["ok"] is True
    assert "warnings" not in health_answer(broker)
    assert status_answer(broker)["reload"]["last_failed_at"] is not None  # still said


async def test_without_a_tasks_file_there_is_nothing_to_reload(
    make_broker: MakeBroker, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    make_broker()  # the environment of the others, then as if RUNBROKER_TASKS_FILE were unset
    monkeypatch.delenv("RUNBROKER_TASKS_FILE")
    settings = load_settings()
    settings.tasks_file = tmp_path / "absent.toml"  # the default path, absent at start
    settings.__pydantic_fields_set__.discard("tasks_file")
    assert not settings.tasks_file_required
    registry = TaskRegistry({"default": Task("default", command=("true",))})
    broker = Broker(settings, registry, Signals(), default_command=("true",))
    answer = await broker.reloader.answer()
    assert answer["ok"] is False
    assert answer["reason"].startswith("no tasks file to reload")
    assert status_answer(broker)["reload"]["watch"] == "none"
    assert "tasks file: none" in render_status(status_answer(broker))


async def test_an_unchanged_file_is_not_reloaded_for_a_file_event(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    assert await broker.reloader.reload("file", only_if_changed=True) is None
    replace_file(tasks_file, NEW_TASKS)
    outcome = await broker.reloader.reload("file", only_if_changed=True)
    assert outcome is not None
    assert outcome.ok
    again = await broker.reloader.reload("signal")  # asked for: always reloaded
    assert again is not None
    assert again.changes is not None
    assert again.changes.unchanged == ("edit", "fresh", "keep")


async def test_the_command_lines_default_task_survives_a_reload(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    broker.reloader.default_command = ("true",)
    broker.tasks.replace({**broker.tasks.tasks, "default": Task("default", command=("true",))})
    answer = await broker.reloader.answer()
    assert answer["ok"] is True
    assert "default" in answer["unchanged"]


async def test_new_tasks_get_their_zero_metric_series(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker(METRICS_ADDR="127.0.0.1:0")
    assert broker.metrics_server is not None
    replace_file(tasks_file, NEW_TASKS)
    assert (await broker.reloader.answer())["ok"] is True
    text = broker.metrics_server.metrics.exposition().decode()
    assert 'runbroker_runs_total{outcome="failed",task="fresh",trigger="tick"} 0.0' in text
    assert 'runbroker_last_success_timestamp_seconds{task="fresh"} 0.0' in text


def test_the_reload_op_is_decoded() -> None:
    assert decode_request(b'{"op": "reload"}\n') == ReloadRequest()


def test_a_reload_summary_for_people() -> None:
    answer = {"added": ["a"], "removed": [], "changed": ["b", "c"], "unchanged": ["d"]}
    assert reload_summary(answer) == "1 added (a), 0 removed, 2 changed (b, c), 1 unchanged"
    counts = {"added": 1, "removed": 0, "changed": 2, "unchanged": 1}
    assert reload_summary(counts) == "1 added, 0 removed, 2 changed, 1 unchanged"


async def test_with_a_database_a_grace_that_breaks_fencing_is_refused(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker(DATABASE_URL="postgresql://app@127.0.0.1:5432/app", LEASE="20s")
    widened: list[float] = []
    broker.reloader.fence_widen = widened.append
    replace_file(tasks_file, TASKS + '[tasks.slow]\ncommand = ["true"]\ngrace = "11s"\n')
    refused = await broker.reloader.answer()
    assert refused["ok"] is False
    assert (
        "the grace of task slow (11s) must be at most half of RUNBROKER_LEASE" in refused["reason"]
    )
    assert "slow" not in broker.tasks
    replace_file(tasks_file, TASKS + '[tasks.slow]\ncommand = ["true"]\ngrace = "8s"\n')
    assert (await broker.reloader.answer())["ok"] is True
    assert widened == [8.0]  # the runner's fence leaves room for the longest grace


def test_a_fence_widens_but_never_narrows() -> None:
    fence: LeaseFence[object] = LeaseFence(20.0, 2.0, lambda _held: None)
    before = fence.lead_s
    fence.widen(8.0)
    assert fence.lead_s == lead_s(20.0, 8.0) > before
    fence.widen(1.0)
    assert fence.lead_s == lead_s(20.0, 8.0)


async def test_a_file_nested_too_deeply_is_refused_not_raised(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    before = dict(broker.tasks.tasks)
    replace_file(tasks_file, "[tasks.keep]\ncommand = " + "[" * 3000 + "]" * 3000 + "\n")
    answer = await broker.reloader.answer()
    assert answer["ok"] is False
    assert "RecursionError" in answer["reason"]
    assert broker.tasks.tasks == before


async def test_a_handler_module_calling_sys_exit_at_import_is_refused(
    make_broker: MakeBroker, tasks_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rb_exits_at_import.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broker = make_broker()
    replace_file(tasks_file, TASKS + "[tasks.bye]\nhandler = 'rb_exits_at_import:run'\n")
    answer = await broker.reloader.answer()
    assert answer["ok"] is False
    assert "SystemExit: 3" in answer["reason"]
    assert "bye" not in broker.tasks


@pytest.mark.parametrize(
    ("raised", "reason"),
    [
        ("KeyboardInterrupt('at import')", "KeyboardInterrupt: at import"),
        ("GeneratorExit('at import')", "GeneratorExit: at import"),
        ("Odd('its own')", "Odd: its own"),
        ("asyncio.CancelledError('at import')", "CancelledError: at import"),
    ],
)
async def test_a_handler_module_raising_any_base_exception_at_import_is_refused(
    make_broker: MakeBroker,
    tasks_file: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    raised: str,
    reason: str,
) -> None:
    module = "rb_raises_" + reason.split(":")[0].lower()
    (tmp_path / f"{module}.py").write_text(
        f"import asyncio\nclass Odd(BaseException): pass\nraise {raised}\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    broker = make_broker()
    replace_file(tasks_file, TASKS + f"[tasks.bye]\nhandler = '{module}:run'\n")
    answer = await broker.reloader.answer()
    assert answer["ok"] is False
    assert reason in answer["reason"]
    assert "bye" not in broker.tasks
    assert broker.reloader.last is not None
    assert broker.reloader.last.ok is False


async def test_an_unexpected_failure_computing_the_plans_swaps_nothing(
    make_broker: MakeBroker, tasks_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from daemon.broker import tasks_check

    broker = make_broker()
    before, plans = dict(broker.tasks.tasks), list(broker.ticker.plans)

    def broken(*_args: object) -> None:
        raise RuntimeError("no plans today")

    monkeypatch.setattr(tasks_check, "tick_plans", broken)
    replace_file(tasks_file, NEW_TASKS)
    answer = await broker.reloader.answer()
    assert answer["ok"] is False
    assert "RuntimeError: no plans today" in answer["reason"]
    assert broker.tasks.tasks == before  # all or nothing: not the new tasks with the old plans
    assert broker.ticker.plans == plans


async def test_a_file_back_with_the_running_bytes_clears_the_failure(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    os.unlink(tasks_file)
    refused = await broker.reloader.reload("file", only_if_changed=True)
    assert refused is not None
    assert not refused.ok
    replace_file(tasks_file, TASKS)  # the bytes the running tasks came from
    outcome = await broker.reloader.reload("file", only_if_changed=True)
    assert outcome is not None
    assert outcome.ok
    assert status_answer(broker)["reload"]["last_ok"] is True
    assert "warnings" not in health_answer(broker)


async def test_a_refusal_from_outside_the_file_is_retried_by_the_next_file_event(
    make_broker: MakeBroker, tasks_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "handlers"
    modules.mkdir()
    monkeypatch.syspath_prepend(str(modules))
    broker = make_broker()
    replace_file(tasks_file, TASKS + "[tasks.late]\nhandler = 'rb_late_handler:run'\n")
    first = await broker.reloader.reload("file", only_if_changed=True)
    assert first is not None
    assert not first.ok  # not installed yet; the import system has now listed the directory
    listed = modules.stat()
    (modules / "rb_late_handler.py").write_text("async def run(ctx):\n    return None\n")
    # As if installed within the directory's timestamp granularity: only invalidate_caches()
    # makes the import system look again.
    os.utime(modules, ns=(listed.st_atime_ns, listed.st_mtime_ns))
    again = await broker.reloader.reload("file", only_if_changed=True)  # the same bytes
    assert again is not None
    assert again.ok, again.reason
    assert "late" in broker.tasks


async def test_reload_outcomes_are_counted_in_the_metrics(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker(METRICS_ADDR="127.0.0.1:0")
    assert broker.metrics_server is not None
    metrics = broker.metrics_server.metrics

    def text() -> str:
        return metrics.exposition().decode()

    assert 'runbroker_tasks_reloads_total{outcome="succeeded"} 0.0' in text()
    assert 'runbroker_tasks_reloads_total{outcome="refused"} 0.0' in text()
    assert "runbroker_tasks_reload_last_success 1.0" in text()
    replace_file(tasks_file, "[tasks.broken\n")
    assert (await broker.reloader.answer())["ok"] is False
    assert 'runbroker_tasks_reloads_total{outcome="refused"} 1.0' in text()
    assert "runbroker_tasks_reload_last_success 0.0" in text()
    replace_file(tasks_file, NEW_TASKS)
    assert (await broker.reloader.answer())["ok"] is True
    assert 'runbroker_tasks_reloads_total{outcome="succeeded"} 1.0' in text()
    assert "runbroker_tasks_reload_last_success 1.0" in text()


async def test_a_reload_subscriber_that_raises_never_undoes_or_stops_a_reload(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    told: list[bool] = []

    def broken(_news: object) -> None:
        raise RuntimeError("a subscriber's bug")

    broker.reloader.listeners.add(broken)
    broker.reloader.listeners_off_loop.add(broken)
    broker.reloader.outcomes.add(broken)
    broker.reloader.outcomes.add(told.append)
    replace_file(tasks_file, NEW_TASKS)
    answer = await broker.reloader.answer()
    assert answer["ok"] is True, answer
    assert sorted(broker.tasks.names()) == ["edit", "fresh", "keep"]
    assert told == [True]
