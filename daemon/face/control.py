"""``runbroker status``, ``health``, ``cancel`` and ``reload``: a control op asked of the
daemon, its answer shown to a person (or, for ``status --json``, as it came) and turned into
the exit code."""

from __future__ import annotations

import sys

from daemon.exits import EXIT_FAILED, EXIT_OK, EXIT_TEMPFAIL, EXIT_UNAVAILABLE, EXIT_USAGE

TYPE_CHECKING = False  # typing itself costs a cold client several milliseconds
if TYPE_CHECKING:
    import argparse
    from typing import Any

    from daemon.wire.protocol import AnsweredRequest


def _control(args: argparse.Namespace, request: AnsweredRequest) -> dict[str, Any] | int:
    """The daemon's answer, or the exit code when it cannot be asked (the reason printed)."""
    from daemon.wire import client

    path = args.socket or client.socket_path_from_env()
    try:
        return client.control(path, request)
    except client.Unreachable as exc:
        print(exc, file=sys.stderr)
        return EXIT_UNAVAILABLE


def status(args: argparse.Namespace) -> int:
    import json

    from daemon.face.status_text import render_status
    from daemon.wire.protocol import StatusRequest

    answer = _control(args, StatusRequest())
    if isinstance(answer, int):
        return answer
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print(render_status(answer))
    return EXIT_OK if answer.get("ok") else EXIT_FAILED


def health(args: argparse.Namespace) -> int:
    """Liveness (``ok``), or with ``--ready`` readiness (``ready``: the database works too)."""
    from daemon.wire.protocol import HealthRequest

    answer = _control(args, HealthRequest())
    if isinstance(answer, int):
        return EXIT_FAILED  # unreachable is unhealthy, and the reason was printed
    warnings = answer.get("warnings")
    live = bool(answer.get("ok"))
    ready = bool(answer.get("ready", live))  # a daemon older than readiness: as live
    if not live:
        print(f"unhealthy: {answer.get('reason', 'unknown')}")
    elif not ready:
        said = "not ready" if args.ready else "healthy; not ready"
        print(f"{said}: {answer.get('ready_reason')}")
    else:
        print("ready" if args.ready else "healthy")
    for warning in warnings if isinstance(warnings, list) else []:
        print(f"warning: {warning}")
    return EXIT_OK if (ready if args.ready else live) else EXIT_FAILED


def cancel(args: argparse.Namespace) -> int:
    from daemon.wire.protocol import CancelRequest

    answer = _control(args, CancelRequest(args.id))
    if isinstance(answer, int):
        return answer
    if answer.get("ok"):
        if answer.get("detail"):  # a running run: asked to stop, not stopped yet
            print(f"{args.id}: {answer['detail']}")
        else:
            print(f"cancelled {args.id} ({answer.get('state', '')})")
        return EXIT_OK
    print(f"runbroker: {answer.get('reason', 'cancel failed')}", file=sys.stderr)
    return EXIT_FAILED


def reload(args: argparse.Namespace) -> int:
    """Exit 0 when the tasks file was reloaded (``--dry-run``: would be, and the plan is
    printed), 1 when it was (would be) refused (the reason on stderr), 75 when the daemon is
    shutting down (as ``trigger``), 2 when it is older than the op."""
    from daemon.face.status_text import reload_plan_lines, reload_summary
    from daemon.wire.protocol import ReloadRequest
    from daemon.wire.reasons import worth_a_retry

    candidate: bytes | None = None
    if args.file:
        if not args.dry_run:
            print(
                "runbroker: reload --file needs --dry-run (a reload reads the tasks file)",
                file=sys.stderr,
            )
            return EXIT_USAGE
        read = _candidate(args.file)
        if isinstance(read, str):
            print(f"runbroker: reload would be refused: {read}", file=sys.stderr)
            return EXIT_FAILED
        candidate = read
    file = args.file if candidate is not None else ""
    answer = _control(args, ReloadRequest(args.dry_run, file, candidate))
    if isinstance(answer, int):
        return answer
    if answer.get("ok"):
        if args.dry_run:
            print("\n".join(reload_plan_lines(answer)))
        else:
            print(f"reloaded: {reload_summary(answer)}")
        return EXIT_OK
    reason = str(answer.get("reason", "unknown"))
    unknown = ("unknown field 'dry_run'", "unknown field 'file'", "unknown field 'content'")
    if reason.startswith("unknown op") or any(field in reason for field in unknown):
        what = "reload --dry-run" if args.dry_run else "reload"
        what += " --file" if args.file else ""
        print(
            f"runbroker: this daemon does not know `{what}` (it is older than this client): "
            "restart it to read the tasks file again",
            file=sys.stderr,
        )
        return EXIT_USAGE
    refused = "reload would be refused" if args.dry_run else "reload refused"
    print(f"runbroker: {refused}: {reason}", file=sys.stderr)
    return EXIT_TEMPFAIL if worth_a_retry(answer) else EXIT_FAILED


def _candidate(path_text: str) -> bytes | str:
    """The candidate file's bytes, read as the daemon reads its tasks file (a regular file of
    at most 1 MiB, never blocking on a FIFO), or why it cannot be read. Read here, not by the
    daemon: the file is the one this user sees, and the request stays within the socket's
    bound (1 MiB as base64 is far below 8 MiB)."""
    from pathlib import Path

    from daemon.taskfile.tasks_file import TaskConfigError, read_tasks_file

    try:
        return read_tasks_file(Path(path_text))
    except FileNotFoundError:
        return f"tasks file {path_text} does not exist"
    except TaskConfigError as exc:
        return str(exc)
