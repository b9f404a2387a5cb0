"""A broker over a tasks file, made for one test, and the tasks files it reloads: what the reload's
tests share."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from daemon.broker.app import Broker
from daemon.broker.signals import Signals
from daemon.settings import Settings, load_settings
from daemon.taskfile import build_registry

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


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    path = tmp_path / "tasks.toml"
    path.write_text(TASKS)
    return path


@pytest.fixture
def make_broker(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, tasks_file: Path, clean_env: None
) -> MakeBroker:
    monkeypatch.setenv("RUNBROKER_SOCKET", str(tmp_path / "rb.sock"))
    monkeypatch.setenv("RUNBROKER_INTERVAL", "off")

    def make(**env: str) -> Broker:
        for name, value in {"TASKS_FILE": str(tasks_file), **env}.items():
            monkeypatch.setenv(f"RUNBROKER_{name}", value)
        settings: Settings = load_settings()
        registry = build_registry((), settings.tasks_file, file_required=True)
        return Broker(settings, registry, Signals())

    return make


def replace_file(path: Path, text: str) -> None:
    """An atomic replace, as an editor or a deployment tool does it."""
    staged = path.with_name(path.name + ".new")
    staged.write_text(text)
    os.replace(staged, path)
