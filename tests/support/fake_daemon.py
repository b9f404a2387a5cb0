"""A fake daemon on a unix socket that records one request and sends set answer lines, and a
trigger of the thin client against it: what the client's and the command line's tests share."""

from __future__ import annotations

import io
import json
import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from daemon.wire import client
from daemon.wire.protocol import SubmitRequest

Answer = dict[str, Any] | bytes


QUEUED = {"event": "queued", "ok": True, "id": "r1", "position": 1, "task": "default"}


STARTED = {"event": "started", "ok": True, "id": "r1", "task": "default"}


def answer_line(answer: Answer) -> bytes:
    if isinstance(answer, bytes):
        return answer if answer.endswith(b"\n") else answer + b"\n"
    return json.dumps(answer).encode() + b"\n"


@contextmanager
def fake_daemon(path: Path, *answers: Answer, hold: bool = False) -> Iterator[list[Any]]:
    """Serve one connection: record its request, send ``answers``, then close (or, with
    ``hold``, keep the connection open until the test is over)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(10)
    requests: list[Any] = []
    done = threading.Event()

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
            requests.append(json.loads(data))
            for answer in answers:
                conn.sendall(answer_line(answer))
            if hold:
                done.wait(10)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield requests
    finally:
        done.set()
        thread.join(10)
        listener.close()


def trigger(
    path: Path, request: SubmitRequest | None = None, **options: Any
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = client.trigger(str(path), request or SubmitRequest(), out=out, err=err, **options)
    return code, out.getvalue(), err.getvalue()
