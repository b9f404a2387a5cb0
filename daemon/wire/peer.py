"""Who is at the other end of a connected unix socket (SO_PEERCRED), for both sides: the
daemon refuses clients of another uid than its own or root's, and the client believes only a
daemon of its own uid or root's. Standard library only (``_socket``): the thin client loads it.
"""

from __future__ import annotations

import _socket
import errno
import os
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    import socket

_PEERCRED_BYTES = 12  # pid, uid, gid: three native ints


def peer_uid(sock: socket.socket | _socket.socket) -> int:
    """The uid of the peer of the connected unix socket ``sock``.

    uvloop's stand-in socket builds a full ``socket.socket`` for every call (three syscalls), so
    a bare ``_socket.socket`` on the descriptor asks the one question and is detached."""
    probe = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM, 0, sock.fileno())
    try:
        raw = probe.getsockopt(_socket.SOL_SOCKET, _socket.SO_PEERCRED, _PEERCRED_BYTES)
    finally:
        probe.detach()  # the descriptor stays its owner's
    return int.from_bytes(raw[4:8], sys.byteorder, signed=True)


def trust_server(sock: _socket.socket) -> None:
    """The client's check of the daemon: its own uid or root's, else ``PermissionError``
    (someone else's socket, planted where the daemon's should be, in a directory others can
    write to: what it would answer is not to be believed)."""
    server_uid = peer_uid(sock)
    if server_uid not in (0, os.geteuid()):
        raise PermissionError(
            errno.EACCES, f"not trusting it: served by uid {server_uid}, neither this user nor root"
        )
