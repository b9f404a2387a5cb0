"""inotify through ctypes: libc's functions are found without starting a process."""

from __future__ import annotations

import os
import subprocess
from typing import Any

import pytest

from daemon.broker.reload import inotify


def test_libc_is_found_without_starting_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The watch starts before the daemon is ready: no ldconfig run on its way."""

    def no_process(*_args: Any, **_kwargs: Any) -> None:
        raise AssertionError("a process was started")

    monkeypatch.setattr(subprocess, "Popen", no_process)
    monkeypatch.setattr(inotify, "_libc", None)
    fd = inotify.init()
    os.close(fd)
