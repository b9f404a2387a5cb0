"""The command line as a person meets it: messages, exit codes, help, closed pipes, status."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from tests.acceptance.harness import Daemon

StartDaemon = Callable[..., Daemon]


def test_a_huge_interval_is_clamped_and_the_warning_hides_the_value(
    start_daemon: StartDaemon, workdir: Path
) -> None:
    daemon = start_daemon(
        "true", env={"RUNBROKER_INTERVAL": "200000h", "RUNBROKER_FIRE_ON_START": "false"}
    )
    warnings = daemon.log.wait_for("settings.interval")
    assert [line["warning"] for line in warnings] == [
        "RUNBROKER_INTERVAL: interval is above the maximum 720h; using the maximum"
    ]
    assert not any("200000" in line for line in daemon.log.raw)
    status = json.loads(daemon.exec("status", "--json").stdout)
    next_at = datetime.fromisoformat(status["ticks"][0]["next_at"])
    days = (next_at - datetime.now(UTC)).total_seconds() / 86400
    assert 26 < days <= 33  # 30 days, give or take the jitter
