"""The socket's file and its peers: bound owner-only, never stolen from a live daemon.

Bound here rather than by ``asyncio.start_unix_server(path=...)``, which deletes whatever is at
the path, a live daemon's socket too. The directory may be writable by others (a sticky
``/tmp``), so nothing found there is trusted that is not a file of ours.
"""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import stat
from pathlib import Path

from daemon.log.logs import get_logger
from daemon.wire.peer import peer_uid

__all__ = ["SocketInUse", "bind_owner_only", "peer_uid"]

log = get_logger("runbroker.server")


class SocketInUse(Exception):
    """Another daemon owns the socket, or the path is not ours to replace."""


def bind_owner_only(path: Path) -> tuple[socket.socket, int]:
    """Bind a listening socket at ``path``, and return it with the held lock's descriptor."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock_fd = _open_lock(Path(f"{path}.lock"))
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        raise SocketInUse(
            f"another runbroker daemon owns {path} (it holds the lock {path}.lock)"
        ) from None
    try:
        _clear_stale(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            os.fchmod(sock.fileno(), 0o600)
            sock.bind(os.fspath(path))
            sock.listen(128)
            sock.setblocking(False)
        except BaseException:
            sock.close()
            raise
    except BaseException:
        os.close(lock_fd)
        raise
    return sock, lock_fd


def _open_lock(lock: Path) -> int:
    """The lock file, ours: never through a symlink, never another user's or a hard link."""
    flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC | os.O_NOFOLLOW | os.O_NONBLOCK
    try:
        fd = os.open(lock, flags, 0o600)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SocketInUse(f"{lock} is a symlink; refusing to follow it") from None
        if exc.errno == errno.EACCES:  # e.g. another user's file in a sticky directory
            raise SocketInUse(f"cannot open the lock file {lock}: {_owner_text(lock)}") from None
        raise
    info = os.fstat(fd)
    problem = ""
    if not stat.S_ISREG(info.st_mode):
        problem = "is not a regular file"
    elif info.st_uid != os.geteuid():
        problem = f"belongs to uid {info.st_uid}, not to this daemon's uid {os.geteuid()}"
    elif info.st_nlink != 1:
        problem = f"has {info.st_nlink} links"
    if problem:
        os.close(fd)
        raise SocketInUse(f"the lock file {lock} {problem}; refusing to use it (remove it)")
    return fd


def _owner_text(path: Path) -> str:
    try:
        return f"it belongs to uid {os.lstat(path).st_uid} (permission denied)"
    except OSError as exc:
        return exc.strerror or str(exc)


def _clear_stale(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise SocketInUse(f"{path} exists and is not a socket; refusing to replace it")
    if info.st_uid != os.geteuid():
        raise SocketInUse(
            f"{path} belongs to uid {info.st_uid}, not to this daemon's uid {os.geteuid()}; "
            "refusing to use or replace it"
        )
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(os.fspath(path))
    except ConnectionRefusedError:
        os.unlink(path)  # stale: nobody listens
        log.info("socket.stale_replaced", path=str(path))
        return
    except FileNotFoundError:
        return
    except PermissionError:
        raise SocketInUse(
            f"{path} belongs to another user; refusing to replace it (permission denied)"
        ) from None
    except OSError as exc:
        if exc.errno in (errno.EAGAIN, errno.ETIMEDOUT):
            raise SocketInUse(f"a live daemon is listening on {path}") from None
        raise
    finally:
        probe.close()
    raise SocketInUse(f"a live daemon is listening on {path}")
