"""The socket file (daemon/server/binding.py): owner-only from ``bind``, a stale one replaced, a
live one or a path that is not a socket refused and kept, and removed at close."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from daemon.server.binding import SocketInUse, bind_owner_only
from tests.unit.server.serving import serving


@contextmanager
def _bound(path: Path) -> Iterator[socket.socket]:
    sock, lock_fd = bind_owner_only(path)
    try:
        yield sock
    finally:
        sock.close()
        os.close(lock_fd)


def _connects(path: Path) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            return False
    return True


def test_socket_is_0600_even_with_a_permissive_umask(short_dir: Path) -> None:
    path = short_dir / "sub" / "rb.sock"
    old_umask = os.umask(0)
    try:
        with _bound(path):
            info = os.lstat(path)
            assert stat.S_ISSOCK(info.st_mode)
            assert stat.S_IMODE(info.st_mode) == 0o600
            assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
            assert _connects(path)
    finally:
        os.umask(old_umask)


def test_a_stale_socket_is_replaced(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # bound, never listening: connecting is refused
    assert not _connects(path)
    with _bound(path):
        assert _connects(path)


def test_a_live_socket_is_refused_and_left_alone(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as live:
        live.bind(str(path))
        live.listen(1)
        inode = os.lstat(path).st_ino
        with pytest.raises(SocketInUse, match="live daemon"):
            bind_owner_only(path)
        assert os.lstat(path).st_ino == inode
        assert _connects(path)
    # The failed attempt released its lock: once the live one is stale, binding works.
    with _bound(path):
        assert _connects(path)


@pytest.mark.parametrize("kind", ["file", "directory", "symlink"])
def test_a_path_that_is_not_a_socket_is_refused_and_kept(short_dir: Path, kind: str) -> None:
    path = short_dir / "rb.sock"
    target = short_dir / "precious"
    if kind == "file":
        path.write_text("precious")
    elif kind == "directory":
        path.mkdir()
    else:
        target.write_text("precious")
        path.symlink_to(target)
    with pytest.raises(SocketInUse, match="not a socket"):
        bind_owner_only(path)
    if kind == "file":
        assert path.read_text() == "precious"
    elif kind == "directory":
        assert path.is_dir()
    else:
        assert path.is_symlink()
        assert target.read_text() == "precious"


def test_a_second_binder_is_blocked_by_the_lock(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    with _bound(path):
        inode = os.lstat(path).st_ino
        with pytest.raises(SocketInUse, match="owns"):
            bind_owner_only(path)
        assert os.lstat(path).st_ino == inode
        assert _connects(path)


async def test_close_removes_the_socket_and_frees_the_path(short_dir: Path) -> None:
    path = short_dir / "rb.sock"
    async with serving(path):
        assert _connects(path)
    assert not path.exists()
    with _bound(path):
        assert _connects(path)
