"""The tasks file's watch (inotify on its directory): an edit in place, a rename over the file,
an atomic replace and a Kubernetes ConfigMap's ``..data`` symlink swap are all seen. Real files
in a temporary directory; each test waits for the change on an event, with a deadline."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from daemon.reload import inotify
from daemon.reload.watcher import TasksFileWatcher

TASKS = '[tasks.a]\ncommand = ["true"]\n'


@pytest.fixture
async def changes() -> AsyncIterator[Callable[[Path], asyncio.Event]]:
    watchers: list[TasksFileWatcher] = []

    def watch(path: Path) -> asyncio.Event:
        changed = asyncio.Event()
        watcher = TasksFileWatcher(path, changed.set)
        watcher.start(asyncio.get_running_loop())
        watchers.append(watcher)
        return changed

    yield watch
    for watcher in watchers:
        watcher.close()


async def _seen(changed: asyncio.Event) -> None:
    async with asyncio.timeout(5):
        await changed.wait()


async def test_an_edit_in_place_is_seen(
    tmp_path: Path, changes: Callable[[Path], asyncio.Event]
) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(TASKS)
    changed = changes(path)
    with path.open("a") as file:
        file.write("# edited\n")
    await _seen(changed)


async def test_a_rename_over_the_file_is_seen(
    tmp_path: Path, changes: Callable[[Path], asyncio.Event]
) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(TASKS)
    changed = changes(path)
    staged = tmp_path / ".tasks.toml.swp"
    staged.write_text(TASKS + "# new\n")
    staged.rename(path)
    await _seen(changed)


async def test_an_atomic_replace_from_another_directory_is_seen(
    tmp_path: Path, changes: Callable[[Path], asyncio.Event]
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    path = config / "tasks.toml"
    path.write_text(TASKS)
    changed = changes(path)
    staged = tmp_path / "tasks.toml"
    staged.write_text(TASKS + "# new\n")
    os.replace(staged, path)
    await _seen(changed)


def _configmap_version(directory: Path, name: str, text: str) -> None:
    """What the kubelet does on a ConfigMap update: a new timestamped directory, a
    ``..data_tmp`` symlink to it renamed over ``..data``, the old directory removed."""
    version = directory / name
    version.mkdir()
    (version / "tasks.toml").write_text(text)
    old = os.readlink(directory / "..data") if (directory / "..data").is_symlink() else None
    (directory / "..data_tmp").symlink_to(name)
    os.rename(directory / "..data_tmp", directory / "..data")
    if old is not None:
        for child in (directory / old).iterdir():
            child.unlink()
        (directory / old).rmdir()


async def test_a_configmap_symlink_swap_is_seen_each_time(
    tmp_path: Path, changes: Callable[[Path], asyncio.Event]
) -> None:
    _configmap_version(tmp_path, "..2026_03_02_08_55_00.1", TASKS)
    path = tmp_path / "tasks.toml"
    path.symlink_to("..data/tasks.toml")
    changed = changes(path)
    for second in range(1, 3):
        _configmap_version(tmp_path, f"..2026_03_02_08_56_0{second}.1", TASKS + f"# v{second}\n")
        await _seen(changed)
        changed.clear()
    assert path.read_text().endswith("# v2\n")


async def test_an_edit_of_a_symlinks_target_elsewhere_is_seen(
    tmp_path: Path, changes: Callable[[Path], asyncio.Event]
) -> None:
    elsewhere = tmp_path / "app"
    elsewhere.mkdir()
    target = elsewhere / "real.toml"
    target.write_text(TASKS)
    home = tmp_path / "etc"
    home.mkdir()
    (home / "tasks.toml").symlink_to(target)
    changed = changes(home / "tasks.toml")
    target.write_text(TASKS + "# edited\n")
    await _seen(changed)


async def test_a_missing_directory_cannot_be_watched(tmp_path: Path) -> None:
    watcher = TasksFileWatcher(tmp_path / "nowhere" / "tasks.toml", lambda: None)
    with pytest.raises(OSError, match="inotify_add_watch"):
        watcher.start(asyncio.get_running_loop())
    watcher.close()  # closing twice, or after a failed start, is harmless


def test_event_records_are_parsed() -> None:
    name = b"tasks.toml\0\0"
    record = inotify._HEADER.pack(3, inotify.IN_MOVED_TO, 7, len(name)) + name
    bare = inotify._HEADER.pack(3, inotify.IN_IGNORED, 0, 0)
    assert list(inotify.events(record + bare)) == [
        (3, inotify.IN_MOVED_TO, "tasks.toml"),
        (3, inotify.IN_IGNORED, ""),
    ]
