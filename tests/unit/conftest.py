"""Shared fixtures for the unit tier: short socket directories, quiet and capturable logs."""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

import pytest
import structlog
from structlog.testing import capture_logs

from daemon import settings as settings_module

# The repository's root, whatever the depth of the test module that reads its files.
REPO = Path(__file__).resolve().parents[2]

# Commands the tests run need only the usual binaries; nothing of the test run's environment.
JOB_ENV = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    """A 0700 directory under /tmp: unix socket paths must stay under ~107 bytes."""
    path = Path(tempfile.mkdtemp(prefix="rbu-", dir="/tmp"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No ``RUNBROKER_*`` variable of the test run's own and no Docker secret file: the
    settings read only what the test sets."""
    for name in list(os.environ):
        if name.upper().startswith("RUNBROKER_"):
            monkeypatch.delenv(name)
    monkeypatch.setattr(settings_module, "DOCKER_SECRET_PATH", tmp_path / "no-such-secret")


def _drop(_logger: Any, _method: str, _event: Any) -> Any:
    raise structlog.DropEvent


@pytest.fixture(autouse=True)
def _quiet_structlog() -> Iterator[None]:
    """structlog's default set-up prints every event; tests stream thousands of lines."""
    saved = structlog.get_config()
    structlog.configure(processors=[_drop], cache_logger_on_first_use=False)
    try:
        yield
    finally:
        structlog.configure(**saved)


@pytest.fixture
def logs() -> Iterator[list[MutableMapping[str, Any]]]:
    """Every structlog event of the test, as dicts (``event`` is the event name)."""
    with capture_logs() as captured:
        yield captured


async def wait_readable(fd: int, timeout_s: float = 10.0) -> None:
    """Wait until ``fd`` (e.g. a pidfd: the process has exited) is readable."""
    loop = asyncio.get_running_loop()
    ready: asyncio.Future[None] = loop.create_future()

    def on_ready() -> None:
        if not ready.done():
            ready.set_result(None)

    loop.add_reader(fd, on_ready)
    try:
        async with asyncio.timeout(timeout_s):
            await ready
    finally:
        loop.remove_reader(fd)
