"""The watchdog process: it SIGKILLs a group whose deadline passes without a renewal, every
group it knows when the daemon's end of its socket closes, and it is started again (and told
everything again) when it dies."""

from __future__ import annotations

import asyncio
import errno
import os
import signal
import subprocess
import time
from collections.abc import AsyncIterator, Iterator, MutableMapping
from typing import Any

import pytest

from daemon.core.process.watchdog import Watchdog, watchdog_protects
from tests.support.eventually import eventually_async
from tests.unit.conftest import wait_readable

Groups = list[subprocess.Popen[bytes]]
Logs = list[MutableMapping[str, Any]]


@pytest.fixture
def groups() -> Iterator[Groups]:
    """Jobs in process groups of their own, as the supervisor starts them."""
    started: Groups = []
    try:
        yield started
    finally:
        for job in started:
            if job.poll() is None:
                os.killpg(job.pid, signal.SIGKILL)
            job.wait()


def _start(groups: Groups) -> tuple[int, int]:
    """A TERM-ignoring job in a group of its own: its pid (and group id), and a pidfd."""
    job = subprocess.Popen(["sh", "-c", "trap '' TERM; exec sleep 60"], start_new_session=True)
    groups.append(job)
    return job.pid, os.pidfd_open(job.pid)


@pytest.fixture
async def watchdog() -> AsyncIterator[Watchdog]:
    dog = Watchdog()
    dog.start(asyncio.get_running_loop())
    try:
        yield dog
    finally:
        await dog.close()


async def test_a_group_is_killed_when_its_deadline_passes_without_renewal(
    watchdog: Watchdog, groups: Groups, logs: Logs
) -> None:
    renewed_pid, renewed_fd = _start(groups)
    overdue_pid, overdue_fd = _start(groups)
    watchdog.watch(renewed_pid, "r-renewed")
    watchdog.watch(overdue_pid, "r-overdue")
    watchdog.deadline("r-renewed", time.monotonic() + 0.5)
    watchdog.deadline("r-renewed", time.monotonic() + 600)  # a renewal moves it on
    watchdog.deadline("r-overdue", time.monotonic() + 0.8)
    await wait_readable(overdue_fd)
    assert groups[1].wait() == -signal.SIGKILL
    assert groups[0].poll() is None, "a renewed deadline was kept"
    await eventually_async(
        lambda: [line for line in logs if line["event"] == "job.watchdog_killed"],
        "the kill to be reported",
    )
    assert [(line["run_id"], line["pgid"]) for line in logs if "pgid" in line] == [
        ("r-overdue", overdue_pid)
    ]
    os.close(renewed_fd)
    os.close(overdue_fd)


async def test_a_forgotten_deadline_kills_nothing(watchdog: Watchdog, groups: Groups) -> None:
    kept_pid, kept_fd = _start(groups)
    clock_pid, clock_fd = _start(groups)
    watchdog.watch(kept_pid, "r-recorded")
    watchdog.watch(clock_pid, "r-clock")
    watchdog.deadline("r-recorded", time.monotonic() + 0.5)
    watchdog.forget("r-recorded")  # its record was written: it is not guarded any more
    watchdog.deadline("r-clock", time.monotonic() + 0.8)
    await wait_readable(clock_fd)
    assert groups[0].poll() is None
    os.close(kept_fd)
    os.close(clock_fd)


async def test_every_group_it_knows_is_killed_when_the_daemon_ends(groups: Groups) -> None:
    dog = Watchdog()
    dog.start(asyncio.get_running_loop())
    pids_fds = [_start(groups) for _ in range(2)]
    for pid, _fd in pids_fds:
        dog.watch(pid, "")
    await dog.close()  # its end of file, as at the daemon's death
    for _pid, fd in pids_fds:
        await wait_readable(fd)
        os.close(fd)
    assert [job.wait() for job in groups] == [-signal.SIGKILL, -signal.SIGKILL]


async def test_a_dead_watchdog_is_started_again_and_told_everything(
    watchdog: Watchdog, groups: Groups, logs: Logs
) -> None:
    pid, fd = _start(groups)
    watchdog.watch(pid, "r-1")
    watchdog.deadline("r-1", time.monotonic() + 3600)
    first = watchdog.pid
    os.kill(first, signal.SIGKILL)
    await eventually_async(lambda: watchdog.pid != first, "the watchdog to be started again")
    assert [line["event"] for line in logs if line["event"].startswith("watchdog.")] == [
        "watchdog.lost",
        "watchdog.started",
    ]
    assert groups[0].poll() is None
    watchdog.deadline("r-1", time.monotonic() + 0.2)  # the new one knows the group
    await wait_readable(fd)
    os.close(fd)
    assert groups[0].wait() == -signal.SIGKILL


async def test_an_armed_watchdog_starts_with_the_first_group_told_the_deadlines_before_it(
    groups: Groups, logs: Logs
) -> None:
    dog = Watchdog()
    dog.arm(asyncio.get_running_loop())
    try:
        dog.deadline("r-1", time.monotonic() + 0.5)  # a lease's deadline, told before its job
        assert dog.pid == -1, "no process before a job"
        pid, fd = _start(groups)
        dog.watch(pid, "r-1")
        assert dog.pid > 0
        await wait_readable(fd)  # the deadline it was told before it ran
        os.close(fd)
        assert groups[0].wait() == -signal.SIGKILL
    finally:
        await dog.close()
    assert [line["event"] for line in logs if line["event"] == "watchdog.started"] == [
        "watchdog.started"
    ]


async def test_a_group_started_before_the_arming_starts_it_at_once(groups: Groups) -> None:
    dog = Watchdog()
    pid, fd = _start(groups)
    dog.watch(pid, "r-early")  # the executor ran a job before the guard armed the watchdog
    assert dog.pid == -1
    dog.arm(asyncio.get_running_loop())
    assert dog.pid > 0
    await dog.close()  # its end of file: it kills the group it was told of at its start
    await wait_readable(fd)
    os.close(fd)
    assert groups[0].wait() == -signal.SIGKILL


async def test_an_armed_watchdog_no_job_needed_is_never_started(logs: Logs) -> None:
    dog = Watchdog()
    dog.arm(asyncio.get_running_loop())
    dog.deadline("r-handler", time.monotonic() + 0.1)  # a handler's run: no group to kill
    dog.forget("r-handler")
    await dog.close()
    dog.watch(12345, "r-after")  # a group told after the close starts nothing
    assert dog.pid == -1
    assert not [line for line in logs if line["event"].startswith("watchdog.")]


async def test_a_start_that_fails_leaks_nothing_and_is_tried_again_while_groups_run(
    groups: Groups, logs: Logs, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_pipe2 = os.pipe2
    calls = 0

    def pipe2_failing_once_on_the_second(flags: int) -> tuple[int, int]:
        nonlocal calls
        calls += 1
        if calls == 2:
            raise OSError(errno.EMFILE, "Too many open files")
        return real_pipe2(flags)

    monkeypatch.setattr(os, "pipe2", pipe2_failing_once_on_the_second)
    open_before = len(os.listdir("/proc/self/fd"))
    dog = Watchdog()
    dog.arm(asyncio.get_running_loop())
    pid, fd = _start(groups)
    try:
        dog.watch(pid, "r-1")  # the first group: the start fails half-way
        assert dog.pid == -1
        assert len(os.listdir("/proc/self/fd")) == open_before + 1, "only the job's pidfd"
        await eventually_async(lambda: dog.pid > 0, "the watchdog to be started a second later")
        dog.deadline("r-1", time.monotonic() + 0.2)  # it knows the group of before
        await wait_readable(fd)
        assert groups[0].wait() == -signal.SIGKILL
    finally:
        os.close(fd)
        await dog.close()
    failed = [line for line in logs if line["event"] == "watchdog.not_started"]
    assert [(line["error"], line["retry_in_s"]) for line in failed] == [
        ("[Errno 24] Too many open files", 1.0)
    ]


@pytest.mark.parametrize(
    ("pid1", "database", "runs"),
    [(True, False, False), (True, True, True), (False, False, True), (False, True, True)],
)
def test_the_watchdog_runs_only_where_it_protects_something(
    pid1: bool, database: bool, runs: bool
) -> None:
    """As PID 1 the kernel ends every job with the daemon; a database's leases, or a daemon
    whose jobs would outlive it, need the watchdog."""
    assert watchdog_protects(pid1=pid1, database=database) is runs
