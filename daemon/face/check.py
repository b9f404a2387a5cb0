"""``runbroker check [FILE]``: a tasks file checked without a daemon, for CI.

Every problem is one line ``FILE:LINE: message`` on stderr (the loader's words,
``taskfile.checking``), and so is each warning the daemon would log of it (an interval it
clamps); exit 0 when the daemon would start with the file in this environment (its verdict is
the daemon's own check, ``broker.tasks_check``), 2 when it would not. Without FILE, the file of
``RUNBROKER_TASKS_FILE`` (or its default) is checked.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from daemon.exits import EXIT_CONFIG, EXIT_OK

if TYPE_CHECKING:
    import argparse


def main(args: argparse.Namespace) -> int:
    from pathlib import Path

    from daemon.broker.tasks_check import check_file
    from daemon.settings import SettingsError, load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"runbroker: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    try:
        default_command = settings.default_command()
    except ValueError as exc:  # as `runbroker run` says it
        print(f"runbroker: RUNBROKER_COMMAND: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    path = Path(args.file) if args.file else settings.tasks_file
    found = check_file(settings, default_command, path)
    for problem in [*found.problems, *found.warnings]:
        print(problem.text(str(path)), file=sys.stderr)
    if found.problems:
        return EXIT_CONFIG
    print(f"{path}: ok")
    return EXIT_OK
