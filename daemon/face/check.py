"""``runbroker check [FILE]``: a tasks file checked without a daemon, for CI.

Every problem is one line ``FILE:LINE: message`` on stderr (the loader's words,
``core.tasks.checking``); exit 0 when the daemon would take the file, 2 when it would not.
Without FILE, the file of ``RUNBROKER_TASKS_FILE`` (or its default) is checked.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from daemon.exits import EXIT_CONFIG, EXIT_OK

if TYPE_CHECKING:
    import argparse


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from daemon.core.tasks.checking import check_tasks_file

    if args.file:
        path = Path(args.file)
    else:
        from daemon.settings import SettingsError, load_settings

        try:
            path = load_settings().tasks_file
        except SettingsError as exc:
            print(f"runbroker: {exc}", file=sys.stderr)
            return EXIT_CONFIG
    problems = check_tasks_file(path)
    for problem in problems:
        print(problem.text(str(path)), file=sys.stderr)
    if problems:
        return EXIT_CONFIG
    print(f"{path}: ok")
    return EXIT_OK
