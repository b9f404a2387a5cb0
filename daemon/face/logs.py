"""``runbroker logs [RUN_ID|TASK] [--follow]``: which run the arguments mean.

An argument of a run id's form is that run and any other a task, so that what ``trigger`` and
``status`` show can be pasted as it is. ``--task`` names a task whatever its name looks like.
"""

from __future__ import annotations

import sys

from daemon.exits import EXIT_USAGE

TYPE_CHECKING = False  # typing itself costs a cold client several milliseconds
if TYPE_CHECKING:
    import argparse

    from daemon.wire.protocol import LogsRequest


def logs_request(target: str, task: str, follow: bool) -> LogsRequest | None:
    """The ``logs`` request the arguments mean. None when they name both a run and a task."""
    from daemon.wire.logs_answers import looks_like_run_id
    from daemon.wire.protocol import LogsRequest

    if task:
        return None if target else LogsRequest(task=task, follow=follow)
    if looks_like_run_id(target):
        return LogsRequest(id=target, follow=follow)
    return LogsRequest(task=target, follow=follow)


def main(args: argparse.Namespace) -> int:
    from daemon.wire import client, logs_client
    from daemon.wire.protocol import LogsRequest

    request = logs_request(args.target or "", args.task or "", args.follow)
    if args.runs and (args.target or args.task or args.follow):
        request = None
    elif args.runs:
        request = LogsRequest(runs=args.runs)
    if request is None:
        print("runbroker: logs: give a RUN_ID, or --task TASK, or --runs N alone", file=sys.stderr)
        return EXIT_USAGE
    path = args.socket or client.socket_path_from_env()
    return logs_client.logs(path, request, as_json=args.json)
