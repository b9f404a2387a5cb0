"""Reading the tasks file (daemon/taskfile/tasks_file.py): a regular file only, and only up to
its bound."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from daemon.taskfile import TASKS_FILE_MAX_BYTES, TaskConfigError, build_registry, read_tasks_file


def test_only_a_regular_file_is_read_and_only_up_to_the_bound(tmp_path: Path) -> None:
    """A FIFO (no writer: a plain read would block forever), a device, a file over the bound:
    each refused at once, before a byte is read."""
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    with pytest.raises(TaskConfigError, match=r"not a regular file \(a FIFO\)"):
        build_registry((), fifo)
    with pytest.raises(TaskConfigError, match=r"not a regular file \(a character device\)"):
        read_tasks_file(Path("/dev/zero"))
    big = tmp_path / "big.toml"
    big.write_bytes(b"#" * TASKS_FILE_MAX_BYTES)
    assert len(read_tasks_file(big)) == TASKS_FILE_MAX_BYTES
    big.write_bytes(b"#" * (TASKS_FILE_MAX_BYTES + 1))
    with pytest.raises(TaskConfigError, match="larger than 1024 KiB"):
        build_registry((), big)
    with pytest.raises(FileNotFoundError):
        read_tasks_file(tmp_path / "absent.toml")
