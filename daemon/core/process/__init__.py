"""Child processes: the command runner (own session and process group, SIGTERM, grace,
SIGKILL), the PID-1 orphan reaper and the watchdog.

Commands start with ``os.posix_spawn`` (``spawn``), which glibc implements with
``clone(CLONE_VFORK)``: the cost of a start does not grow with the daemon's memory. Its exit is
seen through a pidfd on the event loop, its output through the pipes' own descriptors
(``child``, ``lines``): no transports. The ``supervisor`` records every child it starts by pid
while it lives; the ``reaper`` waits only for zombies that are *not* recorded (see FIELD-NOTES:
a ``waitpid(-1)`` reaper makes uvloop hang), at each SIGCHLD and every second. The
``watchdog`` is a process beside the daemon that kills the jobs' groups when the daemon cannot.
"""

from daemon.core.process.lines import OutputSink
from daemon.core.process.spawn import SpawnError
from daemon.core.process.supervisor import ChildSupervisor, CommandOutcome, describe_returncode

__all__ = ["ChildSupervisor", "CommandOutcome", "OutputSink", "SpawnError", "describe_returncode"]
