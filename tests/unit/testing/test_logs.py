"""``daemon.testing`` on a user's test console: a crashing handler's traceback is plain and
holds no local variables (run in a fresh interpreter, where structlog is unconfigured)."""

from __future__ import annotations

import subprocess
import sys

from tests.unit.conftest import REPO

SCRIPT = """
import asyncio
from daemon.testing import run_handler

async def handler(run):
    secret_token = "hunter2-" + "local"
    raise ValueError("no region")

result = asyncio.run(run_handler(handler))
print("reason:", result.reason)
"""


def test_a_crash_prints_a_plain_traceback_without_locals() -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout + done.stderr
    assert "reason: ValueError: no region" in printed
    assert "run.crashed" in printed
    assert "Traceback (most recent call last):" in printed
    assert "hunter2-local" not in printed  # the local's value
    assert "╭" not in printed  # no rich panel


def test_a_users_own_structlog_configuration_is_left_alone() -> None:
    script = (
        "import structlog\n"
        "structlog.configure(processors=[structlog.processors.JSONRenderer()])\n"
        "mine = structlog.get_config()['processors']\n" + SCRIPT + "\n"
        "assert structlog.get_config()['processors'] is mine\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert '"event": "run.crashed"' in done.stdout
