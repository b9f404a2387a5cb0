"""The ``runbroker`` command: argument parsing and exit codes only.

Every ``docker exec`` starts a cold interpreter, so the client commands import nothing heavier
than ``_socket`` and ``json``, and the daemon's modules load only on the ``run`` path.
"""

from __future__ import annotations

import sys

from daemon import __version__
from daemon.exits import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_OK

TYPE_CHECKING = False  # typing itself costs a cold client several milliseconds
if TYPE_CHECKING:
    import argparse
    from collections.abc import Sequence
    from types import FrameType


def leaves_sockets_to_exit(words: Sequence[str]) -> bool:
    """Every command but ``run``: the daemon lives on, and a handler of its own that talks to
    it through ``daemon.wire.client`` must get its sockets closed, not kept until exit."""
    return list(words[:1]) != ["run"]


def entry() -> None:
    """The ``runbroker`` command itself (the console script and ``python -m daemon``).

    A client command's output is flushed by ``main`` and ``os._exit`` then ends the process, so
    that no teardown runs in which the daemon's own exit could kill it
    (``client.leave_sockets_to_exit``)."""
    import os

    from daemon.wire import client

    if leaves_sockets_to_exit(sys.argv[1:]):
        client.leave_sockets_to_exit()
    code = main()
    if client.left_sockets():
        os._exit(code)
    sys.exit(code)


# Their output is a run's, which goes on without its reader: 141 once it has gone
# (``face/pipe_end.py``); every other command's is a whole answer and its code stands.
_STREAMING = ("trigger", "logs", "once")


def main(argv: Sequence[str] | None = None) -> int:
    try:
        return _main(list(sys.argv[1:] if argv is None else argv))
    except BrokenPipeError:
        return _closed_output()


def _main(words: list[str]) -> int:
    command = words[0] if words else ""
    streaming = command in _STREAMING
    if not streaming and command != "run":
        from daemon.face.pipe_end import drop_output_once_closed

        drop_output_once_closed()
    try:
        code = _dispatch(words)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except SystemExit:  # argparse: --help or a usage error, whose text must reach the pipe
        _flush_output()
        raise
    _flush_output()  # a closed pipe shows here, not as a traceback at interpreter exit
    if streaming and _reader_gone():
        return _closed_output()
    return code


def _flush_output() -> None:
    for stream in (sys.stdout, sys.stderr):
        stream.flush()


def _reader_gone() -> bool:
    """Our stdout is a pipe whose reader has closed it (``runbroker trigger x | head -1``, head
    done) although every write fit in the pipe and none failed: the kernel reports POLLERR on
    a pipe's write end without readers. A reader that is still there (``| cat``) is not waited
    for."""
    import os
    import select
    import stat

    try:
        fd = sys.stdout.fileno()
        if not stat.S_ISFIFO(os.fstat(fd).st_mode):
            return False
    except (OSError, ValueError, AttributeError):  # closed, or not a real file (a capture)
        return False
    poller = select.poll()
    poller.register(fd, 0)  # POLLERR is reported whatever the mask
    return any(events & select.POLLERR for _, events in poller.poll(0))


def _closed_output() -> int:
    """The reader of a run's output went away (``trigger x | head -1``): exit quietly with
    128 + SIGPIPE, as a shell reports a Unix tool that SIGPIPE ended. Whatever is still buffered
    goes to /dev/null, so the interpreter's own flush at exit cannot complain either."""
    import contextlib
    import os

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
    args, extra = parse_words(words, subparsers)
    if extra:  # argparse would report them with the top-level usage, not the subcommand's
        subparsers[args.command].error(f"unrecognized arguments: {' '.join(extra)}")
    if args.command == "run":
        return _run(args)
    if args.command == "trigger":
        return _submit(
            args.task,
            tuple(args.args),
            args.env,
            socket=args.socket,
            detach=args.detach,
            as_json=args.json,
            timeout_s=args.timeout,
        )
    if args.command in ("status", "health", "cancel", "reload"):
        from daemon.face import control

        command = {
            "status": control.status,
            "health": control.health,
            "cancel": control.cancel,
            "reload": control.reload,
        }
        return command[args.command](args)
    if args.command in ("check", "once") or (args.command == "next" and args.file):
        _import_structlog_plain()  # these load the core, and its log: run's reason, below
    if args.command == "next":
        from daemon.face.upcoming import main as next_main

        return next_main(args)
    if args.command == "check":
        from daemon.face.check import main as check_main

        return check_main(args)
    if args.command == "logs":
        from daemon.face.logs import main as logs_main

        return logs_main(args)
    if args.command == "once":
        from daemon.face.once import main as once_main

        return once_main(args.task, skip=args.skip)
    print(f"runbroker {__version__}")
    return EXIT_OK


def parse_words(
    words: list[str], subparsers: dict[str, argparse.ArgumentParser] | None = None
) -> tuple[argparse.Namespace, list[str]]:
    """The whole command line, as ``parse_known_args``.

    A trigger's value flags first take their next word whatever it looks like
    (``fastargs.attach_values``), as the fast path does."""
    from daemon.face.parser import build_parser

    if words[:1] == ["trigger"]:
        from daemon.face.fastargs import attach_values

        words = ["trigger", *attach_values(words[1:])]
    return build_parser(subparsers).parse_known_args(words)


def _fast_trigger(words: list[str]) -> int | None:
    """``trigger`` without argparse when the arguments are plain, or None to fall back."""
    from daemon.face.fastargs import parse_trigger, positive_duration

    parsed = parse_trigger(words)
    if parsed is None:
        return None
    timeout_s = None
    if parsed.timeout is not None:
        try:
            timeout_s = positive_duration(parsed.timeout)
        except ValueError:
            return None  # argparse reports it
    return _submit(
        parsed.task,
        parsed.args,
        parsed.env,
        socket=parsed.socket,
        detach=parsed.detach,
        as_json=parsed.as_json,
        timeout_s=timeout_s,
    )


def _submit(
    task: str,
    args: tuple[str, ...],
    env: Sequence[tuple[str, str]],
    *,
    socket: str | None,
    detach: bool,
    as_json: bool,
    timeout_s: float | None,
) -> int:
    """``trigger``, as either parser read it: submit one run and stream its events."""
    from daemon.wire import client
    from daemon.wire.protocol import SubmitRequest

    request = SubmitRequest(task=task, args=args, env=dict(env))
    path = socket or client.socket_path_from_env()
    return client.trigger(path, request, detach=detach, as_json=as_json, timeout_s=timeout_s)


def _import_structlog_plain() -> None:
    """structlog without the console extras it imports wherever they are installed (rich: some
    5 MiB and a tenth of a second) and runbroker never draws with, before the first import of
    it by a command that loads the core (``daemon.log.optional_imports``)."""
    from daemon.log.optional_imports import import_structlog_plain

    import_structlog_plain()


def _run(args: argparse.Namespace) -> int:
    from daemon.broker.signal_plan import prepare_process

    early_signals: list[int] = []  # the stop signals that come during start-up

    def remember(signum: int, _frame: FrameType | None) -> None:
        early_signals.append(signum)

    # Before any slow import: as PID 1 a signal without a handler is simply dropped, and any
    # other process dies of most of them (daemon/broker/signal_plan.py says what each one does).
    prepare_process(remember)
    _import_structlog_plain()
    from daemon.broker.daemon_main import main as daemon_main

    argv = list(args.argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    return daemon_main(argv, early_signals)
