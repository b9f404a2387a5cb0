"""Child processes: the command runner, the PID-1 orphan reaper and the watchdog.

Commands start with ``os.posix_spawn`` so that a start costs the same whatever the daemon's
memory. The reaper waits only for zombies the supervisor has not recorded, because a
``waitpid(-1)`` reaper makes uvloop hang (FIELD-NOTES).
"""

from daemon.core.process.lines import OutputSink
from daemon.core.process.spawn import SpawnError
from daemon.core.process.supervisor import ChildSupervisor, CommandOutcome, describe_returncode

__all__ = ["ChildSupervisor", "CommandOutcome", "OutputSink", "SpawnError", "describe_returncode"]
