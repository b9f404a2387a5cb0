"""httpx is loaded only when a notification goes out over HTTP: never by the thin client, and
not by the daemon's start, with notifications configured or not."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _modules_after(code: str) -> set[str]:
    script = f"import sys\n{code}\nprint(','.join(sorted(sys.modules)))\n"
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    return set(result.stdout.strip().splitlines()[-1].split(","))


def test_the_thin_client_never_imports_httpx() -> None:
    modules = _modules_after(
        "import daemon.face.cli\n"
        "try:\n"
        "    daemon.face.cli.main(['trigger', '--socket', '/nonexistent/x.sock'])\n"
        "except SystemExit:\n"
        "    pass\n"
    )
    assert "daemon.face.cli" in modules
    assert "httpx" not in modules


def test_the_daemon_composes_its_notifier_without_httpx() -> None:
    modules = _modules_after(
        "from daemon.core.tasks import TaskRegistry\n"
        "from daemon.taskfile import parse_tasks_toml\n"
        "from daemon.core.journal import Journal\n"
        "from daemon.core.process import ChildSupervisor\n"
        "import daemon.broker.app\n"
        "from daemon.notify.notifier import Notifier\n"
        'tasks = parse_tasks_toml(\'[tasks.a]\\ncommand = "true"\\n'
        '[tasks.a.notify.webhook]\\nurl = "http://127.0.0.1:9/x"\\n\')\n'
        "Notifier(TaskRegistry(tasks), Journal(), ChildSupervisor())\n"
    )
    assert "daemon.notify.notifier" in modules
    assert "httpx" not in modules


def test_the_first_http_notice_loads_httpx() -> None:
    modules = _modules_after(
        "import asyncio\n"
        "from daemon.notify.http_send import HttpSender\n"
        "asyncio.run(HttpSender()._ready_client())\n"
    )
    assert "httpx" in modules


def test_httpx_never_logs_a_url() -> None:
    modules = _modules_after(
        "import asyncio, logging\n"
        "from daemon.notify.http_send import HttpSender\n"
        "asyncio.run(HttpSender()._ready_client())\n"
        "assert not logging.getLogger('httpx').isEnabledFor(logging.CRITICAL)\n"
        "assert not logging.getLogger('httpcore').isEnabledFor(logging.CRITICAL)\n"
    )
    assert "httpx" in modules
