"""Fixtures for acceptance tests: real daemons as PID 1, clients through nsenter."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.harness import Daemon, Workdir

BACKEND = os.environ.get("RUNBROKER_TEST_BACKEND", "local")


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
def start_daemon(workdir: Path) -> Iterator[Callable[..., Daemon]]:
    """Start ``runbroker run`` (as PID 1); every daemon started is stopped at teardown."""
    started: list[Daemon] = []

    def start(*command: str, **kwargs: Any) -> Daemon:
        daemon = Daemon(workdir, command, **kwargs)
        started.append(daemon)
        return daemon

    if BACKEND != "local":
        raise pytest.UsageError(f"RUNBROKER_TEST_BACKEND={BACKEND!r} is not known")
    try:
        yield start
    finally:
        for daemon in started:
            daemon.stop()
