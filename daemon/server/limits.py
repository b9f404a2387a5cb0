"""How many connections the socket server holds at once, and what it does past that.

Without a bound, idle clients use up the descriptors and uvloop then fails every ``accept`` in
silence. Past the bound the oldest connection still sending its request makes room, and a
reserve keeps ``status``, ``health``, ``cancel`` and ``reload`` answering.
"""

from __future__ import annotations

import resource

from daemon.log.logs import get_logger

log = get_logger("runbroker.server")

CONTROL_RESERVE = 64  # connections past the bound that may still ask for a control op
DESCRIPTOR_RESERVE = 256  # descriptors left for the daemon's own use (jobs' pipes, database)
_SETTLED = 0.9  # an incident is over once the connections are this far below the bound
_FD_SETTLED = 64  # ... or, of descriptors, once one is accepted this far below the limit


def descriptor_limit() -> int:
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return 1 << 30 if soft == resource.RLIM_INFINITY else soft


class ConnectionLimits:
    """The bound, and which limit (if any) the connections are meeting now."""

    def __init__(self, max_connections: int, nofile: int | None = None) -> None:
        self.nofile = descriptor_limit() if nofile is None else nofile
        spare = min(DESCRIPTOR_RESERVE, self.nofile // 4)  # a low limit keeps a quarter
        reserve = min(CONTROL_RESERVE, self.nofile // 16)
        self.bound = max(1, min(max_connections, self.nofile - spare - reserve))
        self.reserve_end = self.bound + reserve
        self.descriptor_high = max(1, self.nofile - spare // 2)
        self.limited = ""  # the incident under way: "connections" or "descriptors"

    def meets(self, connections: int, fd: int) -> str:
        """Which limit a connection just accepted meets (``""``: none), logging the incident once.

        ``connections`` are those held now, itself included, and ``fd`` its descriptor."""
        limit = ""
        if fd >= self.descriptor_high:
            limit = "descriptors"
        elif connections > self.bound:
            limit = "connections"
        if not limit:
            if self.limited == "descriptors" and fd < self.descriptor_high - _FD_SETTLED:
                self._over(connections)
            return ""
        if not self.limited:
            self.limited = limit
            log.warning(
                "socket.connections_limited",
                limit=limit,
                connections=connections,
                max_connections=self.bound,
                descriptor=fd,
                descriptor_limit=self.nofile,
            )
        return limit

    def settle(self, connections: int) -> None:
        """A connection ended: an incident of connections is over once they are well below
        the bound (one of descriptors, once a connection gets a descriptor well below)."""
        if self.limited == "connections" and connections < self.bound * _SETTLED:
            self._over(connections)

    def _over(self, connections: int) -> None:
        log.info("socket.connections_normal", limit=self.limited, connections=connections)
        self.limited = ""
