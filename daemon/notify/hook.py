"""The command a task's notifications run: its own process group, started and reaped by the
daemon's child supervisor (so under PID 1 it leaves no zombie), with its own timeout.

It gets the container's environment (without runbroker's settings) and the notice: the event,
the run's context and result, its output's tail and the whole JSON document. At its timeout
it gets SIGTERM, then SIGKILL ``HOOK_GRACE_S`` later. Its last lines are kept to say why it
failed, nothing more.
"""

from __future__ import annotations

import asyncio
import collections
from typing import TYPE_CHECKING

import orjson

from daemon.core.context_vars import ENV_PREFIX
from daemon.core.jobenv import container_environment
from daemon.core.process import SpawnError
from daemon.notify.delivery import Delivery
from daemon.notify.notice import Notice, document, tail_text

if TYPE_CHECKING:
    from daemon.core.process import ChildSupervisor
    from daemon.core.tasks.notify_targets import CommandHook

HOOK_GRACE_S = 1.0
KEPT_LINES = 5


def hook_environment(notice: Notice, event: str) -> dict[str, str]:
    """What the command finds in its environment (the README lists it)."""
    env = container_environment()
    fields = {
        "NOTIFY_EVENT": event,
        "TASK": notice.task,
        "RUN_ID": notice.run_id or "",
        "TRIGGER": notice.trigger or "",
        "OUTCOME": notice.outcome or "",
        "REASON": notice.reason,
        "EXIT_CODE": "" if notice.exit_code is None else str(notice.exit_code),
        "DURATION_MS": "" if notice.duration_ms is None else str(notice.duration_ms),
        "SCHEDULED_FOR": notice.scheduled_for or "",
        "OUTPUT_TAIL": tail_text(notice),
        "NOTIFICATION": orjson.dumps(document(notice, event)).decode(),
    }
    env.update({ENV_PREFIX + name: value for name, value in fields.items()})
    return env


async def run_hook(
    children: ChildSupervisor, hook: CommandHook, notice: Notice, event: str
) -> Delivery:
    """Run ``hook`` for ``notice`` to its end or its timeout; it is sent when it exits 0."""
    kept: collections.deque[str] = collections.deque(maxlen=KEPT_LINES)

    def keep(_stream: str, lines: list[str]) -> None:
        kept.extend(lines[-KEPT_LINES:])

    key = f"notify:{notice.run_id or notice.task}"
    try:
        async with asyncio.timeout(hook.timeout_s):
            outcome = await children.run_command(
                hook.argv,
                hook_environment(notice, event),
                keep,
                grace_s=lambda: HOOK_GRACE_S,
                key=key,
            )
    except TimeoutError:
        return Delivery(False, 1, f"no end within {hook.timeout_s:g}s (terminated)")
    except SpawnError as exc:
        return Delivery(False, 1, f"cannot start: {exc}")
    if outcome.exit_code == 0:
        return Delivery(True)
    said = f": {kept[-1][:200]}" if kept else ""
    return Delivery(False, 1, f"exit code {outcome.exit_code}{said}")
