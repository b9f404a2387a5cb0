"""The one check of a tasks file (daemon/broker/tasks_check.py): ``runbroker check`` passes a
file exactly when ``runbroker run``'s start-up takes it, and a reload's dry run agrees, over
generated files and environments."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.broker import app, daemon_main, looprun, workdir
from daemon.broker.app import Broker
from daemon.broker.reload.dry_run import dry_run_answer
from daemon.broker.signals import Signals
from daemon.broker.tasks_check import check_file, startup_tasks
from daemon.core import subreaper
from daemon.exits import EXIT_CONFIG, EXIT_OK
from daemon.settings import load_settings

TASK_LINES = [
    'command = ["true"]',
    "command = 3",
    'handler = "daemon.core.builtin_tasks:noop"',
    'handler = "no.such.module:run"',
    'interval = "1m"',
    'interval = "10ms"',
    'interval = "soon"',
    'schedule = "*/5 * * * *"',
    'schedule = "@every 5m"',
    'schedule = "@daily"',
    'schedule = "cron 61 * * * *"',
    'schedule = "daily 02:30"',
    'tz = "Europe/Berlin"',
    'tz = "Mars/Base"',
    'grace = "40s"',
    'grace = "1s"',
    'timeout = "0s"',
    'misfire = "skip"',
    'catchup_window = "1h"',
    'on_busy = "coalesce"',
    'on_busy = "drop"',
    'start_deadline = "1m"',
    "allow_args = true",
    "bogus = 1",
    'notify.max_silence = "auto"',
    'notify.max_silence = "off"',
    'notify.max_silence = "1h"',
    'notify.webhook.url = "https://hooks.example.invalid/x"',
    'notify.webhook.url = "ftp://x"',
    'notify.webhook.on = ["bogus"]',
]
DEFAULTS = [
    "",
    '[notify]\nmax_silence = "auto"\n',
    '[notify.webhook]\nurl = "https://hooks.example.invalid/x"\n',
    "[notify]\nbogus = 1\n",
    "[other]\nx = 1\n",
]
ENVIRONMENTS = [
    {},
    {"COMMAND": "true"},
    {"DATABASE_URL": "postgresql://runbroker@127.0.0.1:1/none"},
    {"DATABASE_URL": "postgresql://runbroker@127.0.0.1:1/none", "COMMAND": "true"},
]

files = st.builds(
    lambda tables, defaults: (
        defaults
        + "".join(
            f"[tasks.{name}]\n" + "".join(f"{line}\n" for line in lines)
            for name, lines in dict(tables).items()
        )
    ),
    st.lists(
        st.tuples(
            st.sampled_from(["a", "b", "default"]),
            st.lists(st.sampled_from(TASK_LINES), max_size=5, unique=True),
        ),
        max_size=3,
    ),
    st.sampled_from(DEFAULTS),
)


def _starts(monkeypatch: pytest.MonkeyPatch) -> bool:
    """``runbroker run``'s start-up, up to the event loop it would hand over to."""
    handed_over: list[Any] = []
    monkeypatch.setattr(daemon_main, "configure_logging", lambda *_args: None)
    monkeypatch.setattr(subreaper, "adopt_orphans", lambda: subreaper.MODE_NONE)
    monkeypatch.setattr(workdir, "leave_start_directory", lambda: None)
    monkeypatch.setattr(app, "run_broker", lambda *args: handed_over.append(args))
    monkeypatch.setattr(looprun, "run_loop", lambda *_args: EXIT_OK)
    code = daemon_main.main([], [])
    assert code in (EXIT_OK, EXIT_CONFIG)
    assert (code == EXIT_OK) == bool(handed_over)
    return code == EXIT_OK


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(text=files, environment=st.sampled_from(range(len(ENVIRONMENTS))))
def test_check_passes_a_file_exactly_when_the_daemon_starts_and_reloads_with_it(
    text: str,
    environment: int,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    clean_env: None,
) -> None:
    path = tmp_path / "tasks.toml"
    path.write_text('[tasks.first]\ncommand = ["true"]\n')
    for name in ("COMMAND", "DATABASE_URL"):
        monkeypatch.delenv(f"RUNBROKER_{name}", raising=False)
    env = {
        "TASKS_FILE": str(path),
        "SOCKET": str(tmp_path / "rb.sock"),
        **ENVIRONMENTS[environment],
    }
    for name, value in env.items():
        monkeypatch.setenv(f"RUNBROKER_{name}", value)
    settings_now = load_settings()
    command = settings_now.default_command()
    registry, taken = startup_tasks(settings_now, command)
    running = Broker(settings_now, registry, Signals(), subreaper.MODE_NONE, command, taken=taken)
    path.write_text(text)
    checked = check_file(settings_now, command, path)
    starts = _starts(monkeypatch)
    assert (checked.problems == []) == starts, checked.problems
    dry_run = asyncio.run(dry_run_answer(running.reloader, datetime.now(UTC)))
    assert dry_run["ok"] == starts, dry_run
    if not starts:
        assert all(problem.message for problem in checked.problems)
