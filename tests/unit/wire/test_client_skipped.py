"""``trigger`` of a task its busy policy skipped: exit 3 with the reason, not a usage error
(2) nor a retry (75); a run replaced or missed after it was queued is a failure (1)."""

from __future__ import annotations

import io
import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest

from daemon.exits import EXIT_FAILED, EXIT_SKIPPED
from daemon.wire import client
from daemon.wire.protocol import SubmitRequest
from daemon.wire.reasons import (
    CODE_MISSED,
    CODE_REPLACED,
    CODE_SKIPPED,
    REASON_MISSED,
    REASON_REPLACED,
    busy_skipped_reason,
)

QUEUED = {"event": "queued", "ok": True, "id": "r1", "position": 1, "task": "report"}


def _answered(path: Path, *answers: dict[str, Any]) -> tuple[int, str]:
    """``trigger report`` against a daemon that answers ``answers``: its exit code and stderr."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)
    listener.settimeout(10)

    def serve() -> None:
        conn, _ = listener.accept()
        with conn:
            data = b""
            while not data.endswith(b"\n"):
                data += conn.recv(65536)
            for answer in answers:
                conn.sendall(json.dumps(answer).encode() + b"\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    out, err = io.StringIO(), io.StringIO()
    try:
        code = client.trigger(str(path), SubmitRequest("report"), out=out, err=err)
    finally:
        thread.join(10)
        listener.close()
    return code, err.getvalue()


def test_a_trigger_its_task_skipped_exits_3_saying_why(short_dir: Path) -> None:
    reason = busy_skipped_reason("report")
    done = {"event": "done", "ok": False, "reason": reason, "code": CODE_SKIPPED}
    code, err = _answered(short_dir / "rb.sock", done)
    assert code == EXIT_SKIPPED == 3
    assert reason in err


@pytest.mark.parametrize(
    ("reason", "code"), [(REASON_REPLACED, CODE_REPLACED), (REASON_MISSED, CODE_MISSED)]
)
def test_a_queued_run_replaced_or_missed_is_a_failure(
    short_dir: Path, reason: str, code: str
) -> None:
    done = {"event": "done", "ok": False, "id": "r1", "reason": reason, "code": code}
    assert _answered(short_dir / "rb.sock", QUEUED, done)[0] == EXIT_FAILED
