"""``runbroker status`` says what the notifications did, and which task is silent."""

from __future__ import annotations

from typing import Any

from daemon.face.status_text import render_status

NOTIFY: dict[str, Any] = {
    "tasks": 2,
    "capacity": 100,
    "pending": 1,
    "dropped": 3,
    "retries": 7,
    "kinds": {
        "webhook": {"sent": 5, "failed": 2},
        "ping": {"sent": 9, "failed": 0},
        "command": {"sent": 0, "failed": 0},
    },
    "last_failure": {
        "task": "backup",
        "kind": "webhook",
        "event": "failure",
        "error": "HTTP 500",
        "at": "2026-01-01T00:00:00Z",
    },
    "silent": [
        {"task": "backup", "silent_for_s": 7200.0, "max_silence_s": 3600.0, "last_success_at": None}
    ],
}


def test_status_shows_the_notifications_and_the_silent_tasks() -> None:
    text = render_status({"uptime_s": 1, "queue": {}, "notify": NOTIFY}, now=1767225600.0 + 60)
    assert "notify: 2 tasks; webhook 5 sent / 2 FAILED, ping 9 sent, command 0 sent;" in text
    assert "pending 1 (100 a target), dropped 3, retries 7" in text
    assert "last failure: webhook of task 'backup' (failure)" in text
    assert "HTTP 500" in text
    assert "SILENT: task 'backup' for 2h" in text
    assert "no success since start" in text


def test_status_without_notifications_says_nothing_of_them() -> None:
    assert "notify" not in render_status({"uptime_s": 1, "queue": {}})
