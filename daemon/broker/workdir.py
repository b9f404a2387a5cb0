"""The daemon's working directory: ``/`` once it has started, as dumb-init does, so that it
holds no directory (a volume it was started in can be unmounted, a build directory removed);
the commands it runs still start in the directory it was started in (the image's ``WORKDIR``,
``docker run -w``), where a command such as ``python manage.py`` expects to be.

Every relative path is made absolute first: the settings that name files
(``daemon.settings``), and the relative entries of ``sys.path`` (``python -m daemon`` puts
the start directory there as ``''``), so a handler module a reload imports later is found
where it would have been found at start-up.
"""

from __future__ import annotations

import os
import sys

DAEMON_DIR = "/"


def leave_start_directory() -> str | None:
    """Move to ``/``; returns the directory the daemon was started in, where its commands
    start (None: it was removed before start-up, and they start in ``/`` too)."""
    try:
        start = os.getcwd()
    except FileNotFoundError:
        start = None
    if start is not None:
        sys.path[:] = [os.path.normpath(os.path.join(start, entry)) for entry in sys.path]
    os.chdir(DAEMON_DIR)
    return start
