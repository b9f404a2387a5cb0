"""The tasks file's watch (inotify on its directory): an edit in place, a rename over the file,
an atomic replace and a Kubernetes ConfigMap's ``..data`` symlink swap are all seen. Real files
in a temporary directory; each test waits for the change on an event, with a deadline."""

from __future__ import annotations

import asyncio
import fcntl
import os
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from daemon.broker.reload import inotify
from daemon.broker.reload.watcher import TasksFileWatcher

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


def _edited_in_place(path: Path) -> None:
    with path.open("a") as file:
        file.write("# edited\n")


def _renamed_over(path: Path) -> None:
    staged = path.with_name(".tasks.toml.swp")  # an editor's swap file, beside it
    staged.write_text(TASKS + "# new\n")
    staged.rename(path)


def _replaced_from_another_directory(path: Path) -> None:
    staged = path.parent.parent / "tasks.toml"
    staged.write_text(TASKS + "# new\n")
    os.replace(staged, path)


@pytest.mark.parametrize(
    "change", [_edited_in_place, _renamed_over, _replaced_from_another_directory]
)
async def test_each_way_of_changing_the_file_is_seen(
    tmp_path: Path, changes: Callable[[Path], asyncio.Event], change: Callable[[Path], None]
) -> None:
    config = tmp_path / "config"
    config.mkdir()
    path = config / "tasks.toml"
    path.write_text(TASKS)
    changed = changes(path)
    change(path)
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


async def test_a_swapped_directory_is_watched_again(
    tmp_path: Path, changes: Callable[[Path], asyncio.Event]
) -> None:
    home = tmp_path / "etc"
    home.mkdir()
    (home / "tasks.toml").write_text(TASKS)
    changed = changes(home / "tasks.toml")
    staged = tmp_path / "etc.new"
    staged.mkdir()
    (staged / "tasks.toml").write_text(TASKS + "# new\n")
    home.rename(tmp_path / "etc.old")  # the watched inode moves away (IN_MOVE_SELF) ...
    staged.rename(home)  # ... and another directory takes its name
    await _seen(changed)
    changed.clear()
    (home / "tasks.toml").write_text(TASKS + "# edited in the new directory\n")
    await _seen(changed)  # the watch follows the name, not the old inode


async def test_a_deleted_directory_is_a_lost_watch_until_a_resync(tmp_path: Path) -> None:
    home = tmp_path / "etc"
    home.mkdir()
    path = home / "tasks.toml"
    path.write_text(TASKS)
    changed = asyncio.Event()
    states: list[bool] = []
    lost = asyncio.Event()

    def state(watching: bool) -> None:
        states.append(watching)
        if not watching:
            lost.set()

    watcher = TasksFileWatcher(path, changed.set, state)
    watcher.start(asyncio.get_running_loop())
    try:
        path.unlink()
        home.rmdir()
        await _seen(lost)
        home.mkdir()
        path.write_text(TASKS)
        assert watcher.resync() is True  # what SIGHUP and `runbroker reload` call
        assert states[-1] is True
        changed.clear()
        path.write_text(TASKS + "# edited after the directory came back\n")
        await _seen(changed)
    finally:
        watcher.close()


class _RecordingLoop:
    """The two calls a watcher makes of its loop, recorded; events are read by the test."""

    def __init__(self) -> None:
        self.readers: dict[int, object] = {}

    def add_reader(self, fd: int, callback: object) -> None:
        self.readers[fd] = callback

    def remove_reader(self, fd: int) -> bool:
        return self.readers.pop(fd, None) is not None


def _watch_by_hand(path: Path) -> tuple[TasksFileWatcher, list[None], _RecordingLoop]:
    calls: list[None] = []
    loop = _RecordingLoop()
    watcher = TasksFileWatcher(path, lambda: calls.append(None))
    watcher.start(loop)  # type: ignore[arg-type]  # only add_reader and remove_reader
    return watcher, calls, loop


def test_events_for_other_files_of_the_directory_are_ignored(tmp_path: Path) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(TASKS)
    watcher, calls, _loop = _watch_by_hand(path)
    try:
        (tmp_path / "other.toml").write_text(TASKS)  # queued by the kernel at once
        (tmp_path / "other.toml").rename(tmp_path / "third.toml")
        watcher._readable()
        assert calls == []
        path.write_text(TASKS + "# edited\n")
        watcher._readable()
        assert calls == [None]
    finally:
        watcher.close()


def test_the_configmap_data_symlink_swap_itself_is_what_is_seen(tmp_path: Path) -> None:
    _configmap_version(tmp_path, "..2026_03_02_08_55_00.1", TASKS)
    path = tmp_path / "tasks.toml"
    path.symlink_to("..data/tasks.toml")
    watcher, calls, _loop = _watch_by_hand(path)
    try:
        # The kubelet's swap before it removes the old version directory: no event names
        # tasks.toml in a watched directory, only ``..data`` does.
        version = tmp_path / "..2026_03_02_08_56_00.1"
        version.mkdir()
        (version / "tasks.toml").write_text(TASKS + "# v2\n")
        (tmp_path / "..data_tmp").symlink_to(version.name)
        watcher._readable()
        assert calls == []
        os.rename(tmp_path / "..data_tmp", tmp_path / "..data")
        watcher._readable()
        assert calls == [None]
    finally:
        watcher.close()


def test_close_removes_the_reader_and_closes_the_descriptor(tmp_path: Path) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text(TASKS)
    watcher, _calls, loop = _watch_by_hand(path)
    (fd,) = loop.readers
    assert fcntl.fcntl(fd, fcntl.F_GETFD) & fcntl.FD_CLOEXEC  # not inherited by jobs
    watcher.close()
    assert loop.readers == {}
    with pytest.raises(OSError, match="Bad file descriptor"):
        os.fstat(fd)
