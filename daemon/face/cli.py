"""The ``runbroker`` command: argument parsing and exit codes only.

The client commands (``trigger``, ``status``, ``health``, ``cancel``) import nothing heavier
than ``_socket`` and ``json``: each ``docker exec`` starts a cold interpreter. A plain
``trigger`` does not even load argparse or typing (see ``fastargs``). The daemon's modules are
imported only on the ``run`` path, after the signal handlers are in place.
"""

from __future__ import annotations

import sys

from daemon import __version__

TYPE_CHECKING = False  # typing itself costs a cold client several milliseconds
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import FrameType
    from typing import Any

EXIT_USAGE = 2


def positive_duration(text: str) -> float:
    """A Go-style duration that must be positive; ValueError with the reason otherwise."""
    from daemon.schedules.interval import parse_duration

    seconds = parse_duration(text)
    if seconds <= 0:
        raise ValueError("must be positive")
    return seconds


def _duration_arg(text: str) -> float:
    import argparse

    try:
        return positive_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _env_arg(text: str) -> tuple[str, str]:
    import argparse

    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected K=V, got {text!r}")
    return name, value


def build_parser(
    subparsers: dict[str, argparse.ArgumentParser] | None = None,
) -> argparse.ArgumentParser:
    """The parser of the whole command line; ``subparsers``, when given, receives each
    subcommand's own parser (to report an error with that subcommand's usage)."""
    import argparse

    from daemon.face import help as cli_help  # the long texts: not on a trigger's path

    parser = argparse.ArgumentParser(
        prog="runbroker", description="A job-running daemon for containers."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    raw = argparse.RawDescriptionHelpFormatter

    run = sub.add_parser(
        "run",
        help="start the daemon (PID 1 in a container)",
        description="Start the daemon: PID 1 of a container, until SIGTERM or SIGINT.",
        epilog=cli_help.RUN_HELP,
        formatter_class=raw,
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND ARGS... (task 'default')")

    trig = sub.add_parser(
        "trigger",
        help="submit a run and stream its output",
        description="Submit one run of TASK to the daemon and stream its output.",
        epilog=cli_help.TRIGGER_HELP,
        formatter_class=raw,
    )
    trig.add_argument(
        "task", nargs="?", default="default", metavar="TASK", help="(default: default)"
    )
    trig.add_argument(
        "--arg",
        dest="args",
        action="append",
        default=[],
        metavar="A",
        help="an argument appended to the task's command (repeatable; needs allow_args)",
    )
    trig.add_argument(
        "--env",
        action="append",
        type=_env_arg,
        default=[],
        metavar="K=V",
        help="set K in the run's environment (repeatable; K must be in allow_env)",
    )
    trig.add_argument("--detach", action="store_true", help="return once the run is queued")
    trig.add_argument("--json", action="store_true", help="print the raw event lines")
    trig.add_argument("--timeout", type=_duration_arg, metavar="DUR", help="stop waiting after DUR")
    trig.add_argument("--socket", help="socket path (default: $RUNBROKER_SOCKET)")

    stat = sub.add_parser("status", help="queue, current run and recent results")
    stat.add_argument("--json", action="store_true")
    stat.add_argument("--socket")

    health = sub.add_parser("health", help="exit 0 when the daemon is healthy, 1 when not")
    health.add_argument("--socket")

    cancel = sub.add_parser("cancel", help="cancel a queued or running run")
    cancel.add_argument("id")
    cancel.add_argument("--socket")

    once = sub.add_parser("once", help="run a task once in this process, coalesced across callers")
    once.add_argument("task", nargs="?", default="default")
    once.add_argument("--skip", action="store_true", help="skip instead of queueing a rerun")

    sub.add_parser("migrate", help="apply the database migrations", add_help=False)
    sub.add_parser("jobs", help="manage scheduled jobs in PostgreSQL", add_help=False)
    sub.add_parser("version", help="print the version")
    if subparsers is not None:
        subparsers.update(sub.choices)
    return parser


def _socket(args: argparse.Namespace) -> str:
    from daemon.wire.client import socket_path_from_env

    return str(args.socket) if args.socket else socket_path_from_env()


def _trigger(args: argparse.Namespace) -> int:
    from daemon.wire import client
    from daemon.wire.protocol import SubmitRequest

    request = SubmitRequest(task=args.task, args=tuple(args.args), env=dict(args.env))
    return client.trigger(
        _socket(args), request, detach=args.detach, as_json=args.json, timeout_s=args.timeout
    )


def _control(args: argparse.Namespace, op: str, run_id: str = "") -> dict[str, Any] | int:
    from daemon.wire import client
    from daemon.wire.protocol import ControlRequest

    try:
        return client.control(_socket(args), ControlRequest(op=op, id=run_id))
    except client.Unreachable as exc:
        print(exc, file=sys.stderr)
        return client.EXIT_UNAVAILABLE


def _status(args: argparse.Namespace) -> int:
    import json

    from daemon.face.status_text import render_status

    answer = _control(args, "status")
    if isinstance(answer, int):
        return answer
    if args.json:
        print(json.dumps(answer, indent=2))
    else:
        print(render_status(answer))
    return 0 if answer.get("ok") else 1


def _health(args: argparse.Namespace) -> int:
    answer = _control(args, "health")
    if isinstance(answer, int):
        return 1  # unreachable is unhealthy; the reason was printed
    warnings = answer.get("warnings")
    if answer.get("ok"):
        print("healthy")
    else:
        print(f"unhealthy: {answer.get('reason', 'unknown')}")
    for warning in warnings if isinstance(warnings, list) else []:
        print(f"warning: {warning}")
    return 0 if answer.get("ok") else 1


def _cancel(args: argparse.Namespace) -> int:
    answer = _control(args, "cancel", args.id)
    if isinstance(answer, int):
        return answer
    if answer.get("ok"):
        if answer.get("detail"):  # a running run: asked to stop, not stopped yet
            print(f"{args.id}: {answer['detail']}")
        else:
            print(f"cancelled {args.id} ({answer.get('state', '')})")
        return 0
    print(f"runbroker: {answer.get('reason', 'cancel failed')}", file=sys.stderr)
    return 1


def _run(args: argparse.Namespace) -> int:
    import signal

    early_signals = [0]

    def remember(_signum: int, _frame: FrameType | None) -> None:
        early_signals[0] += 1

    # Before any slow import: as PID 1 a signal without a handler is simply dropped.
    signal.signal(signal.SIGTERM, remember)
    signal.signal(signal.SIGINT, remember)
    from daemon.daemon_main import main as daemon_main

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    return daemon_main(argv, early_signals)


def _fast_trigger(words: list[str]) -> int | None:
    """``trigger`` without argparse when the arguments are plain; None to fall back."""
    from daemon.face.fastargs import parse_trigger

    parsed = parse_trigger(words)
    if parsed is None:
        return None
    timeout_s = None
    if parsed.timeout is not None:
        try:
            timeout_s = positive_duration(parsed.timeout)
        except ValueError:
            return None  # argparse reports it
    from daemon.wire import client
    from daemon.wire.protocol import SubmitRequest

    request = SubmitRequest(task=parsed.task, args=parsed.args, env=dict(parsed.env))
    path = parsed.socket or client.socket_path_from_env()
    return client.trigger(
        path, request, detach=parsed.detach, as_json=parsed.as_json, timeout_s=timeout_s
    )


def leaves_sockets_to_exit(words: Sequence[str]) -> bool:
    """Every command but ``run``: the daemon lives on, and a handler of its own that talks to
    it through ``daemon.wire.client`` must get its sockets closed, not kept until exit."""
    return list(words[:1]) != ["run"]


def entry() -> None:
    """The ``runbroker`` command itself (the console script and ``python -m daemon``).

    A client command leaves its sockets for the process's exit to close (see
    ``client.leave_sockets_to_exit``): its output is flushed by ``main``, and ``os._exit``
    then ends the process without a teardown in which the daemon's own exit could kill it."""
    import os

    from daemon.wire import client

    if leaves_sockets_to_exit(sys.argv[1:]):
        client.leave_sockets_to_exit()
    code = main()
    if client.left_sockets():
        os._exit(code)
    sys.exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        return _closed_output()


def _main(words: list[str]) -> int:
    try:
        code = _dispatch(words)
    except KeyboardInterrupt:
        code = 130
    except SystemExit:  # argparse: --help or a usage error; what it printed must reach the pipe
        _flush_output()
        raise
    _flush_output()  # a closed pipe shows here, not as a traceback at interpreter exit
    return code


def _flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _closed_output() -> int:
    """The reader of our output went away (``runbroker status | head -1``): exit quietly with
    128 + SIGPIPE, as a shell reports a Unix tool that SIGPIPE ended. Whatever is still buffered
    goes to /dev/null, so the interpreter's own flush at exit cannot complain either."""
    import contextlib
    import os

    from daemon.wire.client import EXIT_BROKEN_PIPE

    devnull = os.open(os.devnull, os.O_WRONLY)
    for stream in (sys.stdout, sys.stderr):
        # Not a real file (a test's capture): then nothing will flush to a pipe either.
        with contextlib.suppress(OSError, ValueError):
            os.dup2(devnull, stream.fileno())
    os.close(devnull)
    return EXIT_BROKEN_PIPE


def _dispatch(words: list[str]) -> int:
    if words and words[0] == "trigger":
        code = _fast_trigger(words[1:])
        if code is not None:
            return code
    if words and words[0] in ("jobs", "migrate"):
        from daemon.pg.admin import commands as jobs_cli

        return jobs_cli.main(words[1:]) if words[0] == "jobs" else jobs_cli.migrate_main(words[1:])
    subparsers: dict[str, argparse.ArgumentParser] = {}
    args, extra = build_parser(subparsers).parse_known_args(words)
    if extra:  # argparse would report them with the top-level usage, not the subcommand's
        subparsers[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "run":
        return _run(args)
    if args.command == "trigger":
        return _trigger(args)
    if args.command == "status":
        return _status(args)
    if args.command == "health":
        return _health(args)
    if args.command == "cancel":
        return _cancel(args)
    if args.command == "once":
        from daemon.face.once import main as once_main

        return once_main(args.task, skip=args.skip)
    print(f"runbroker {__version__}")
    return 0
