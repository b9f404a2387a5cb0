"""The argparse parser of the ``runbroker`` command line: every subcommand, its options and its
help. Loaded only when a command needs it: a plain ``trigger`` never builds a parser
(``fastargs``), and the long help texts (``help_texts``) are not on its path either.
"""

from __future__ import annotations

import argparse

from daemon.face.help_texts import (
    CHECK_HELP,
    LOGS_HELP,
    NEXT_HELP,
    RELOAD_HELP,
    RUN_HELP,
    TRIGGER_HELP,
)


def socket_option(command: argparse.ArgumentParser) -> None:
    """``--socket PATH``, with one help text for every command that talks to the daemon."""
    command.add_argument(
        "--socket", metavar="PATH", help="the daemon's socket (default: $RUNBROKER_SOCKET)"
    )


def duration_arg(text: str) -> float:
    """``--timeout DUR``: a positive duration, or argparse's usage error with the reason."""
    from daemon.face.fastargs import positive_duration  # the rule both parsers apply

    try:
        return positive_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def env_arg(text: str) -> tuple[str, str]:
    """``--env K=V``."""
    from daemon.face.fastargs import split_env  # the rule both parsers apply

    pair = split_env(text)
    if pair is None:
        raise argparse.ArgumentTypeError(f"expected K=V, got {text!r}")
    return pair


def runs_arg(text: str) -> int:
    """``logs --runs N``: how many finished runs to list."""
    from daemon.wire.logs_answers import MAX_LISTED_RUNS

    if not text.isdigit() or not 1 <= int(text) <= MAX_LISTED_RUNS:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to {MAX_LISTED_RUNS}")
    return int(text)


def count_arg(text: str) -> int:
    """``next --count N``: how many planned times of each task."""
    from daemon.wire.protocol import NEXT_COUNT_MAX

    if not text.isdigit() or not 1 <= int(text) <= NEXT_COUNT_MAX:
        raise argparse.ArgumentTypeError(f"expected a number from 1 to {NEXT_COUNT_MAX}")
    return int(text)


def instant_arg(text: str) -> str:
    """``next --after TIME``: an RFC 3339 time with its offset, sent as given."""
    from daemon.wire.codec import parse_instant

    if parse_instant(text) is None:
        raise argparse.ArgumentTypeError(
            f"expected an RFC 3339 time with an offset, like 2026-03-28T00:00:00Z, got {text!r}"
        )
    return text


def build_parser(
    subparsers: dict[str, argparse.ArgumentParser] | None = None,
) -> argparse.ArgumentParser:
    """The parser of the whole command line.

    ``subparsers``, when given, receives each subcommand's own parser, to report an error with
    that subcommand's usage."""
    parser = argparse.ArgumentParser(
        prog="runbroker", description="A job-running daemon for containers."
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def documented(
        name: str, summary: str, description: str, epilog: str
    ) -> argparse.ArgumentParser:
        """A subcommand whose long help text keeps its own line breaks."""
        return sub.add_parser(
            name,
            help=summary,
            description=description,
            epilog=epilog,
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )

    run = documented(
        "run",
        "start the daemon (PID 1 in a container)",
        "Start the daemon: PID 1 of a container, until SIGTERM or SIGINT.",
        RUN_HELP,
    )
    run.add_argument("argv", nargs=argparse.REMAINDER, help="-- COMMAND ARGS... (task 'default')")

    trig = documented(
        "trigger",
        "submit a run and stream its output",
        "Submit one run of TASK to the daemon and stream its output.",
        TRIGGER_HELP,
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
        type=env_arg,
        default=[],
        metavar="K=V",
        help="set K in the run's environment (repeatable; K must be in allow_env)",
    )
    trig.add_argument("--detach", action="store_true", help="return once the run is queued")
    trig.add_argument("--json", action="store_true", help="print the raw event lines")
    trig.add_argument("--timeout", type=duration_arg, metavar="DUR", help="stop waiting after DUR")
    socket_option(trig)

    stat = sub.add_parser("status", help="queue, current run and recent results")
    stat.add_argument("--json", action="store_true")
    socket_option(stat)

    health = sub.add_parser("health", help="liveness: exit 0 when this daemon works, 1 when not")
    health.add_argument(
        "--ready", action="store_true", help="readiness: exit 1 also while its database does not"
    )
    socket_option(health)

    cancel = sub.add_parser("cancel", help="cancel a queued or running run")
    cancel.add_argument("id")
    socket_option(cancel)

    reload = documented(
        "reload",
        "re-read the tasks file now (as SIGHUP does)",
        "Ask the daemon to re-read RUNBROKER_TASKS_FILE now, all or nothing.",
        RELOAD_HELP,
    )
    reload.add_argument(
        "--dry-run", action="store_true", help="print the plan of a reload; change nothing"
    )
    reload.add_argument(
        "--file",
        default="",
        metavar="PATH",
        help="with --dry-run: the plan if the tasks file were PATH (read here, sent whole)",
    )
    socket_option(reload)

    upcoming = documented(
        "next",
        "the next planned times of each task (DST moves marked)",
        "Print the next planned times of each task (or TASK), in its zone and UTC.",
        NEXT_HELP,
    )
    upcoming.add_argument("task", nargs="?", default="", metavar="TASK")
    upcoming.add_argument(
        "--count", type=count_arg, default=5, metavar="N", help="times of each task (5)"
    )
    upcoming.add_argument(
        "--after",
        type=instant_arg,
        metavar="TIME",
        help="the first times after TIME (RFC 3339; default: now)",
    )
    upcoming.add_argument("--json", action="store_true", help="print the raw answer")
    upcoming.add_argument(
        "--file", metavar="PATH", help="plan from this tasks file, without a daemon"
    )
    socket_option(upcoming)

    check = documented(
        "check",
        "check a tasks file without a daemon (for CI)",
        "Check a tasks file as the daemon would read it; print every problem.",
        CHECK_HELP,
    )
    check.add_argument(
        "file", nargs="?", default="", metavar="FILE", help="(default: $RUNBROKER_TASKS_FILE)"
    )

    logs = documented(
        "logs",
        "a run's output: the running run's, live, or a recent one's",
        "Print a run's output from the daemon's journal (with -f, until it ends).",
        LOGS_HELP,
    )
    logs.add_argument("target", nargs="?", default="", metavar="RUN_ID|TASK")
    logs.add_argument(
        "-f", "--follow", action="store_true", help="then the live lines until the run ends"
    )
    logs.add_argument("--task", metavar="TASK", help="a task, whatever its name looks like")
    logs.add_argument(
        "--runs", type=runs_arg, default=0, metavar="N", help="list the last N finished runs"
    )
    logs.add_argument("--json", action="store_true", help="print the raw answer lines")
    socket_option(logs)

    once = sub.add_parser("once", help="run a task once in this process, coalesced across callers")
    once.add_argument("task", nargs="?", default="default")
    once.add_argument(
        "--skip", action="store_true", help="skip (exit 3) instead of queueing a rerun"
    )

    sub.add_parser("migrate", help="apply the database migrations", add_help=False)
    sub.add_parser("jobs", help="manage scheduled jobs in PostgreSQL", add_help=False)
    sub.add_parser("version", help="print the version")
    if subparsers is not None:
        subparsers.update(sub.choices)
    return parser
