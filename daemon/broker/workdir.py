"""The daemon's working directory: ``/`` once it has started, its commands' the directory it
was started in.

Holding no directory lets a volume be unmounted and a build directory removed, while a command
such as ``python manage.py`` still starts where it expects. Relative paths are made absolute
first, so a module a reload imports is found where it was at start-up.
"""

from __future__ import annotations

import os
import sys

DAEMON_DIR = "/"


def leave_start_directory() -> str | None:
    """Move to ``/`` and return the directory the daemon was started in, where its commands start.

    None when it was removed before start-up, and commands then start in ``/`` too."""
    try:
        start = os.getcwd()
    except FileNotFoundError:
        start = None
    if start is not None:
        sys.path[:] = [os.path.normpath(os.path.join(start, entry)) for entry in sys.path]
    os.chdir(DAEMON_DIR)
    return start
