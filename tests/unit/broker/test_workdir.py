"""The daemon works in ``/`` and starts its commands where it was started."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from daemon.broker.workdir import leave_start_directory
from daemon.core.process import ChildSupervisor, SpawnError
from daemon.settings import load_settings
from tests.unit.conftest import JOB_ENV


def test_leaving_the_start_directory_keeps_relative_imports_where_they_were(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["", "lib", "/usr/lib/python3"])
    assert leave_start_directory() == str(tmp_path)
    assert os.getcwd() == "/"
    assert sys.path == [str(tmp_path), str(tmp_path / "lib"), "/usr/lib/python3"]


@pytest.mark.usefixtures("clean_env")
def test_relative_file_settings_are_made_absolute_at_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RUNBROKER_TASKS_FILE", "etc/tasks.toml")
    monkeypatch.setenv("RUNBROKER_LOCK_DIR", "locks")
    settings = load_settings()
    assert settings.tasks_file == tmp_path / "etc" / "tasks.toml"
    assert settings.lock_dir == tmp_path / "locks"


async def _pwd(supervisor: ChildSupervisor) -> list[str]:
    lines: list[str] = []
    async with asyncio.timeout(20):
        await supervisor.run_command(
            ["pwd"], JOB_ENV, lambda _stream, new: lines.extend(new), grace_s=lambda: 1.0
        )
    return lines


async def test_commands_start_in_the_job_directory_and_the_daemon_stays_in_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir("/")
    assert await _pwd(ChildSupervisor(job_dir=str(tmp_path))) == [str(tmp_path)]
    assert os.getcwd() == "/"
    gone = tmp_path / "gone"
    with pytest.raises(SpawnError) as refused:
        await _pwd(ChildSupervisor(job_dir=str(gone)))
    assert str(refused.value) == (
        f"cannot start 'pwd': working directory {gone}: No such file or directory"
    )
    assert os.getcwd() == "/"
