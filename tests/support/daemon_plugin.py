"""The daemon fixtures every tier that starts ``runbroker run`` uses, written once: a work
directory, the backend to start daemons on, and ``start_daemon``. Loaded for the whole suite by
``pytest_plugins`` in tests/conftest.py; a tier changes where daemons run by overriding
``daemon_backend`` (the container tier starts them in containers)."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Unpack

import pytest

from tests.support.backends import Backend, DaemonHandle, get_backend
from tests.support.harness import StartOptions, Workdir


@pytest.fixture
def workdir() -> Iterator[Path]:
    """A short temporary directory (socket paths are limited to about 107 bytes)."""
    work = Workdir()
    # Another uid must reach the socket itself, so that its own mode is what refuses it.
    os.chmod(work.path, 0o755)  # noqa: S103
    try:
        yield work.path
    finally:
        work.cleanup()


@pytest.fixture
def daemon_backend() -> Backend:
    """The backend ``RUNBROKER_TEST_BACKEND`` names (a wrong name stops the run)."""
    try:
        return get_backend()
    except ValueError as exc:
        raise pytest.UsageError(str(exc)) from None


@pytest.fixture
def start_daemon(daemon_backend: Backend, workdir: Path) -> Iterator[Callable[..., DaemonHandle]]:
    """Start ``runbroker run`` as PID 1 on ``daemon_backend``; every daemon started is stopped
    at teardown."""
    started: list[DaemonHandle] = []

    def start(*command: str, **options: Unpack[StartOptions]) -> DaemonHandle:
        daemon = daemon_backend.start(workdir, command, **options)
        started.append(daemon)
        return daemon

    try:
        yield start
    finally:
        for daemon in started:
            daemon.stop()
