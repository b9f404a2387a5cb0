"""Reloading the tasks file: the registry swapped whole, a queued run of a removed
task refused with one result, a refused file leaving the old tasks, what status and health say."""

from __future__ import annotations

import asyncio
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from daemon import settings as settings_module
from daemon.broker.app import Broker
from daemon.broker.reload.waking import reload_forever, start_watching
from daemon.broker.signals import Signals
from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue, RunRequest
from daemon.core.tasks import (
    RunContext,
    Task,
    TaskRegistry,
    build_registry,
    compare_tasks,
    parse_tasks_toml,
)
from daemon.face.status_text import reload_summary, render_status
from daemon.observe.status import health_answer, status_answer
from daemon.pg.fence import LeaseFence, lead_s
from daemon.settings import Settings, load_settings
from daemon.wire.codec import decode_request
from daemon.wire.protocol import ControlRequest
from tests.support.eventually import eventually_async

TASKS = """
[tasks.keep]
command = ["true"]
[tasks.gone]
command = ["true"]
[tasks.edit]
command = ["true"]
interval = "1h"
"""
NEW_TASKS = """
[tasks.keep]
command = ["true"]
[tasks.edit]
command = ["false"]
interval = "1h"
[tasks.fresh]
command = ["true"]
schedule = "cron 0 3 * * *"
"""
MakeBroker = Callable[..., Broker]


async def ran_with(run: RunContext) -> dict[str, Any]:
    return {"handler": "new"}


async def old_handler(run: RunContext) -> dict[str, Any]:
    return {"handler": "old"}


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(TASKS)
    return path


@pytest.fixture
def make_broker(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tasks_file: Path) -> MakeBroker:
    for name in list(os.environ):
        if name.upper().startswith("RUNBROKER_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(settings_module, "DOCKER_SECRET_PATH", tmp_path / "no-such-secret")
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    monkeypatch.setenv("RUNBROKER_INTERVAL", "off")

    def make(**env: str) -> Broker:
        for name, value in {"TASKS_FILE": str(tasks_file), **env}.items():
            monkeypatch.setenv(f"RUNBROKER_{name}", value)
        settings: Settings = load_settings()
        registry = build_registry((), settings.tasks_file, file_required=True)
        return Broker(settings, registry, Signals())

    return make


def _replace(path: Path, text: str) -> None:
    """An atomic replace, as an editor or a deployment tool does it."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(text)
    os.replace(staged, path)


def test_compare_tasks_names_each_change() -> None:
    old = {"a": Task("a", command=("true",)), "b": Task("b", command=("true",))}
    new = {"a": Task("a", command=("false",)), "c": Task("c", command=("true",))}
    changes = compare_tasks(old, new)
    assert (changes.added, changes.removed, changes.changed, changes.unchanged) == (
        ("c",),
        ("b",),
        ("a",),
        (),
    )
    assert compare_tasks(old, dict(old)).unchanged == ("a", "b")


def test_a_replaced_registry_refuses_a_removed_task_by_name() -> None:
    registry = TaskRegistry({"a": Task("a", command=("true",)), "b": Task("b", command=("true",))})
    changes = registry.replace({"a": Task("a", command=("true",))})
    assert changes.removed == ("b",)
    assert "b" not in registry
    assert registry.refusal(RunRequest(task="b")) == (
        "task 'b' was removed by a reload (this container defines a)"
    )
    registry.replace({"a": Task("a", command=("true",)), "b": Task("b", command=("true",))})
    assert registry.refusal(RunRequest(task="b")) is None  # added back: runs again
    assert registry.removed == {}


async def _executed(registry: TaskRegistry, task: str, swap: dict[str, Task]) -> list[Any]:
    """The events of a run of ``task`` queued before the registry's tasks became ``swap``."""
    queue = RunQueue(4)
    executor = Executor(queue, registry, ChildSupervisor(), default_grace_s=1.0)
    events: list[Any] = []
    done = asyncio.Event()

    def listen(_run: Any, event: Any) -> None:
        events.append(event)
        if event.kind == "done":
            done.set()

    queue.submit(RunRequest(task=task), listen)
    registry.replace(swap)
    consumer = asyncio.create_task(executor.run_forever())
    async with asyncio.timeout(10):
        await done.wait()
    queue.close()
    await consumer
    return events


async def test_a_queued_run_of_a_removed_task_gets_exactly_one_failed_result() -> None:
    registry = TaskRegistry({"gone": Task("gone", handler=old_handler)})
    events = await _executed(registry, "gone", {"other": Task("other", handler=ran_with)})
    assert [event.kind for event in events] == ["queued", "done"]  # never started, one result
    done = events[-1].fields
    assert done["ok"] is False
    assert done["reason"].startswith("task 'gone' was removed by a reload")


async def test_a_queued_run_of_a_changed_task_runs_the_new_definition() -> None:
    registry = TaskRegistry({"job": Task("job", handler=old_handler)})
    events = await _executed(registry, "job", {"job": Task("job", handler=ran_with)})
    assert [event.kind for event in events] == ["queued", "started", "done"]
    assert events[-1].fields["output"] == {"handler": "new"}


async def test_a_reload_swaps_the_tasks_and_the_ticker_plans(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    executor_registry = broker.executor.tasks
    _replace(tasks_file, NEW_TASKS)
    answer = broker.control(ControlRequest("reload"))
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
def test_a_bad_file_is_refused_and_the_old_tasks_stay(
    make_broker: MakeBroker,
    tasks_file: Path,
    text: str,
    named: str,
    logs: list[Any],
) -> None:
    broker = make_broker()
    before = dict(broker.tasks.tasks)
    plans = list(broker.ticker.plans)
    _replace(tasks_file, text)
    answer = broker.control(ControlRequest("reload"))
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
    _replace(tasks_file, TASKS)
    assert broker.control(ControlRequest("reload"))["ok"] is True
    assert "warnings" not in health_answer(broker)
    assert status_answer(broker)["reload"]["last_failed_at"] is not None  # still said


def test_without_a_tasks_file_there_is_nothing_to_reload(
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
    answer = broker.control(ControlRequest("reload"))
    assert answer["ok"] is False
    assert answer["reason"].startswith("no tasks file to reload")
    assert status_answer(broker)["reload"]["watch"] == "none"
    assert "tasks file: none" in render_status(status_answer(broker))


def test_an_unchanged_file_is_not_reloaded_for_a_file_event(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    assert broker.reloader.reload("file", only_if_changed=True) is None
    _replace(tasks_file, NEW_TASKS)
    outcome = broker.reloader.reload("file", only_if_changed=True)
    assert outcome is not None
    assert outcome.ok
    again = broker.reloader.reload("signal")  # asked for: always reloaded
    assert again is not None
    assert again.changes is not None
    assert again.changes.unchanged == ("edit", "fresh", "keep")


def test_the_command_lines_default_task_survives_a_reload(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    broker.reloader.default_command = ("true",)
    broker.tasks.replace({**broker.tasks.tasks, "default": Task("default", command=("true",))})
    answer = broker.control(ControlRequest("reload"))
    assert answer["ok"] is True
    assert "default" in answer["unchanged"]


def test_new_tasks_get_their_zero_metric_series(make_broker: MakeBroker, tasks_file: Path) -> None:
    broker = make_broker(METRICS_ADDR="127.0.0.1:0")
    assert broker.metrics_server is not None
    _replace(tasks_file, NEW_TASKS)
    assert broker.control(ControlRequest("reload"))["ok"] is True
    text = broker.metrics_server.metrics.exposition().decode()
    assert 'runbroker_runs_total{outcome="failed",task="fresh",trigger="tick"} 0.0' in text
    assert 'runbroker_last_success_timestamp_seconds{task="fresh"} 0.0' in text


def test_the_reload_op_is_decoded() -> None:
    assert decode_request(b'{"op": "reload"}\n') == ControlRequest("reload")


def test_a_reload_summary_for_people() -> None:
    answer = {"added": ["a"], "removed": [], "changed": ["b", "c"], "unchanged": ["d"]}
    assert reload_summary(answer) == "1 added (a), 0 removed, 2 changed (b, c), 1 unchanged"
    counts = {"added": 1, "removed": 0, "changed": 2, "unchanged": 1}
    assert reload_summary(counts) == "1 added, 0 removed, 2 changed, 1 unchanged"


async def test_sighup_and_a_file_change_wake_a_reload(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    reloaded: asyncio.Queue[str] = asyncio.Queue()
    reloader = broker.reloader
    reloader.listeners.append(lambda _changes: reloaded.put_nowait(reloader.last_source))
    sighup = asyncio.Event()
    watcher = start_watching(reloader)
    looping = asyncio.create_task(reload_forever(reloader, sighup, debounce_s=0.01))
    try:
        async with asyncio.timeout(10):
            sighup.set()
            assert await reloaded.get() == "signal"
            _replace(tasks_file, NEW_TASKS)
            assert await reloaded.get() == "file"
            assert "fresh" in broker.tasks
    finally:
        looping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await looping
        if watcher is not None:
            watcher.close()
    assert broker.reloader.watch == "inotify"


def test_with_a_database_a_grace_that_breaks_fencing_is_refused(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker(DATABASE_URL="postgresql://app@127.0.0.1:5432/app", LEASE="20s")
    widened: list[float] = []
    broker.reloader.fence_widen = widened.append
    _replace(tasks_file, TASKS + '[tasks.slow]\ncommand = ["true"]\ngrace = "11s"\n')
    refused = broker.control(ControlRequest("reload"))
    assert refused["ok"] is False
    assert (
        "the grace of task slow (11s) must be at most half of RUNBROKER_LEASE" in refused["reason"]
    )
    assert "slow" not in broker.tasks
    _replace(tasks_file, TASKS + '[tasks.slow]\ncommand = ["true"]\ngrace = "8s"\n')
    assert broker.control(ControlRequest("reload"))["ok"] is True
    assert widened == [8.0]  # the runner's fence leaves room for the longest grace


def test_a_fence_widens_but_never_narrows() -> None:
    fence: LeaseFence[object] = LeaseFence(20.0, 2.0, lambda _held: None)
    before = fence.lead_s
    fence.widen(8.0)
    assert fence.lead_s == lead_s(20.0, 8.0) > before
    fence.widen(1.0)
    assert fence.lead_s == lead_s(20.0, 8.0)


def test_the_same_file_read_twice_is_unchanged_for_every_schedule_form() -> None:
    text = "".join(
        f'[tasks.t{i}]\ncommand = ["true"]\nschedule = "{spec}"\ntz = "Europe/Berlin"\n'
        for i, spec in enumerate(
            [
                "every 5m",
                "daily 02:30",
                "weekly mon 02:30",
                "cron 30 2 * * *",
                "at 2030-01-01T00:00:00Z",
            ]
        )
    )
    changes = compare_tasks(parse_tasks_toml(text), parse_tasks_toml(text))
    assert changes.unchanged == ("t0", "t1", "t2", "t3", "t4")


async def test_a_change_before_the_watch_began_is_not_missed(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()  # the tasks were read here
    _replace(tasks_file, NEW_TASKS)  # ... and the file changed before the watch was set up
    watcher = start_watching(broker.reloader)
    assert watcher is not None
    watcher.close()
    assert broker.reloader.file_changed.is_set()
    outcome = broker.reloader.reload("file", only_if_changed=True)
    assert outcome is not None
    assert outcome.ok


def test_a_file_nested_too_deeply_is_refused_not_raised(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    before = dict(broker.tasks.tasks)
    _replace(tasks_file, "[tasks.keep]\ncommand = " + "[" * 3000 + "]" * 3000 + "\n")
    answer = broker.control(ControlRequest("reload"))
    assert answer["ok"] is False
    assert "RecursionError" in answer["reason"]
    assert broker.tasks.tasks == before


def test_a_handler_module_calling_sys_exit_at_import_is_refused(
    make_broker: MakeBroker, tasks_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rb_exits_at_import.py").write_text("import sys\nsys.exit(3)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    broker = make_broker()
    _replace(tasks_file, TASKS + "[tasks.bye]\nhandler = 'rb_exits_at_import:run'\n")
    answer = broker.control(ControlRequest("reload"))
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
def test_a_handler_module_raising_any_base_exception_at_import_is_refused(
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
    _replace(tasks_file, TASKS + f"[tasks.bye]\nhandler = '{module}:run'\n")
    answer = broker.control(ControlRequest("reload"))
    assert answer["ok"] is False
    assert reason in answer["reason"]
    assert "bye" not in broker.tasks
    assert broker.reloader.last is not None
    assert broker.reloader.last.ok is False


def test_an_unexpected_failure_computing_the_plans_swaps_nothing(
    make_broker: MakeBroker, tasks_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from daemon.broker.reload import reloader as reloader_module

    broker = make_broker()
    before, plans = dict(broker.tasks.tasks), list(broker.ticker.plans)

    def broken(*_args: object) -> None:
        raise RuntimeError("no plans today")

    monkeypatch.setattr(reloader_module, "tick_plans", broken)
    _replace(tasks_file, NEW_TASKS)
    answer = broker.control(ControlRequest("reload"))
    assert answer["ok"] is False
    assert "RuntimeError: no plans today" in answer["reason"]
    assert broker.tasks.tasks == before  # all or nothing: not the new tasks with the old plans
    assert broker.ticker.plans == plans


async def test_the_reload_loop_goes_on_after_a_reload_that_raised(
    make_broker: MakeBroker, tasks_file: Path, monkeypatch: pytest.MonkeyPatch, logs: list[Any]
) -> None:
    broker = make_broker()
    reloader = broker.reloader
    real, calls = reloader.reload, []

    def reload(source: str, *, only_if_changed: bool = False) -> Any:
        calls.append(source)
        if len(calls) == 1:
            raise RuntimeError("a bug of the reload")
        return real(source, only_if_changed=only_if_changed)

    monkeypatch.setattr(reloader, "reload", reload)
    reloaded = asyncio.Event()
    reloader.listeners.append(lambda _changes: reloaded.set())
    sighup = asyncio.Event()
    looping = asyncio.create_task(reload_forever(reloader, sighup, debounce_s=0.01))
    try:
        async with asyncio.timeout(10):
            sighup.set()
            await eventually_async(
                lambda: [line for line in logs if line["event"] == "tasks.reload_crashed"],
                "the crashed reload's log line",
            )
            sighup.set()
            await reloaded.wait()
    finally:
        looping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await looping
    assert calls == ["signal", "signal"]


def test_a_file_back_with_the_running_bytes_clears_the_failure(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    tasks_file.unlink()
    refused = broker.reloader.reload("file", only_if_changed=True)
    assert refused is not None
    assert not refused.ok
    tasks_file.write_text(TASKS)  # the bytes the running tasks came from
    outcome = broker.reloader.reload("file", only_if_changed=True)
    assert outcome is not None
    assert outcome.ok
    assert status_answer(broker)["reload"]["last_ok"] is True
    assert "warnings" not in health_answer(broker)


def test_a_refusal_from_outside_the_file_is_retried_by_the_next_file_event(
    make_broker: MakeBroker, tasks_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "handlers"
    modules.mkdir()
    monkeypatch.syspath_prepend(str(modules))
    broker = make_broker()
    _replace(tasks_file, TASKS + "[tasks.late]\nhandler = 'rb_late_handler:run'\n")
    first = broker.reloader.reload("file", only_if_changed=True)
    assert first is not None
    assert not first.ok  # not installed yet; the import system has now listed the directory
    listed = modules.stat()
    (modules / "rb_late_handler.py").write_text("async def run(ctx):\n    return None\n")
    # As if installed within the directory's timestamp granularity: only invalidate_caches()
    # makes the import system look again.
    os.utime(modules, ns=(listed.st_atime_ns, listed.st_mtime_ns))
    again = broker.reloader.reload("file", only_if_changed=True)  # the same bytes
    assert again is not None
    assert again.ok, again.reason
    assert "late" in broker.tasks


async def test_a_lost_watch_is_said_and_a_reload_request_re_arms_it(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    reloader = broker.reloader
    watcher = start_watching(reloader)
    assert watcher is not None
    try:
        home = str(tasks_file.parent)
        shutil.rmtree(home)
        await eventually_async(lambda: reloader.watch == "lost", "the watch said lost")
        assert status_answer(broker)["reload"]["watch"] == "lost"
        assert "watch LOST" in render_status(status_answer(broker))
        assert any("watch" in w and "lost" in w for w in health_answer(broker)["warnings"])
        os.mkdir(home)
        _replace(tasks_file, TASKS)
        assert broker.control(ControlRequest("reload"))["ok"] is True
        assert reloader.watch == "inotify"
        assert "warnings" not in health_answer(broker)
    finally:
        watcher.close()


async def test_the_watch_is_closed_when_stop_came_before_serve(make_broker: MakeBroker) -> None:
    broker = make_broker()
    broker.signals.stop.set()  # SIGTERM during start-up
    async with asyncio.timeout(20):
        assert await broker.serve() == 0
    assert broker.reloader.resync_watch is not None  # it was started ...
    assert broker.reloader.resync_watch() is False  # ... and closed


def test_reload_outcomes_are_counted_in_the_metrics(
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
    _replace(tasks_file, "[tasks.broken\n")
    assert broker.control(ControlRequest("reload"))["ok"] is False
    assert 'runbroker_tasks_reloads_total{outcome="refused"} 1.0' in text()
    assert "runbroker_tasks_reload_last_success 0.0" in text()
    _replace(tasks_file, NEW_TASKS)
    assert broker.control(ControlRequest("reload"))["ok"] is True
    assert 'runbroker_tasks_reloads_total{outcome="succeeded"} 1.0' in text()
    assert "runbroker_tasks_reload_last_success 1.0" in text()


def test_without_inotify_a_change_during_start_up_is_still_reloaded(
    make_broker: MakeBroker, tasks_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from daemon.broker.reload import inotify

    def unavailable() -> int:
        raise inotify.InotifyUnavailable("no inotify here")

    monkeypatch.setattr(inotify, "init", unavailable)
    broker = make_broker()
    _replace(tasks_file, NEW_TASKS)  # after the tasks were read, before the loop runs

    async def started() -> object:
        return start_watching(broker.reloader)

    assert asyncio.run(started()) is None
    assert broker.reloader.watch == "signal"
    assert broker.reloader.file_changed.is_set()  # the reload loop will reload it


class _Reloads:
    """A reload loop on ``broker`` and the tasks each of its reloads loaded."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.loaded: list[frozenset[str]] = []
        self.changed = asyncio.Event()
        broker.reloader.listeners.append(self._done)

    def _done(self, _changes: object) -> None:
        self.loaded.append(self.broker.tasks.names())
        self.changed.set()


async def test_a_burst_of_file_events_is_one_reload_of_the_last_version(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    reloads = _Reloads(broker)
    events = broker.reloader.file_changed
    frozen = lambda: 0.0  # noqa: E731  # the debounce's cap never reached
    looping = asyncio.create_task(
        reload_forever(broker.reloader, asyncio.Event(), debounce_s=1.0, monotonic=frozen)
    )
    try:
        _replace(tasks_file, TASKS + '[tasks.v1]\ncommand = ["true"]\n')
        events.set()
        for _ in range(20):  # the loop wakes and starts debouncing; more events arrive
            await asyncio.sleep(0)
            events.set()
        _replace(tasks_file, NEW_TASKS)  # a change during the debounce
        events.set()
        async with asyncio.timeout(10):
            await reloads.changed.wait()
    finally:
        looping.cancel()
        with pytest.raises(asyncio.CancelledError):
            await looping
    assert reloads.loaded == [frozenset({"keep", "edit", "fresh"})]  # one reload, the last file


async def test_a_directory_that_never_goes_quiet_is_reloaded_after_the_cap(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    reloads = _Reloads(broker)
    events = broker.reloader.file_changed
    ticks = iter(range(1000))

    def clock() -> float:  # half a second per look: the cap (DEBOUNCE_MAX_S) comes soon
        return next(ticks) * 0.5

    async def busy() -> None:
        while True:
            events.set()
            await asyncio.sleep(0)

    _replace(tasks_file, NEW_TASKS)
    looping = asyncio.create_task(
        reload_forever(broker.reloader, asyncio.Event(), debounce_s=60.0, monotonic=clock)
    )
    noise = asyncio.create_task(busy())
    try:
        async with asyncio.timeout(10):
            await reloads.changed.wait()
    finally:
        for task in (noise, looping):
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
    assert "fresh" in reloads.loaded[0]


def test_a_reload_request_that_raises_is_still_answered(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = make_broker()

    def broken(*_args: object) -> None:
        raise RuntimeError("replace_plans broke")

    monkeypatch.setattr(broker.ticker, "replace_plans", broken)
    answer = broker.control(ControlRequest("reload"))
    assert answer["ok"] is False
    assert answer["reason"] == "reload failed: RuntimeError: replace_plans broke"
