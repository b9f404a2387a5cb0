"""Fixtures for acceptance tests: real daemons as PID 1, clients through nsenter."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.backends import DaemonHandle, get_backend
from tests.support.harness import Workdir
from tests.support.pgsupport import fresh_database


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/acceptance/" in str(item.path):
            item.add_marker(pytest.mark.acceptance)


@pytest.fixture
def workdir() -> Iterator[Path]:
    work = Workdir()
    # Another uid must reach the socket itself, so that its own mode is what refuses it.
    os.chmod(work.path, 0o755)  # noqa: S103
    try:
        yield work.path
    finally:
        work.cleanup()


@pytest.fixture
def start_daemon(workdir: Path) -> Iterator[Callable[..., DaemonHandle]]:
    """Start ``runbroker run`` (as PID 1) on the backend ``RUNBROKER_TEST_BACKEND`` names;
    every daemon started is stopped at teardown."""
    try:
        backend = get_backend()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None
    started: list[DaemonHandle] = []

    def start(*command: str, **kwargs: Any) -> DaemonHandle:
        daemon = backend.start(workdir, command, **kwargs)
        started.append(daemon)
        return daemon

    try:
        yield start
    finally:
        for daemon in started:
            daemon.stop()


@pytest.fixture
def dsn() -> Iterator[str]:
    """A fresh, migrated PostgreSQL database for this test."""
    with fresh_database() as url:
        yield url
