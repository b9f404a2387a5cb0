"""A socket directory that other users can write to (a sticky /tmp): what another user plants
there is never trusted. The daemon never follows a planted lock-file symlink, refuses another
user's lock file or socket with a clear error, and the client believes only a daemon of its
own uid or root (SO_PEERCRED). The other user is ``nobody``, through ``setpriv``."""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.eventually import eventually
from tests.support.harness import RUNBROKER

NOBODY = ["setpriv", "--reuid=nobody", "--regid=nogroup", "--clear-groups"]
NOBODY_UID = pwd.getpwnam("nobody").pw_uid

# Listens where the daemon's socket should be and answers like a daemon whose run succeeded.
FAKE_DAEMON = """
import json, socket, sys
def send_all(conn):
    for event in (
        {"event": "queued", "ok": True, "id": "rfake000-1", "position": 1},
        {"event": "output", "ok": True, "id": "rfake000-1", "stream": "stdout", "line": "fake"},
        {"event": "done", "ok": True, "id": "rfake000-1"},
        {"event": "health", "ok": True},
    ):
        conn.sendall(json.dumps(event).encode() + b"\\n")
server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
server.bind(sys.argv[1])
server.listen(4)
print("listening", flush=True)
while True:
    conn, _ = server.accept()
    try:
        send_all(conn)
    except OSError:  # a client that hung up
        pass
    conn.close()
"""


@pytest.fixture
def sticky_dir() -> Iterator[Path]:
    """A directory like /tmp: anyone may create files in it, only their owner remove them."""
    path = Path(tempfile.mkdtemp(prefix="rbt-", dir="/tmp"))
    os.chmod(path, 0o1777)  # noqa: S103
    try:
        yield path
    finally:
        subprocess.run(["rm", "-rf", str(path)], check=False)


def _as_nobody(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*NOBODY, *argv], capture_output=True, text=True, check=False)


def _start(socket_path: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": os.environ["PATH"], "RUNBROKER_SOCKET": str(socket_path)}
    env["RUNBROKER_INTERVAL"] = "off"
    return subprocess.run(
        [RUNBROKER, "run", "--", "true"], env=env, capture_output=True, text=True, timeout=60
    )


def test_a_planted_lock_symlink_is_not_followed(sticky_dir: Path) -> None:
    target = sticky_dir / "chosen-by-nobody"
    assert _as_nobody("ln", "-s", str(target), str(sticky_dir / "rb.sock.lock")).returncode == 0
    started = _start(sticky_dir / "rb.sock")
    assert started.returncode == 1
    # The kernel's protected_symlinks may refuse it first (EACCES): either way, said clearly.
    said = (f"rb.sock.lock: it belongs to uid {NOBODY_UID}", "rb.sock.lock is a symlink")
    assert any(text in started.stderr for text in said), started.stderr
    assert not target.exists()  # root created nothing where nobody chose


def test_a_lock_symlink_is_not_followed_in_a_directory_of_our_own() -> None:
    own = Path(tempfile.mkdtemp(prefix="rbo-", dir="/tmp"))
    try:
        target = own / "elsewhere"
        (own / "rb.sock.lock").symlink_to(target)
        started = _start(own / "rb.sock")
        assert started.returncode == 1
        assert "rb.sock.lock is a symlink; refusing to follow it" in started.stderr
        assert not target.exists()
    finally:
        subprocess.run(["rm", "-rf", str(own)], check=False)


def test_another_users_lock_file_held_or_not_is_a_clear_error(sticky_dir: Path) -> None:
    lock = sticky_dir / "rb.sock.lock"
    holder = subprocess.Popen(
        [*NOBODY, "flock", str(lock), "sleep", "60"], stdin=subprocess.DEVNULL
    )
    try:
        eventually(lock.exists, "nobody's lock file")
        started = _start(sticky_dir / "rb.sock")
    finally:
        holder.kill()
        holder.wait()
    assert started.returncode == 1
    assert f"belongs to uid {NOBODY_UID}" in started.stderr, started.stderr
    assert str(lock) in started.stderr


def test_another_users_socket_is_neither_used_nor_believed(sticky_dir: Path) -> None:
    socket_path = sticky_dir / "rb.sock"
    fake = subprocess.Popen(
        [*NOBODY, sys.executable, "-c", FAKE_DAEMON, str(socket_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert fake.stdout is not None
        assert fake.stdout.readline() == "listening\n"
        env = {"PATH": os.environ["PATH"], "RUNBROKER_SOCKET": str(socket_path)}
        for command in (["trigger"], ["health"]):
            client = subprocess.run(
                [RUNBROKER, *command], env=env, capture_output=True, text=True, timeout=30
            )
            expected = 69 if command == ["trigger"] else 1  # health: unreachable is unhealthy
            assert client.returncode == expected, client
            assert "fake" not in client.stdout
            said = f"{socket_path}: not trusting it: served by uid {NOBODY_UID}, neither this user"
            assert said in client.stderr
        started = _start(socket_path)
        assert started.returncode == 1
        assert f"belongs to uid {NOBODY_UID}" in started.stderr
    finally:
        fake.kill()
        fake.wait()
