"""What wakes a reload (daemon/broker/reload/waking.py): SIGHUP, a file event, a request; a burst
of events is one reload, a watch lost is re-armed, and the loop outlives a reload that raised."""

from __future__ import annotations

import asyncio
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from daemon.broker.app import Broker
from daemon.broker.reload.waking import reload_forever, start_watching
from daemon.face.status_text import render_status
from daemon.observe.status import health_answer, status_answer
from tests.support.eventually import eventually_async
from tests.support.looping import looping
from tests.unit.broker.reload.conftest import NEW_TASKS, TASKS, MakeBroker, replace_file


async def test_sighup_and_a_file_change_wake_a_reload(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()
    reloaded: asyncio.Queue[str] = asyncio.Queue()
    reloader = broker.reloader
    reloader.listeners.add(lambda _changes: reloaded.put_nowait(reloader.last_source))
    sighup = asyncio.Event()
    watcher = start_watching(reloader)
    try:
        async with looping(reload_forever(reloader, sighup, debounce_s=0.01)), asyncio.timeout(10):
            sighup.set()
            assert await reloaded.get() == "signal"
            replace_file(tasks_file, NEW_TASKS)
            assert await reloaded.get() == "file"
            assert "fresh" in broker.tasks
    finally:
        if watcher is not None:
            watcher.close()
    assert broker.reloader.watch == "inotify"


async def test_a_change_before_the_watch_began_is_not_missed(
    make_broker: MakeBroker, tasks_file: Path
) -> None:
    broker = make_broker()  # the tasks were read here
    replace_file(tasks_file, NEW_TASKS)  # ... and the file changed before the watch was set up
    watcher = start_watching(broker.reloader)
    assert watcher is not None
    watcher.close()
    assert broker.reloader.file_changed.is_set()
    outcome = await broker.reloader.reload("file", only_if_changed=True)
    assert outcome is not None
    assert outcome.ok


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
    reloader.listeners.add(lambda _changes: reloaded.set())
    sighup = asyncio.Event()
    async with looping(reload_forever(reloader, sighup, debounce_s=0.01)), asyncio.timeout(10):
        sighup.set()
        await eventually_async(
            lambda: [line for line in logs if line["event"] == "tasks.reload_crashed"],
            "the crashed reload's log line",
        )
        sighup.set()
        await reloaded.wait()
    assert calls == ["signal", "signal"]


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
        replace_file(tasks_file, TASKS)
        assert (await broker.reloader.answer())["ok"] is True
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


def test_without_inotify_a_change_during_start_up_is_still_reloaded(
    make_broker: MakeBroker, tasks_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from daemon.broker.reload import inotify

    def unavailable() -> int:
        raise inotify.InotifyUnavailable("no inotify here")

    monkeypatch.setattr(inotify, "init", unavailable)
    broker = make_broker()
    replace_file(tasks_file, NEW_TASKS)  # after the tasks were read, before the loop runs

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
        broker.reloader.listeners.add(self._done)

    def _done(self, _changes: object) -> None:
        self.loaded.append(self.broker.tasks.names())
        self.changed.set()


@pytest.fixture
def reloads(make_broker: MakeBroker) -> _Reloads:
    return _Reloads(make_broker())


async def test_a_burst_of_file_events_is_one_reload_of_the_last_version(
    reloads: _Reloads, tasks_file: Path
) -> None:
    broker = reloads.broker
    events = broker.reloader.file_changed
    frozen = lambda: 0.0  # noqa: E731  # the debounce's cap never reached
    async with looping(
        reload_forever(broker.reloader, asyncio.Event(), debounce_s=1.0, monotonic=frozen)
    ):
        replace_file(tasks_file, TASKS + '[tasks.v1]\ncommand = ["true"]\n')
        events.set()
        for _ in range(20):  # the loop wakes and starts debouncing; more events arrive
            await asyncio.sleep(0)
            events.set()
        replace_file(tasks_file, NEW_TASKS)  # a change during the debounce
        events.set()
        async with asyncio.timeout(10):
            await reloads.changed.wait()
    assert reloads.loaded == [frozenset({"keep", "edit", "fresh"})]  # one reload, the last file


async def test_a_directory_that_never_goes_quiet_is_reloaded_after_the_cap(
    reloads: _Reloads, tasks_file: Path
) -> None:
    broker = reloads.broker
    events = broker.reloader.file_changed
    ticks = iter(range(1000))

    def clock() -> float:  # half a second per look: the cap (DEBOUNCE_MAX_S) comes soon
        return next(ticks) * 0.5

    async def busy() -> None:
        while True:
            events.set()
            await asyncio.sleep(0)

    replace_file(tasks_file, NEW_TASKS)
    forever = reload_forever(broker.reloader, asyncio.Event(), debounce_s=60.0, monotonic=clock)
    async with looping(forever), looping(busy()), asyncio.timeout(10):
        await reloads.changed.wait()
    assert "fresh" in reloads.loaded[0]


async def test_a_reload_request_that_raises_is_still_answered(
    make_broker: MakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    broker = make_broker()

    def broken(*_args: object) -> None:
        raise RuntimeError("replace_plans broke")

    monkeypatch.setattr(broker.ticker, "replace_plans", broken)
    answer = await broker.reloader.answer()
    assert answer["ok"] is False
    assert answer["reason"] == "reload failed: RuntimeError: replace_plans broke"
