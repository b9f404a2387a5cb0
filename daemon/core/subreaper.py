"""Where the orphans of the jobs go, so that the reaper can take them.

When the daemon is not PID 1 (``docker run --init``, a shared process namespace, a shell), a
job's escaped grandchildren would outlive it unseen: it asks to be their child subreaper
(``PR_SET_CHILD_SUBREAPER``, as tini's ``-s`` does), so they come back to it.
"""

from __future__ import annotations

import os

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h

MODE_PID1 = "pid1"  # the kernel gives the daemon every orphan of its PID namespace
MODE_SUBREAPER = "subreaper"  # not PID 1: the orphans of the daemon's descendants
MODE_NONE = "none"  # not PID 1, and the kernel refused: orphans go elsewhere

MODE_TEXT = {
    MODE_PID1: "reaping orphans as PID 1",
    MODE_SUBREAPER: "reaping the jobs' orphans as their child subreaper (not PID 1)",
    MODE_NONE: "NOT reaping orphans (not PID 1, and PR_SET_CHILD_SUBREAPER was refused)",
}


def adopt_orphans() -> str:
    """Make the orphans of this process's descendants come back to it, and return the mode.

    Called once by the daemon at start, never by a library user or a test process."""
    if os.getpid() == 1:
        return MODE_PID1
    import ctypes  # here: ``runbroker status`` reads this module's texts, and stays cold-fast

    libc = ctypes.CDLL(None, use_errno=True)
    one, zero = ctypes.c_ulong(1), ctypes.c_ulong(0)
    if libc.prctl(ctypes.c_int(PR_SET_CHILD_SUBREAPER), one, zero, zero, zero) != 0:
        return MODE_NONE
    return MODE_SUBREAPER
