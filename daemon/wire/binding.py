"""The socket's file and its peers: bound owner-only, never stolen from a live daemon.

The socket is bound here, not by ``asyncio.start_unix_server(path=...)`` (which deletes whatever
is at the path, a live daemon's socket too): an flock beside it serialises daemons, a live socket
is never stolen, a stale one is replaced, and a path that is not a socket is never deleted. The
mode is 0600 before ``bind`` so there is no window where it is wider. Peers whose uid is neither
root nor ours are refused (SO_PEERCRED, ``peer_uid``).
"""

from __future__ import annotations

import _socket
import errno
import fcntl
import os
import socket
import stat
import struct
from pathlib import Path

from daemon.observe.logs import get_logger

log = get_logger("runbroker.server")

_PEERCRED = struct.Struct("3i")


class SocketInUse(Exception):
    """Another daemon owns the socket, or the path is not ours to replace."""


def peer_uid(sock: socket.socket) -> int:
    """The uid of the peer of the connected unix socket ``sock`` (SO_PEERCRED).

    uvloop's transport hands out a stand-in whose every method builds a full ``socket.socket``
    from the descriptor (three syscalls to learn what it is); a bare ``_socket.socket`` told
    what it is, then detached, asks only the one question."""
    probe = _socket.socket(socket.AF_UNIX, socket.SOCK_STREAM, 0, sock.fileno())
    try:
        raw = probe.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    finally:
        probe.detach()  # the descriptor stays the transport's
    _pid, uid, _gid = _PEERCRED.unpack(raw)
    return int(uid)


def bind_owner_only(path: Path) -> tuple[socket.socket, int]:
    """Bind a listening socket at ``path``; returns it and the held lock fd."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    lock_fd = os.open(f"{path}.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(lock_fd)
        raise SocketInUse(f"another runbroker daemon owns {path}") from None
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


def _clear_stale(path: Path) -> None:
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise SocketInUse(f"{path} exists and is not a socket; refusing to replace it")
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
