"""``runbroker next [TASK] [--count N] [--after TIME] [--json] [--file PATH]``: each task's next
planned times, in the task's zone and in UTC, a slot an offset change moved or doubled marked as
such; the first ones after TIME (RFC 3339), else after now.

Asked of the running daemon (its ticker's plans), or, with ``--file``, of a tasks file without
one: the plans a daemon started now with this environment would make of it (``tick_plans``,
``RUNBROKER_COMMAND`` for ``default``). Exit 0; 2 for an unknown task, a bad file or setting, or
a daemon older than the op; 69 when the daemon is unreachable.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from daemon.exits import EXIT_CONFIG, EXIT_FAILED, EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE

if TYPE_CHECKING:
    import argparse


def main(args: argparse.Namespace) -> int:
    answer = _from_file(args) if args.file else _from_daemon(args)
    if isinstance(answer, int):
        return answer
    if not answer.get("ok"):
        reason = str(answer.get("reason", "unknown"))
        if reason.startswith("unknown op"):
            print(
                "runbroker: this daemon does not know `next` (it is older than this client): "
                "ask with --file PATH, or restart it",
                file=sys.stderr,
            )
            return EXIT_USAGE
        from daemon.wire.reasons import CODE_UNKNOWN_TASK

        print(f"runbroker: {reason}", file=sys.stderr)
        return EXIT_USAGE if answer.get("code") == CODE_UNKNOWN_TASK else EXIT_FAILED
    if args.json:
        import json

        print(json.dumps(answer, indent=2))
    else:
        print(render_next(answer))
    return EXIT_OK


def _from_daemon(args: argparse.Namespace) -> dict[str, Any] | int:
    from daemon.wire import client
    from daemon.wire.protocol import NextRequest

    path = args.socket or client.socket_path_from_env()
    try:
        request = NextRequest(task=args.task, count=args.count, after=args.after or "")
        return client.control(path, request)
    except client.Unreachable as exc:
        print(exc, file=sys.stderr)
        print("runbroker: without a daemon: runbroker next --file PATH", file=sys.stderr)
        return EXIT_UNAVAILABLE


def _from_file(args: argparse.Namespace) -> dict[str, Any] | int:
    from datetime import UTC, datetime
    from pathlib import Path

    from daemon.broker.ticking import tick_plans
    from daemon.observe.upcoming import next_answer
    from daemon.settings import SettingsError, load_settings
    from daemon.taskfile import TaskConfigError, build_registry
    from daemon.wire.codec import parse_instant

    try:
        settings = load_settings()
        default_command = settings.default_command()
        registry = build_registry(default_command, Path(args.file), file_required=True)
    except (SettingsError, TaskConfigError, ValueError) as exc:
        print(f"runbroker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    plans, _warnings = tick_plans(settings, registry)
    now = parse_instant(args.after or "") or datetime.now(UTC).replace(microsecond=0)
    answer = next_answer(
        plans,
        registry,
        task=args.task,
        count=args.count,
        now=now,
        jitter=settings.jitter,
        source="file",
    )
    return dict(answer)


def render_next(answer: dict[str, Any]) -> str:
    """The answer for people: a block a task, a line a planned time."""
    blocks = []
    for task in answer.get("tasks", []):
        schedule = task.get("schedule")
        if schedule is None:
            blocks.append(f"{task['task']}: no schedule (runs when triggered)")
            continue
        head = f"{task['task']}: {schedule} ({task.get('tz', 'UTC')})"
        lines = [head]
        for slot in task.get("times", []):
            local = slot["local"].replace("T", " ")
            line = f"  {local}  = {slot['at']}"
            dst = slot.get("dst")
            if dst is not None:
                line += f"  [DST {dst['kind']}: {dst['note']}]"
            lines.append(line)
        if task.get("note"):
            lines.append(f"  ({task['note']})")
        blocks.append("\n".join(lines))
    return "\n".join(blocks) if blocks else "no tasks"
